//===- drt/PathUse.h - Internal paths a backend's work took ----*- C++ -*-===//
//
// A backend reaches much of its code only on some paths: a copy large enough
// to be split between threads, a block served from a pool, a staging buffer
// shared by transfers. A bug in such a path (a lock dropped, a buffer handed
// out twice) shows only when the path is taken, and a bug in machinery that
// threads share shows only when two threads are inside it at once. A backend
// that counts its paths with a PathCounter each and reports them
// (DeviceManager::pathUses) lets a test suite see both, and steer towards
// them, without knowing the backend's internals.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_PATHUSE_H
#define DRT_PATHUSE_H

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace drt {

/// What a device reports about one of its internal paths.
struct PathUse {
  /// A short name, unique among the device's paths ("parallel-copy").
  std::string name;
  /// Operations of several threads may be inside the path at once: it is
  /// machinery they share, which a test suite tries to make them meet in.
  bool concurrent = false;
  /// Times the path was entered.
  uint64_t uses = 0;
  /// Times it was entered while another use was still inside it.
  uint64_t overlaps = 0;
};

/// Counts the uses of one path and the uses that overlapped another: two
/// atomic increments per use, and no lock, so that counting changes no
/// interleaving the path itself would see.
class PathCounter {
public:
  /// A path named \p name; \p concurrent as in PathUse.
  PathCounter(std::string name, bool concurrent)
      : name_(std::move(name)), concurrent_(concurrent) {}
  PathCounter(const PathCounter &) = delete;
  PathCounter &operator=(const PathCounter &) = delete;

  /// One use of the path, from enter() until it is destroyed (or moved
  /// from and its successor is).
  class Scope {
  public:
    /// Takes over \p other's use.
    Scope(Scope &&other) noexcept
        : counter_(std::exchange(other.counter_, nullptr)) {}
    Scope &operator=(Scope &&) = delete;
    ~Scope() {
      if (counter_)
        counter_->inside_.fetch_sub(1, std::memory_order_acq_rel);
    }

  private:
    friend class PathCounter;
    explicit Scope(PathCounter *counter) : counter_(counter) {}
    PathCounter *counter_;
  };

  /// Enters the path. A use is counted as overlapping when another is
  /// inside, whichever thread that is: a path's callers place the scope
  /// where one thread cannot be inside twice. Placed before the lock that
  /// serialises the path (if any), the overlap says that two threads wanted
  /// it at once, which is what a missing lock would let them race in.
  [[nodiscard]] Scope enter() {
    uses_.fetch_add(1, std::memory_order_relaxed);
    if (inside_.fetch_add(1, std::memory_order_acq_rel) != 0)
      overlaps_.fetch_add(1, std::memory_order_relaxed);
    return Scope(this);
  }

  /// Counts a use that no other can overlap: one made once, or wholly
  /// under the lock that serialises the path.
  void countUse() { uses_.fetch_add(1, std::memory_order_relaxed); }

  /// The counts so far.
  PathUse read() const {
    return {name_, concurrent_, uses_.load(std::memory_order_relaxed),
            overlaps_.load(std::memory_order_relaxed)};
  }

private:
  std::string name_;
  bool concurrent_;
  std::atomic<uint64_t> uses_{0}, overlaps_{0};
  std::atomic<unsigned> inside_{0};
};

} // namespace drt

#endif // DRT_PATHUSE_H
