//===- ParallelCopy.h - Host copies spread over threads ----------*- C++
//-*-===//
//
// A staged transfer copies every byte once more on the host, into or out of
// a pinned buffer, while the driver moves the chunk before or after. One
// thread copies at 5-11 GB/s, a discrete GPU's DMA from pinned memory runs
// at 50 GB/s and more, and a driver's own path for pageable memory at
// 6-15 GB/s (docs/performance.md): a staged transfer can only beat it when
// the host copy is spread over several threads.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_PARALLELCOPY_H
#define DRT_OPENCL_PARALLELCOPY_H

#include "drt/PathUse.h"

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace drt::opencl {

/// Copies host memory with up to threads() threads: the caller's and
/// threads() - 1 workers that live as long as the object. Safe to call from
/// several threads (their copies take turns).
class ParallelCopy {
public:
  /// Slices smaller than this are not worth a worker's wake-up (some
  /// microseconds): by default a copy of fewer than 2 * MinSliceBytes bytes
  /// is made by the caller alone.
  static constexpr size_t MinSliceBytes = size_t(256) << 10;

  /// \p threads copying threads, the caller's included (at least 1);
  /// slices of at least \p minSlice bytes (staging-min-slice-bytes).
  explicit ParallelCopy(unsigned threads, size_t minSlice = MinSliceBytes);
  ~ParallelCopy();
  ParallelCopy(const ParallelCopy &) = delete;
  ParallelCopy &operator=(const ParallelCopy &) = delete;

  /// The number of threads a copy may use.
  unsigned threads() const { return unsigned(workers_.size()) + 1; }
  /// The smallest slice a thread copies (the constructor's minSlice).
  size_t minSlice() const { return minSlice_; }

  /// memcpy(\p dst, \p src, \p bytes), in slices of at least the
  /// constructor's minSlice copied at once by the caller and the workers;
  /// returns once every byte is in place. The ranges must not overlap.
  void copy(void *dst, const void *src, size_t bytes);

  /// The number of threads a copy uses by default on this machine: half
  /// its hardware threads, from 1 to 4.
  static unsigned defaultThreads();

  /// The copies split between threads so far, as the path "parallel-copy":
  /// machinery the threads of every transfer share (its workers hold one
  /// copy's state at a time). A use enters it before the copies take turns,
  /// so two threads' copies meeting in it count as an overlap.
  PathUse pathUse() const { return path_.read(); }

private:
  void work(unsigned index);

  /// Serialises copies: one at a time uses the workers.
  std::mutex copying_;
  /// Guards the fields below.
  std::mutex mutex_;
  std::condition_variable start_, done_;
  /// The copy being made: its slices, one per thread, the caller's first.
  char *dst_ = nullptr;
  const char *src_ = nullptr;
  size_t bytes_ = 0;
  unsigned slices_ = 0;
  /// Counts the copies handed to the workers, and the workers' slices of
  /// the current one still to finish.
  unsigned long long round_ = 0;
  unsigned pending_ = 0;
  bool exit_ = false;
  size_t minSlice_ = MinSliceBytes;
  PathCounter path_{"parallel-copy", true};
  std::vector<std::thread> workers_;
};

} // namespace drt::opencl

#endif // DRT_OPENCL_PARALLELCOPY_H
