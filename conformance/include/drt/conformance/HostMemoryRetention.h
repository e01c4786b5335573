//===- drt/conformance/HostMemoryRetention.h - Freed memory -*- C++ -*-===//
//
// A process setting for the programs that run scenarios.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_HOSTMEMORYRETENTION_H
#define DRT_CONFORMANCE_HOSTMEMORYRETENTION_H

namespace drt::conformance {

/// Asks the C library to keep the host memory that scenarios free for the
/// next ones instead of handing it back to the system: blocks of up to
/// 32 MiB come from the heap, and up to 256 MiB of freed heap stays mapped.
/// Scenarios create and drop tensors of up to megabytes every few steps
/// (host storage, the model's copy, a simulated device's memory), and memory
/// mapped anew for each is faulted in and zero-filled page by page by the
/// kernel: most of a generated step's time with tensors of mixed sizes on a
/// virtual machine (docs/performance.md). Larger blocks are still mapped
/// and unmapped each time, so a scenario's peak memory does not grow. For
/// the programs that run scenarios; a no-op where the C library is not
/// glibc, and where an allocator of its own replaces malloc (the
/// sanitizers').
void retainFreedHostMemory();

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_HOSTMEMORYRETENTION_H
