//===- PinnedHostMemory.cpp - Tensor storage the device DMAs --------------===//
#include "PinnedHostMemory.h"

#include "OpenCLDriver.h"
#include "OpenCLSupport.h"

#include <map>
#include <mutex>

namespace drt::opencl {

namespace {

/// A live allocation: the buffer whose mapped memory it is.
struct PinnedRange {
  uintptr_t end = 0;
  cl_mem buffer = nullptr;
  void *mapped = nullptr;
};

/// The mapped ranges of every pinned allocation of the process, by start.
class PinnedRanges {
public:
  static PinnedRanges &instance() {
    static PinnedRanges ranges;
    return ranges;
  }
  void add(uintptr_t start, PinnedRange range) {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_[start] = range;
  }
  std::optional<PinnedRange> remove(uintptr_t start) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(start);
    if (it == ranges_.end())
      return std::nullopt;
    PinnedRange out = it->second;
    ranges_.erase(it);
    return out;
  }
  bool contains(uintptr_t start, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.upper_bound(start);
    if (it == ranges_.begin())
      return false;
    --it;
    // start may lie past the end of the range just below it.
    return start >= it->first && start < it->second.end &&
           bytes <= it->second.end - start;
  }

private:
  std::mutex mutex_;
  std::map<uintptr_t, PinnedRange> ranges_;
};

/// Storage is aligned to this (TensorStorage's promise).
constexpr uintptr_t StorageAlignment = 64;

class OpenCLPinnedMemory : public HostMemory {
public:
  OpenCLPinnedMemory(cl_context context, cl_command_queue queue,
                     std::string who)
      : context_(context), queue_(queue), who_(std::move(who)) {}
  ~OpenCLPinnedMemory() override {
    driver_.releaseCommandQueue(queue_);
    driver_.releaseContext(context_);
  }

  std::string describe() const override {
    return "pinned host memory of OpenCL device '" + who_ + "'";
  }
  bool isPinned() const override { return true; }

  Expected<std::byte *> allocate(size_t bytes) override {
    // Mapped memory is page-aligned on the drivers seen so far; the extra
    // bytes keep the promise of 64-byte alignment on any other.
    size_t total = bytes + StorageAlignment;
    auto what = [&] {
      return "(" + std::to_string(bytes) + " bytes of " + describe() + ")";
    };
    cl_int rc = CL_SUCCESS;
    cl_mem buffer = driver_.createBuffer(
        context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, total, &rc);
    if (rc != CL_SUCCESS)
      return openCLError(rc, "clCreateBuffer", what());
    void *mapped = driver_.enqueueMapBuffer(queue_, buffer, CL_TRUE,
                                            CL_MAP_READ | CL_MAP_WRITE, total,
                                            nullptr, &rc);
    if (rc != CL_SUCCESS) {
      driver_.releaseMemObject(buffer);
      return openCLError(rc, "clEnqueueMapBuffer", what());
    }
    uintptr_t start =
        (reinterpret_cast<uintptr_t>(mapped) + StorageAlignment - 1) /
        StorageAlignment * StorageAlignment;
    PinnedRanges::instance().add(start, {start + bytes, buffer, mapped});
    return reinterpret_cast<std::byte *>(start);
  }

  void deallocate(std::byte *data, size_t) noexcept override {
    std::optional<PinnedRange> range =
        PinnedRanges::instance().remove(reinterpret_cast<uintptr_t>(data));
    if (!range)
      return;
    // No wait for the unmap: the driver deletes the buffer once its
    // reference is gone and the commands using it (the unmap) are done, and
    // no transfer can still use the memory (the tensor's storage outlives
    // its transfers). The flush submits the unmap now rather than with the
    // queue's next command.
    driver_.enqueueUnmapMemObject(queue_, range->buffer, range->mapped);
    driver_.flush(queue_);
    driver_.releaseMemObject(range->buffer);
  }

private:
  OpenCLDriver driver_;
  cl_context context_;
  cl_command_queue queue_;
  std::string who_;
};

} // namespace

bool isPinnedHostMemory(const void *data, uint64_t bytes) {
  return PinnedRanges::instance().contains(reinterpret_cast<uintptr_t>(data),
                                           bytes);
}

Expected<std::shared_ptr<HostMemory>>
makePinnedHostMemory(cl_context context, cl_device_id device, std::string who) {
  OpenCLDriver driver;
  std::string where =
      "creating pinned host memory of OpenCL device '" + who + "'";
  if (cl_int rc = driver.retainContext(context))
    return openCLError(rc, "clRetainContext", where);
  cl_int rc = CL_SUCCESS;
  cl_command_queue queue = driver.createCommandQueue(context, device, &rc);
  if (rc != CL_SUCCESS) {
    driver.releaseContext(context);
    return openCLError(rc, "clCreateCommandQueue", where);
  }
  return std::shared_ptr<HostMemory>(
      std::make_shared<OpenCLPinnedMemory>(context, queue, std::move(who)));
}

} // namespace drt::opencl
