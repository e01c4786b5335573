//===- CrashArena.cpp - Crash reports without the heap --------------------===//
//
// Replaces the global operator new and delete: the object is linked into a
// program only when it calls serveCrashReportsFromArena().
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/CrashArena.h"
#include "drt/conformance/Runner.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||     \
    __has_feature(memory_sanitizer)
#define DRT_CRASH_ARENA_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DRT_CRASH_ARENA_SANITIZED 1
#endif

#ifdef DRT_CRASH_ARENA_SANITIZED

void drt::conformance::serveCrashReportsFromArena() {}

#else

namespace {

/// Set by the fatal signal's handler, never cleared: the process ends or
/// becomes another program after the report.
std::atomic<bool> serveFromArena{false};

/// What the report may allocate: the scenario's text several times over. In
/// the program's zero-filled data, so untouched unless a crash needs it.
constexpr size_t ArenaBytes = size_t(64) << 20;
alignas(64) std::byte arena[ArenaBytes];
std::atomic<size_t> arenaUsed{0};

/// \p bytes from the arena at \p alignment; null when it is spent.
void *fromArena(size_t bytes, size_t alignment) {
  size_t used = arenaUsed.load(std::memory_order_relaxed);
  for (;;) {
    size_t start = (used + alignment - 1) / alignment * alignment;
    if (start > ArenaBytes || bytes > ArenaBytes - start)
      return nullptr;
    if (arenaUsed.compare_exchange_weak(used, start + bytes,
                                        std::memory_order_relaxed))
      return arena + start;
  }
}

void *allocate(size_t bytes, size_t alignment, bool mayThrow) {
  if (bytes == 0)
    bytes = 1;
  for (;;) {
    void *p = nullptr;
    if (serveFromArena.load(std::memory_order_relaxed))
      p = fromArena(bytes, std::max<size_t>(alignment, alignof(max_align_t)));
    else if (alignment <= alignof(max_align_t))
      p = std::malloc(bytes);
    else if (posix_memalign(&p, alignment, bytes) != 0)
      p = nullptr;
    if (p)
      return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler || serveFromArena.load(std::memory_order_relaxed)) {
      if (mayThrow)
        throw std::bad_alloc();
      return nullptr;
    }
    handler();
  }
}

void release(void *p) noexcept {
  if (!serveFromArena.load(std::memory_order_relaxed))
    std::free(p);
}

void enterArena() { serveFromArena.store(true, std::memory_order_relaxed); }

} // namespace

void drt::conformance::serveCrashReportsFromArena() {
  setBeforeCrashReport(enterArena);
}

void *operator new(size_t bytes) { return allocate(bytes, 1, true); }
void *operator new[](size_t bytes) { return allocate(bytes, 1, true); }
void *operator new(size_t bytes, const std::nothrow_t &) noexcept {
  return allocate(bytes, 1, false);
}
void *operator new[](size_t bytes, const std::nothrow_t &) noexcept {
  return allocate(bytes, 1, false);
}
void *operator new(size_t bytes, std::align_val_t a) {
  return allocate(bytes, size_t(a), true);
}
void *operator new[](size_t bytes, std::align_val_t a) {
  return allocate(bytes, size_t(a), true);
}
void *operator new(size_t bytes, std::align_val_t a,
                   const std::nothrow_t &) noexcept {
  return allocate(bytes, size_t(a), false);
}
void *operator new[](size_t bytes, std::align_val_t a,
                     const std::nothrow_t &) noexcept {
  return allocate(bytes, size_t(a), false);
}

void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, size_t) noexcept { release(p); }
void operator delete[](void *p, size_t) noexcept { release(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete(void *p, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, std::align_val_t) noexcept { release(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept {
  release(p);
}
void operator delete(void *p, std::align_val_t,
                     const std::nothrow_t &) noexcept {
  release(p);
}
void operator delete[](void *p, std::align_val_t,
                       const std::nothrow_t &) noexcept {
  release(p);
}

#endif
