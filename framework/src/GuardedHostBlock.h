//===- GuardedHostBlock.h - Host blocks between no-access pages -*- C++ -*-===//
//
// Large guarded tensor storage (HostGuardScope) lives in its own mapping,
// with pages no one may touch before and after it, so that a backend writing
// far outside the host buffer a transfer hands it (a chunk placed at the
// wrong offset, a length in the wrong units) faults at the write instead of
// corrupting whatever the heap put next, which glibc may only notice later,
// in a state where no report can run. A freed block's mapping is kept, with
// its pages, for a later block of about its size (what a write after the
// tensor is gone lands in, as with the heap: making freed pages no-access
// too would cost a page fault a page on reuse, a third of a run's time).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_GUARDEDHOSTBLOCK_H
#define DRT_FRAMEWORK_GUARDEDHOSTBLOCK_H

#include <cstddef>

namespace drt {

/// Storage of at least this many bytes gets a guarded block while guards are
/// on; smaller storage keeps HostGuardBytes of pattern on each side in the
/// heap (a mapping per small tensor would cost a system call or more each).
inline constexpr size_t GuardedBlockMinBytes = 64 * 1024;

/// A block holding its bytes at data, 64-byte aligned, with guardBefore
/// accessible bytes before data and guardAfter after its bytes (up to the
/// end of its last page), then no-access pages on both sides.
struct GuardedHostBlock {
  std::byte *data = nullptr;
  size_t guardBefore = 0;
  size_t guardAfter = 0;
  /// The mapping the block lies in, and the bytes of it that a block may
  /// use (the pages before the block's own are no-access too).
  std::byte *mapping = nullptr;
  size_t capacity = 0;
};

/// A guarded block for \p bytes with at least \p guard accessible bytes on
/// each side, whose contents are unspecified; null data when the system
/// refuses the mapping (the caller falls back to the heap).
GuardedHostBlock allocateGuardedHostBlock(size_t bytes, size_t guard);

/// Gives back \p block, which allocateGuardedHostBlock(\p bytes, ...)
/// returned. Its mapping is kept for a later block of about its size, or
/// unmapped.
void freeGuardedHostBlock(const GuardedHostBlock &block, size_t bytes) noexcept;

} // namespace drt

#endif // DRT_FRAMEWORK_GUARDEDHOSTBLOCK_H
