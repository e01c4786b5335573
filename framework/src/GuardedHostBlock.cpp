//===- GuardedHostBlock.cpp - Host blocks between no-access pages ---------===//
#include "GuardedHostBlock.h"
#include "drt/HostMemory.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <optional>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace drt {

namespace {

size_t pageBytes() {
  static const size_t bytes = size_t(sysconf(_SC_PAGESIZE));
  return bytes;
}

size_t roundUpToPages(size_t bytes) {
  size_t page = pageBytes();
  return (bytes + page - 1) / page * page;
}

/// No-access bytes on each side of a block's accessible pages: a write at a
/// wrong multiple of a chunk or of a staging buffer, or an offset counted in
/// elements instead of bytes, lands megabytes away, still inside them. Only
/// address space, no memory.
size_t farGuardBytes(size_t accessible) {
  return std::max<size_t>(size_t(64) << 20, accessible);
}

/// A mapping: no-access pages, then capacity bytes of which the last
/// accessible ones may be read and written, then no-access pages.
struct Mapping {
  std::byte *start;
  size_t capacity;
  size_t accessible;

  std::byte *capacityEnd() const {
    return start + farGuardBytes(capacity) + capacity;
  }
};

/// Mappings of freed blocks, kept with their pages for a later block of
/// about their size: mapping anew costs system calls and a page fault per
/// page, and scenarios create tensors of the same few sizes again and again.
class FreedMappings {
public:
  /// A kept mapping of \p capacity for a block of \p accessible bytes: the
  /// latest kept one whose accessible bytes are those already (no system
  /// call needed), else the latest of that capacity; none when none is kept.
  std::optional<Mapping> take(size_t capacity, size_t accessible) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<size_t> best;
    for (size_t i = kept_.size(); i-- > 0;) {
      const Mapping &m = kept_[i];
      if (m.capacity != capacity)
        continue;
      if (!best)
        best = i;
      if (m.accessible == accessible) {
        best = i;
        break;
      }
    }
    if (!best)
      return std::nullopt;
    Mapping m = kept_[*best];
    kept_.erase(kept_.begin() + std::ptrdiff_t(*best));
    keptBytes_ -= m.capacity;
    return m;
  }

  /// Keeps \p m, or unmaps it, and the oldest kept ones, to stay within
  /// the bounds.
  void give(const Mapping &m) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (m.capacity > MaxMappingBytes) {
      unmap(m);
      return;
    }
    kept_.push_back(m);
    keptBytes_ += m.capacity;
    while (keptBytes_ > MaxKeptBytes || kept_.size() > MaxKeptMappings) {
      unmap(kept_.front());
      keptBytes_ -= kept_.front().capacity;
      kept_.erase(kept_.begin());
    }
  }

  static void unmap(const Mapping &m) {
    munmap(m.start, m.capacity + 2 * farGuardBytes(m.capacity));
  }

private:
  /// The bounds of what is kept, in the spirit of the heap's own retention
  /// (conformance's retainFreedHostMemory): larger mappings are unmapped.
  static constexpr size_t MaxMappingBytes = size_t(32) << 20;
  static constexpr size_t MaxKeptBytes = size_t(256) << 20;
  static constexpr size_t MaxKeptMappings = 64;

  std::mutex mutex_;
  std::vector<Mapping> kept_;
  size_t keptBytes_ = 0;
};

FreedMappings &freedMappings() {
  // Never destroyed: storage may be freed during static destruction.
  static FreedMappings *mappings = new FreedMappings;
  return *mappings;
}

/// Makes the last \p accessible bytes of \p m's capacity, and no others,
/// accessible; false when the system refuses.
bool setAccessible(Mapping &m, size_t accessible) {
  std::byte *end = m.capacityEnd();
  if (accessible > m.accessible &&
      mprotect(end - accessible, accessible - m.accessible,
               PROT_READ | PROT_WRITE) != 0)
    return false;
  if (accessible < m.accessible &&
      mprotect(end - m.accessible, m.accessible - accessible, PROT_NONE) != 0)
    return false;
  m.accessible = accessible;
  return true;
}

} // namespace

void adviseHugePages(void *data, size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t Huge = uintptr_t(2) << 20;
  uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + Huge - 1) & ~(Huge - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(Huge - 1);
  // Advice only: where the system declines it, pages stay small.
  if (end > begin)
    (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

GuardedHostBlock allocateGuardedHostBlock(size_t bytes, size_t guard) {
  size_t accessible = roundUpToPages(bytes + 2 * guard);
  // Capacities are powers of two, so that a freed mapping serves every
  // later block of its class: its pages are faulted in once, not for each
  // block of a size not seen before.
  size_t capacity = std::bit_ceil(accessible);
  std::optional<Mapping> kept = freedMappings().take(capacity, accessible);
  Mapping m;
  if (kept) {
    m = *kept;
  } else {
    void *mapped =
        mmap(nullptr, capacity + 2 * farGuardBytes(capacity), PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped == MAP_FAILED)
      return {};
    m = {static_cast<std::byte *>(mapped), capacity, 0};
    adviseHugePages(m.start + farGuardBytes(capacity), capacity);
  }
  // The block's pages end where the capacity ends, so that the far guard
  // after them is the same whatever the block's size.
  if (!setAccessible(m, accessible)) {
    FreedMappings::unmap(m);
    return {};
  }
  GuardedHostBlock block;
  block.data = m.capacityEnd() - accessible + guard;
  block.guardBefore = guard;
  block.guardAfter = accessible - guard - bytes;
  block.mapping = m.start;
  block.capacity = m.capacity;
  return block;
}

void freeGuardedHostBlock(const GuardedHostBlock &block,
                          size_t bytes) noexcept {
  freedMappings().give({block.mapping, block.capacity,
                        block.guardBefore + bytes + block.guardAfter});
}

} // namespace drt
