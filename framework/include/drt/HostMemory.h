//===- drt/HostMemory.h - Where tensor host storage comes from -*- C++ -*-===//
//
// A tensor's host storage is pageable memory from operator new unless the
// tensor is created with a HostMemory: memory a device can DMA from and
// into directly (pinned, page-locked), which a DeviceManager hands out
// (DeviceManager::pinnedHostMemory). The residency rules do not change with
// it; a transfer of pinned storage needs no staging copy.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_HOSTMEMORY_H
#define DRT_HOSTMEMORY_H

#include "drt/Error.h"

#include <cstddef>
#include <string>

namespace drt {

/// A source of host memory for tensor storage. Tensors hold it by shared
/// pointer, so it lives until the last storage allocated from it is gone,
/// also after the device manager that handed it out is shut down or
/// destroyed. Thread-safe.
class HostMemory {
public:
  virtual ~HostMemory();
  /// What the memory is, for messages ("pinned memory of OpenCL device
  /// 'd0'").
  virtual std::string describe() const = 0;
  /// True when a device can DMA from and into the memory directly.
  virtual bool isPinned() const = 0;
  /// \p bytes (at least 1) of memory aligned to at least 64 bytes, or
  /// OutOfMemory (or DeviceError) naming the size and describe(). The
  /// bytes need not be zero: the framework fills a tensor's storage itself.
  /// With host guards on (the conformance runner), a tensor's bytes start
  /// HostGuardBytes into the block.
  virtual Expected<std::byte *> allocate(size_t bytes) = 0;
  /// Gives back \p data, which allocate(\p bytes) returned; called exactly
  /// once for each successful allocate.
  virtual void deallocate(std::byte *data, size_t bytes) noexcept = 0;
};

/// Bytes of guard before and after the host storage of a tensor created
/// while a HostGuardScope is alive.
inline constexpr size_t HostGuardBytes = 64;

/// Guard bytes around tensor host storage, which catch a backend that
/// writes outside the host buffer a transfer hands it (a read-back rounded
/// up to a burst, a destination off by some bytes). While at least one
/// scope is alive, each new tensor storage, pageable or from a HostMemory,
/// has HostGuardBytes before and after its bytes, filled with a fixed
/// pattern. Every copy from a device into the storage checks both once the
/// backend completes it, whatever its outcome; bytes that changed are
/// reported through that device's takeBackgroundErrors() (a DeviceError
/// naming the tensor and the first changed byte) and the guard is written
/// again. The host bytes of a guarded storage are overwritten with
/// StaleHostByte whenever its record becomes Device, so that a read-back
/// must bring every byte back. Storage created outside any scope has no
/// guard; the setting is read when the storage is created, so scopes on
/// several threads are safe. The conformance runner holds one while it runs
/// a scenario.
class HostGuardScope {
public:
  HostGuardScope();
  ~HostGuardScope();
  HostGuardScope(const HostGuardScope &) = delete;
  HostGuardScope &operator=(const HostGuardScope &) = delete;
};

/// The byte that fills the host bytes of a guarded storage whose record
/// becomes Device (its host copy is stale, semantics §2): what a read-back
/// that misses some bytes leaves in them.
inline constexpr unsigned char StaleHostByte = 0xcd;

/// True while a HostGuardScope is alive on any thread.
bool hostGuardsEnabled();

/// Blocks of at least this many bytes come from a mapping of their own in
/// glibc's malloc, whatever its settings (the largest threshold it allows),
/// so that their pages are fresh, and faulted in one by one as first
/// touched, every time.
inline constexpr size_t MappedAllocationBytes = size_t(32) << 20;

/// Asks the system to back the whole 2 MiB pages inside [data, data + bytes)
/// with huge pages (Linux's transparent huge pages, where they are enabled
/// for madvise): first touching a large block then costs a fault for every
/// 2 MiB instead of every 4 KiB, which on virtual machines is most of a
/// large scenario's time. For memory not yet touched, from a mapping of its
/// own; does nothing where the system has no such advice.
void adviseHugePages(void *data, size_t bytes) noexcept;

} // namespace drt

#endif // DRT_HOSTMEMORY_H
