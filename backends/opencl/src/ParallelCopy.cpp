//===- ParallelCopy.cpp - Host copies spread over threads -----------------===//
#include "ParallelCopy.h"

#include <algorithm>
#include <cstring>

namespace drt::opencl {

namespace {
/// Bytes [begin, end) of slice \p index of \p slices over \p bytes, each a
/// multiple of 64 bytes (a cache line) but the last.
std::pair<size_t, size_t> sliceOf(size_t bytes, unsigned slices,
                                  unsigned index) {
  size_t each = (bytes / slices + 63) & ~size_t(63);
  size_t begin = std::min(bytes, each * index);
  size_t end = index + 1 == slices ? bytes : std::min(bytes, begin + each);
  return {begin, end};
}
} // namespace

ParallelCopy::ParallelCopy(unsigned threads, size_t minSlice)
    : minSlice_(std::max<size_t>(minSlice, 1)) {
  for (unsigned i = 1; i < std::max(threads, 1u); ++i)
    workers_.emplace_back([this, i] { work(i); });
}

ParallelCopy::~ParallelCopy() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exit_ = true;
  }
  start_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

unsigned ParallelCopy::defaultThreads() {
  return std::clamp(std::thread::hardware_concurrency() / 2, 1u, 4u);
}

void ParallelCopy::copy(void *dst, const void *src, size_t bytes) {
  // An empty copy may come with null pointers, which memcpy must not get.
  if (bytes == 0)
    return;
  unsigned slices = unsigned(
      std::min<size_t>(threads(), std::max<size_t>(bytes / minSlice_, 1)));
  if (slices < 2) {
    std::memcpy(dst, src, bytes);
    return;
  }
  PathCounter::Scope use = path_.enter();
  std::lock_guard<std::mutex> copying(copying_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dst_ = static_cast<char *>(dst);
    src_ = static_cast<const char *>(src);
    bytes_ = bytes;
    slices_ = slices;
    pending_ = slices - 1;
    ++round_;
  }
  start_.notify_all();
  auto [begin, end] = sliceOf(bytes, slices, 0);
  std::memcpy(static_cast<char *>(dst) + begin,
              static_cast<const char *>(src) + begin, end - begin);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

void ParallelCopy::work(unsigned index) {
  unsigned long long seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return exit_ || round_ != seen; });
    if (exit_)
      return;
    seen = round_;
    if (index >= slices_)
      continue;
    char *dst = dst_;
    const char *src = src_;
    auto [begin, end] = sliceOf(bytes_, slices_, index);
    lock.unlock();
    std::memcpy(dst + begin, src + begin, end - begin);
    lock.lock();
    if (--pending_ == 0)
      done_.notify_one();
  }
}

} // namespace drt::opencl
