//===- OpenCLDeviceManager.cpp - One OpenCL device as a DeviceManager -----===//
//
// Every allocation is one cl_mem in a LocationTable, so a stale handle is
// rejected before it can reach the driver. Transfers and kernels are enqueued
// non-blocking on one in-order queue; each submission pushes its event onto a
// FIFO that the completion thread waits on, and the completion thread calls
// the callbacks (never an OpenCL callback thread, so callbacks may call
// OpenCL themselves). A caller that waits for its work anyway makes blocking
// calls instead and delivers its completion itself (State::claimInline);
// blocking transfer calls are made without state.mutex
// (State::unlockForBlockingCall). Lock order: state.mutex before
// state.completionMutex; neither is held while a callback runs.
//
//===----------------------------------------------------------------------===//
#include "drt/opencl/OpenCLDevice.h"

#include "DeviceBlockPool.h"
#include "Kernels.h"
#include "OpenCLDriver.h"
#include "OpenCLSupport.h"
#include "ParallelCopy.h"
#include "PinnedHostMemory.h"

#include "drt/BackendRegistry.h"
#include "drt/FaultPlan.h"
#include "drt/LocationTable.h"
#include "drt/SyncTransfer.h"

#include <CL/cl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

namespace drt::opencl {

namespace {

/// One device allocation: \p bytes asked for, in a block of its size class.
struct Allocation {
  cl_mem buffer = nullptr;
  uint64_t bytes = 0;
  uint64_t blockBytes = 0;
};

/// A pinned host buffer that transfers are staged through, mapped for its
/// whole life: the driver DMAs between its mapped memory and the device.
struct StagingBuffer {
  cl_mem buffer = nullptr;
  void *mapped = nullptr;
};

/// Staging buffers kept for reuse once their transfer completes, by default
/// (staging-pool-buffers).
constexpr uint64_t DefaultPooledStagingBuffers = 8;

/// The smallest size class of device blocks.
constexpr uint64_t MinimumBlockBytes = 512;

/// One manager's completion that the calling thread is delivering itself
/// (State::submit), linked to the one it delivers around it, if any: a
/// shutdown of that manager started from a callback does not wait for its
/// own delivery, and one of any other manager does.
struct InlineDelivery {
  const void *state;
  const InlineDelivery *outer;
};
thread_local const InlineDelivery *inlineDeliveriesHere = nullptr;

/// True when the calling thread is delivering a completion of \p state.
bool deliveringInlineFor(const void *state) {
  for (const InlineDelivery *d = inlineDeliveriesHere; d; d = d->outer)
    if (d->state == state)
      return true;
  return false;
}

/// What a submitted command does, for messages: the text is built only when
/// a message needs it, not for every transfer.
struct Operation {
  enum class Kind { CopyToDevice, CopyFromDevice, Run };
  Kind kind = Kind::Run;
  /// A copy's bytes and device location.
  uint64_t bytes = 0;
  DeviceLocation location;
  /// A run's network.
  std::string network;

  /// "copy of 16 bytes to loc#1.1 on device 'd'", "run of network 'n' on
  /// device 'd'".
  std::string text(const std::string &device) const {
    if (kind == Kind::Run)
      return "run of network '" + network + "' on device '" + device + "'";
    return "copy of " + std::to_string(bytes) +
           (kind == Kind::CopyToDevice ? " bytes to " : " bytes from ") +
           location.toString() + " on device '" + device + "'";
  }
};

/// A submitted command whose completion the completion thread delivers.
struct Completion {
  /// The last command of the submission; null when the submission already
  /// waited for its commands (pipelined staging from the device).
  cl_event event = nullptr;
  /// Buffers retained until the command finished.
  std::vector<cl_mem> retained;
  /// Work done on the completion thread once the command finished
  /// (returning staging buffers for reuse).
  std::function<void()> after;
  CompletionCallback done;
  /// The operation, for messages.
  Operation operation;
  /// The execution status a planned driver fault reports for the command
  /// (OpenCLCall::CommandExecutionStatus), instead of the event's.
  std::optional<cl_int> failedStatus;
};

/// One node of a prepared function.
struct PreparedNode {
  KernelId kernel;
  /// Placeholder indices of the inputs and of the output.
  std::vector<size_t> inputs;
  size_t output;
  /// The element kind the node computes over (it decides the factor's type).
  ElemKind kind;
  double factor;
  size_t elements;
};

/// A function prepared by compileFunction.
struct PreparedFunction {
  std::vector<PreparedNode> nodes;
  /// Bytes of each placeholder, in placeholder order.
  std::vector<uint64_t> placeholderBytes;
  /// Bytes per element of each placeholder: kernels take element offsets.
  std::vector<uint64_t> placeholderElementBytes;
};

/// Sets the factor argument of a scale kernel over \p kind, in the type the
/// kernel takes (scaleFactorKind). Function::verify has checked that an
/// integer factor is one the kind holds, so the conversions are exact; a
/// float factor is rounded to nearest float.
cl_int setScaleFactor(OpenCLDriver &driver, cl_kernel kernel, cl_uint index,
                      ElemKind kind, double factor) {
  switch (scaleFactorKind(kind)) {
  case ElemKind::Int32: {
    cl_int value = static_cast<cl_int>(factor);
    return driver.setKernelArg(kernel, index, sizeof value, &value);
  }
  case ElemKind::Int64: {
    cl_long value = static_cast<cl_long>(factor);
    return driver.setKernelArg(kernel, index, sizeof value, &value);
  }
  case ElemKind::UInt8: {
    cl_uchar value = static_cast<cl_uchar>(factor);
    return driver.setKernelArg(kernel, index, sizeof value, &value);
  }
  default: {
    cl_float value = static_cast<cl_float>(factor);
    return driver.setKernelArg(kernel, index, sizeof value, &value);
  }
  }
}

/// Keeps \p buffer alive until \p c's command finishes: retained, or, when
/// the driver refuses to retain it, by waiting for the queue now.
void retainUntilDone(OpenCLDriver &driver, cl_command_queue queue,
                     Completion &c, cl_mem buffer) {
  if (driver.retainMemObject(buffer) == CL_SUCCESS)
    c.retained.push_back(buffer);
  else
    driver.finish(queue);
}

/// The driver fault a fault planned at a site (injectFault, the suite's
/// inject-fault) becomes, so that it takes the backend's own error path:
/// OutOfMemory makes the call that submits the site's work (\p submit) fail
/// with CL_MEM_OBJECT_ALLOCATION_FAILURE; DeviceError makes the allocation
/// fail with CL_INVALID_CONTEXT at the allocation site, and elsewhere the
/// submitted command fail on the device (its execution status
/// CL_OUT_OF_RESOURCES). (DeviceLost shuts the device down instead.)
DriverFault siteFault(ErrorCode code, FaultSite site, OpenCLCall submit) {
  if (code == ErrorCode::OutOfMemory)
    return {submit, 1, CL_MEM_OBJECT_ALLOCATION_FAILURE};
  if (site == FaultSite::Allocation)
    return {OpenCLCall::CreateBuffer, 1, CL_INVALID_CONTEXT};
  return {OpenCLCall::CommandExecutionStatus, 1, CL_OUT_OF_RESOURCES};
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The context and the built kernel program of each device, shared by every
/// manager of that device in the process (each has its own queue, buffers
/// and kernels). Creating a context and building the program are most of the
/// cost of a manager: about 100 ms on NVIDIA's driver for the context, and
/// POCL's compiler front end over the source even with a warm kernel cache.
/// The cache keeps one reference to each for the life of the process.
class DeviceProgramCache {
public:
  struct Entry {
    cl_context context = nullptr;
    cl_program program = nullptr;
  };
  static DeviceProgramCache &instance() {
    static DeviceProgramCache cache;
    return cache;
  }
  /// The device's context and program, each retained for the caller, or
  /// null ones when none was kept.
  Entry find(OpenCLDriver &driver, cl_device_id device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(device);
    if (it == entries_.end())
      return {};
    if (driver.retainContext(it->second.context) != CL_SUCCESS)
      return {};
    if (driver.retainProgram(it->second.program) != CL_SUCCESS) {
      driver.releaseContext(it->second.context);
      return {};
    }
    return it->second;
  }
  /// Keeps \p entry for \p device unless one is kept already.
  void keep(OpenCLDriver &driver, cl_device_id device, Entry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.count(device))
      return;
    if (driver.retainContext(entry.context) != CL_SUCCESS)
      return;
    if (driver.retainProgram(entry.program) != CL_SUCCESS) {
      driver.releaseContext(entry.context);
      return;
    }
    entries_.emplace(device, entry);
  }

  /// The binary of the device's program for a manager that builds a
  /// program of its own: the one kept, else that of the program kept for
  /// sharing, taken now (asking a driver for a binary is not free: POCL
  /// compiles every kernel into it, 3.5 ms here with a warm kernel cache),
  /// or null.
  std::shared_ptr<const std::vector<unsigned char>>
  binary(OpenCLDriver &driver, cl_device_id device) {
    cl_program shared = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = binaries_.find(device); it != binaries_.end())
        return it->second;
      // The cache's own reference keeps the program alive.
      if (auto it = entries_.find(device); it != entries_.end())
        shared = it->second.program;
    }
    if (!shared)
      return nullptr;
    keepBinary(driver, device, shared);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = binaries_.find(device);
    return it == binaries_.end() ? nullptr : it->second;
  }
  /// Keeps the binary of \p program, built for \p device from source, for
  /// managers that build a program of their own: from it the driver skips
  /// its compiler's front end (POCL: about 2 ms instead of 30). Once per
  /// device; a binary the driver does not give leaves none.
  void keepBinary(OpenCLDriver &driver, cl_device_id device,
                  cl_program program) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (binaries_.count(device))
        return;
    }
    size_t size = 0;
    if (driver.getProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size,
                              &size) != CL_SUCCESS ||
        size == 0)
      return;
    auto bytes = std::make_shared<std::vector<unsigned char>>(size);
    unsigned char *at = bytes->data();
    if (driver.getProgramInfo(program, CL_PROGRAM_BINARIES, sizeof at, &at) !=
        CL_SUCCESS)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    binaries_.emplace(device, std::move(bytes));
  }

private:
  std::mutex mutex_;
  std::map<cl_device_id, Entry> entries_;
  std::map<cl_device_id, std::shared_ptr<const std::vector<unsigned char>>>
      binaries_;
};

} // namespace

struct OpenCLDeviceManager::State {
  /// The manager's name, for messages.
  std::string deviceName;
  OpenCLDeviceInfo info;
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  std::array<cl_kernel, NumKernels> kernels{};
  uint64_t budget = 0;
  uint64_t baseAlignment = 1;
  /// The device flushes float denormals to zero (no CL_FP_DENORM).
  bool flushesDenormals = false;
  /// Pageable transfers of at least stagingMinBytes go through pinned
  /// staging buffers (pinned-staging, resolved by init()).
  bool pinnedStaging = false;
  uint64_t stagingMinBytes = 0;
  /// Bytes of each staging buffer: a staged transfer moves in chunks of at
  /// most it (chunkFor()).
  uint64_t stagingChunk = 0;
  /// A staged transfer that fills fewer buffers moves in this many chunks
  /// (staging-min-chunks), each of at least stagingMinSplit bytes
  /// (staging-min-split-bytes).
  uint64_t stagingMinChunks = 1;
  uint64_t stagingMinSplit = 0;
  /// Transfers that went through the staging buffers.
  uint64_t stagedTransfers = 0;
  /// Copies chunks into and out of the staging buffers (when staging).
  std::unique_ptr<ParallelCopy> stagingCopy;
  /// Most bytes of freed device blocks kept for reuse; 0: none.
  uint64_t poolLimit = 0;
  /// The context and program come from (or go to) the process's cache
  /// (shared-context).
  bool sharesContext = false;
  /// The paths pathUses() reports, besides the copy threads' own
  /// (stagingCopy). Each shared one is entered before the lock that
  /// serialises it: two threads' calls that meet there overlap.
  PathCounter stagingPath{"staging-buffers", true};
  PathCounter poolPath{"memory-pool", true};
  PathCounter poolReusePath{"pool-reuse", false};
  PathCounter kernelsPath{"kernels", true};
  PathCounter programCachePath{"program-cache", false};
  uint64_t programBuilds = 0;
  bool programReused = false;
  bool programFromBinary = false;
  double initSeconds = 0;
  double buildSeconds = 0;
  FaultPlan faults;
  /// Every OpenCL call goes through it (declared first of the objects it
  /// creates, so it outlives them in the destructor).
  OpenCLDriver driver;

  /// Guards everything below and serialises submissions to the queue (kernel
  /// arguments are set and enqueued under it).
  mutable std::mutex mutex;
  bool initialised = false;
  bool stopping = false;
  /// Kernels are launched in work-groups of KernelWorkGroupSize items
  /// (until the device refuses that size once).
  bool fixedWorkGroups = true;
  /// The buffers that blocking calls of transfers made without the lock
  /// (unlockForBlockingCall) move data into or out of, once per call.
  std::vector<cl_mem> buffersWithoutLock;
  std::condition_variable noCallsWithoutLock;
  LocationTable<Allocation> allocations;
  uint64_t used = 0;
  /// Bytes of the blocks of live allocations.
  uint64_t physical = 0;
  DeviceStats stats;
  DeviceBlockPool pool;
  OpenCLPoolStats poolStats;
  std::vector<StagingBuffer> stagingPool;
  /// Most buffers stagingPool keeps (staging-pool-buffers); the others go
  /// back to the driver when their transfer ends.
  uint64_t stagingPoolLimit = DefaultPooledStagingBuffers;
  /// Made at the first pinnedHostMemory() call.
  std::shared_ptr<HostMemory> pinnedMemory;
  std::map<std::string, PreparedFunction> functions;

  /// Guards the completion FIFO.
  std::mutex completionMutex;
  std::condition_variable completionReady;
  std::deque<Completion> completions;
  /// Completions queued or being delivered by the completion thread.
  size_t undelivered = 0;
  /// Completions being delivered inline by their callers (submit).
  size_t inlineDeliveries = 0;
  std::condition_variable inlineDone;
  bool completionExit = false;
  std::thread completionThread;

  /// True when the calling thread is to deliver the completion of the work
  /// it is about to submit itself (submit): it waits for the work anyway
  /// (callerWaitsForCompletion), sparing the hop to the completion thread,
  /// and every earlier completion is delivered, so callbacks keep the order
  /// of their submissions. Asked before enqueueing, so that the commands can
  /// be blocking ones (on NVIDIA's driver a non-blocking transfer of
  /// pageable memory is slower than a blocking one). Called with mutex held;
  /// a claim is counted until submit delivers it or dropInlineClaim.
  bool claimInline() {
    std::lock_guard<std::mutex> guard(completionMutex);
    if (!callerWaitsForCompletion() || undelivered != 0 ||
        std::this_thread::get_id() == completionThread.get_id())
      return false;
    ++inlineDeliveries;
    return true;
  }

  /// Ends a claim of claimInline.
  void dropInlineClaim() {
    {
      std::lock_guard<std::mutex> guard(completionMutex);
      --inlineDeliveries;
    }
    inlineDone.notify_all();
  }

  /// Calls back a submission that failed before submit: ends its claim
  /// (when \p claimed), releases \p lock (of mutex) and calls \p done with
  /// \p error.
  void failSubmission(std::unique_lock<std::mutex> &lock, bool claimed,
                      CompletionCallback &done, Error error) {
    if (claimed)
      dropInlineClaim();
    lock.unlock();
    done(std::move(error));
  }

  /// Releases \p lock (of mutex) for the \p blocking calls of a transfer
  /// into or out of \p buffer (a caller's blocking write or read, a staged
  /// transfer's waits for its chunks), so that other threads' work does not
  /// wait behind them; returns whether it did. The buffer is retained
  /// meanwhile (a concurrent free must not release it under the call) and
  /// listed in buffersWithoutLock (a concurrent free must not give it to
  /// the pool either, whence another allocation would take it while this
  /// call still writes into it): a shutdown waits for that list to empty
  /// before it releases the queue and the staging buffers. When the driver
  /// refuses the retain, the lock is kept.
  bool unlockForBlockingCall(std::unique_lock<std::mutex> &lock, bool blocking,
                             cl_mem buffer) {
    if (!blocking || driver.retainMemObject(buffer) != CL_SUCCESS)
      return false;
    buffersWithoutLock.push_back(buffer);
    lock.unlock();
    return true;
  }

  /// Ends unlockForBlockingCall: when it \p unlocked, takes \p lock again
  /// and releases \p buffer, or, given \p keep, hands the retain to it (a
  /// command of the transfer still runs: the buffer must outlive it).
  void relockAfterBlockingCall(std::unique_lock<std::mutex> &lock,
                               bool unlocked, cl_mem buffer,
                               Completion *keep = nullptr) {
    if (!unlocked)
      return;
    lock.lock();
    // A few entries at most (one per call in flight without the lock): a
    // vector, which allocates nothing once it has grown.
    auto at =
        std::find(buffersWithoutLock.begin(), buffersWithoutLock.end(), buffer);
    *at = buffersWithoutLock.back();
    buffersWithoutLock.pop_back();
    if (keep)
      keep->retained.push_back(buffer);
    else
      driver.releaseMemObject(buffer);
    if (buffersWithoutLock.empty())
      noCallsWithoutLock.notify_all();
  }

  /// Waits, with \p lock (of mutex) held, until no call is made without it:
  /// then only the holder calls the driver's transfer entry points.
  void waitForCallsWithoutLock(std::unique_lock<std::mutex> &lock) {
    noCallsWithoutLock.wait(lock,
                            [this] { return buffersWithoutLock.empty(); });
  }

  /// Submits \p c's completion; called with \p lock (of mutex) held, after
  /// enqueueing its commands; returns with it released. Counts one command
  /// execution status (a planned fault there fails the command when it
  /// completes). With \p claimed (claimInline), delivers it on the calling
  /// thread, else queues it for the completion thread.
  void submit(Completion c, std::unique_lock<std::mutex> &lock, bool claimed) {
    c.failedStatus = driver.strike(OpenCLCall::CommandExecutionStatus);
    if (!claimed) {
      {
        std::lock_guard<std::mutex> guard(completionMutex);
        ++undelivered;
        completions.push_back(std::move(c));
      }
      completionReady.notify_one();
      // Advisory: the completion thread's wait submits the commands anyway.
      driver.flush(queue);
      lock.unlock();
      return;
    }
    // Waiting for the queue in the driver waits for the claimed work (work
    // other threads enqueue after it may be waited for too), and its
    // event's status is read after. The claim keeps the queue alive: a
    // shutdown waits for it.
    lock.unlock();
    if (c.event)
      driver.finish(queue);
    InlineDelivery delivery{this, inlineDeliveriesHere};
    inlineDeliveriesHere = &delivery;
    deliver(c);
    inlineDeliveriesHere = delivery.outer;
    dropInlineClaim();
  }

  /// Pops the oldest completion, or returns false when there is none.
  bool pop(Completion &out) {
    std::lock_guard<std::mutex> lock(completionMutex);
    if (completions.empty())
      return false;
    out = std::move(completions.front());
    completions.pop_front();
    return true;
  }

  /// Notes that a completion popped from the FIFO was delivered.
  void delivered() {
    std::lock_guard<std::mutex> lock(completionMutex);
    --undelivered;
  }

  /// After a failed wait, waits until \p event's command has ended (its
  /// status complete or an error), polling the status, or finishing the
  /// queue where the status cannot be read: the operation must not be
  /// completed while its command may still use the caller's host memory,
  /// which the caller may free once it hears of the failure. Where both
  /// fail too, nothing more can be known of the command.
  void settle(cl_event event) {
    for (;;) {
      cl_int status = CL_COMPLETE;
      if (driver.getEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                              sizeof(status), &status) != CL_SUCCESS) {
        driver.finish(queue);
        return;
      }
      if (status <= CL_COMPLETE)
        return;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  /// Waits for \p c's command and calls its callback. A command that
  /// failed on the device is DeviceError whatever its status: its memory
  /// was allocated before it was submitted.
  void deliver(Completion &c) {
    Error error;
    cl_int status = CL_COMPLETE;
    cl_int rc = CL_SUCCESS;
    const char *call = "clWaitForEvents";
    if (c.event)
      rc = driver.waitForEvents(c.event);
    if (c.event && rc != CL_SUCCESS &&
        rc != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
      settle(c.event);
    if (c.event && (rc == CL_SUCCESS ||
                    rc == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)) {
      call = "clGetEventInfo";
      rc = driver.getEventInfo(c.event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                               sizeof(status), &status);
    }
    if (rc == CL_SUCCESS && c.failedStatus)
      status = *c.failedStatus;
    if (rc != CL_SUCCESS)
      error = openCLError(rc, call, "for " + c.operation.text(deviceName));
    else if (status < 0)
      error = makeError(
          ErrorCode::DeviceError,
          "command execution failed with " + openCLErrorName(status) + " (" +
              std::to_string(status) + ") in " + c.operation.text(deviceName));
    if (c.after)
      c.after();
    if (c.event)
      driver.releaseEvent(c.event);
    for (cl_mem m : c.retained)
      driver.releaseMemObject(m);
    CompletionCallback done = std::move(c.done);
    c = Completion{};
    done(std::move(error));
  }

  /// Delivers every queued completion on the calling thread.
  void drain() {
    Completion c;
    while (pop(c)) {
      deliver(c);
      delivered();
    }
  }

  void completionLoop() {
    std::unique_lock<std::mutex> lock(completionMutex);
    for (;;) {
      completionReady.wait(
          lock, [&] { return !completions.empty() || completionExit; });
      if (completions.empty())
        return;
      Completion c = std::move(completions.front());
      completions.pop_front();
      lock.unlock();
      deliver(c);
      lock.lock();
      --undelivered;
    }
  }

  /// A staging buffer of stagingChunk bytes, mapped; called with mutex held.
  Expected<StagingBuffer> takeStaging() {
    if (!stagingPool.empty()) {
      StagingBuffer out = stagingPool.back();
      stagingPool.pop_back();
      return out;
    }
    cl_int rc = CL_SUCCESS;
    std::string what =
        "(" + std::to_string(stagingChunk) + " bytes of pinned staging)";
    cl_mem buffer = driver.createBuffer(
        context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, stagingChunk, &rc);
    if (rc != CL_SUCCESS)
      return openCLError(rc, "clCreateBuffer", what);
    void *mapped = driver.enqueueMapBuffer(queue, buffer, CL_TRUE,
                                           CL_MAP_READ | CL_MAP_WRITE,
                                           stagingChunk, nullptr, &rc);
    if (rc != CL_SUCCESS) {
      driver.releaseMemObject(buffer);
      return openCLError(rc, "clEnqueueMapBuffer", what);
    }
    return StagingBuffer{buffer, mapped};
  }

  /// Unmaps and releases \p staging.
  void releaseStaging(const StagingBuffer &staging) {
    driver.enqueueUnmapMemObject(queue, staging.buffer, staging.mapped);
    driver.releaseMemObject(staging.buffer);
  }

  /// Returns \p buffers for reuse; called with mutex held.
  void returnStagingLocked(const std::vector<StagingBuffer> &buffers) {
    for (const StagingBuffer &staging : buffers) {
      if (stopping || stagingPool.size() >= stagingPoolLimit)
        releaseStaging(staging);
      else
        stagingPool.push_back(staging);
    }
  }

  /// Returns \p buffers for reuse; takes mutex.
  void returnStaging(const std::vector<StagingBuffer> &buffers) {
    std::lock_guard<std::mutex> lock(mutex);
    returnStagingLocked(buffers);
  }

  /// Whether a transfer of \p bytes from or into \p host goes through the
  /// staging buffers: memory the device reaches by DMA needs none.
  bool stages(const std::byte *host, uint64_t bytes) const {
    return pinnedStaging && bytes >= stagingMinBytes &&
           !isPinnedHostMemory(host, bytes);
  }

  /// The chunk a staged transfer of \p bytes moves in: a staging buffer,
  /// or, for a transfer that fills fewer than stagingMinChunks of them,
  /// that many chunks of at least stagingMinSplit bytes, so that copying one
  /// overlaps the DMA of the one before even for a single buffer's worth.
  uint64_t chunkFor(uint64_t bytes) const {
    constexpr uint64_t Page = 4096;
    uint64_t split = (bytes / stagingMinChunks + Page - 1) / Page * Page;
    return std::clamp(split, std::min(stagingMinSplit, stagingChunk),
                      stagingChunk);
  }

  /// Takes \p count staging buffers into \p out; called with mutex held.
  Error takeStaging(size_t count, std::vector<StagingBuffer> &out) {
    while (out.size() < count) {
      Expected<StagingBuffer> staging = takeStaging();
      if (!staging) {
        returnStagingLocked(out);
        out.clear();
        return staging.takeError();
      }
      out.push_back(*staging);
    }
    return Error::success();
  }

  /// Releases the blocks \p blocks to the driver.
  void releaseBlocks(const std::vector<DeviceBlock> &blocks) {
    for (const DeviceBlock &block : blocks) {
      driver.releaseMemObject(block.buffer);
      ++poolStats.driverReleases;
    }
  }

  void releaseObjects() {
    for (cl_kernel &k : kernels)
      if (k) {
        driver.releaseKernel(k);
        k = nullptr;
      }
    if (program)
      driver.releaseProgram(program);
    if (queue)
      driver.releaseCommandQueue(queue);
    if (context)
      driver.releaseContext(context);
    program = nullptr;
    queue = nullptr;
    context = nullptr;
  }
};

OpenCLDeviceManager::OpenCLDeviceManager(DeviceConfig config)
    : DeviceManager(std::move(config)), state_(std::make_unique<State>()) {
  state_->deviceName = name();
}

OpenCLDeviceManager::~OpenCLDeviceManager() {
  shutdown();
  {
    std::lock_guard<std::mutex> lock(state_->completionMutex);
    state_->completionExit = true;
  }
  state_->completionReady.notify_all();
  if (state_->completionThread.joinable())
    state_->completionThread.join();
  state_->releaseObjects();
}

Capabilities openCLCapabilities() {
  Capabilities caps;
  caps.residentTensors = true;
  caps.asynchronousCompletion = true;
  caps.peerToPeer = false;
  caps.memoryBudget = true;
  caps.faultInjection = true;
  caps.deviceLoss = true;
  // Every run's kernels go to one in-order command queue.
  caps.inOrderRuns = true;
  return caps;
}

const std::vector<BackendParameter> &openCLParameters() {
  static const std::vector<BackendParameter> parameters = [] {
    // A context of its own changes how managers of one device work side by
    // side; with one manager it only changes where the kernels were built.
    // It costs a kernel build per manager (about 25 ms on POCL), so the
    // conformance suite tests it where tensors move between devices only.
    BackendParameter sharedContext = BackendParameter::boolean(
        "shared-context", true,
        "share the context and kernel program of the device's other "
        "managers in the process; 0 creates and builds its own");
    sharedContext.scope = BackendParameter::Scope::BetweenDevices;
    BackendParameter programBinaries = BackendParameter::choice(
        "program-binaries", "1", {"1", "0"},
        "build the program of a manager with a context of its own "
        "(shared-context=0) from the binary kept of the device's first build "
        "in the process, not from source: 0 always from source");
    programBinaries.untestedBecause =
        "it changes how a manager's own program is made, not what the "
        "program does; the backend's tests make it both ways";
    // On POCL's CPU device (host memory shared) auto stages nothing, so
    // staging is tested with 1: there transfers of 64 KiB and more are
    // staged and smaller ones are not, both in one scenario.
    BackendParameter pinnedStaging = BackendParameter::choice(
        "pinned-staging", "auto", {"auto", "1", "0"},
        "stage pageable transfers of at least staging-min-bytes through "
        "pinned (CL_MEM_ALLOC_HOST_PTR) buffers: 1 always, 0 never, auto "
        "where the device does not share the host's memory (a discrete GPU)",
        {"1"});
    // Tested at 0 (every transfer staged, the smallest included).
    BackendParameter stagingMinBytes = BackendParameter::unsignedInRange(
        "staging-min-bytes", uint64_t(64) << 10, 0, uint64_t(1) << 40,
        "pageable transfers of fewer bytes go direct even where staging is on "
        "(below about 64 KiB a staged transfer's fixed cost outweighs its "
        "speed)",
        {0});
    stagingMinBytes.testedWith = {{"pinned-staging", "1"}};
    // Read only where staging is on. Tested at its smallest, where most
    // transfers take many chunks through the two buffers in turn and end
    // with a partial one, every transfer staged.
    BackendParameter stagingChunk = BackendParameter::unsignedInRange(
        "staging-chunk-bytes", uint64_t(4) << 20, 4096, uint64_t(1) << 30,
        "bytes of each pinned staging buffer: a staged transfer moves in "
        "chunks of it, copying one while the driver moves the one before",
        {4096});
    stagingChunk.powerOfTwo = true;
    stagingChunk.testedWith = {{"pinned-staging", "1"},
                               {"staging-min-bytes", "0"}};
    // Tested with two threads, the most this 2-core machine runs at once.
    BackendParameter stagingThreads = BackendParameter::unsignedInRange(
        "staging-copy-threads", 0, 0, 64,
        "threads that copy a chunk into or out of a pinned staging buffer "
        "(0: half the machine's hardware threads, from 1 to 4); a chunk of "
        "less than twice staging-min-slice-bytes is copied by one",
        {2});
    stagingThreads.testedWith = {{"pinned-staging", "1"}};
    // Off (1) by default until measured on a discrete GPU: chunks of
    // 256 KiB are copied by one thread each, where a whole buffer's worth is
    // copied by several (docs/performance.md). Tested at 4 with every
    // transfer staged, where a transfer of 512 KiB to 4 MiB moves in chunks
    // smaller than a staging buffer (each at its own offset).
    BackendParameter stagingMinChunks = BackendParameter::unsignedInRange(
        "staging-min-chunks", 1, 1, 64,
        "a staged transfer that fills fewer staging buffers moves in this "
        "many chunks (of at least staging-min-split-bytes), so that copying "
        "one overlaps the DMA of the one before; 1 moves it in one",
        {4});
    stagingMinChunks.testedWith = {{"pinned-staging", "1"},
                                   {"staging-min-bytes", "0"}};
    // Tested with every transfer staged, where the most buffers are handed
    // from one command to the next.
    BackendParameter driverDelay = BackendParameter::unsignedInRange(
        "driver-delay-us", 0, 0, 1000000,
        "each transfer, copy and kernel waits a random time of half this "
        "many microseconds to all of them before the device may start it, as "
        "on a device slower than its host; for testing (0: none)",
        {300});
    driverDelay.testedWith = {{"pinned-staging", "1"},
                              {"staging-min-bytes", "0"}};
    // Commands held up to half a millisecond: the next command of the
    // program meets one issued without waiting in flight.
    driverDelay.holdsOperationsWith = "500";
    // Tested alone, over the default paths, and with the other parameters
    // in the combined configurations: a race between the backend's threads
    // shows when one thread's code between two calls meets another's, a
    // window of microseconds where each call takes one.
    BackendParameter driverJitter = BackendParameter::unsignedInRange(
        "driver-jitter-us", 0, 0, 100000,
        "each OpenCL call first holds its calling thread for up to this many "
        "microseconds (three calls in four, a random time each), yielding "
        "to the other threads, as a driver whose calls take their time; "
        "for testing (0: none)",
        {50});
    // The suite's concurrency families set it in half their cases of the
    // other configurations too.
    driverJitter.widensRacesWith = "50";
    // The floor below which staging-min-chunks splits no further. Tested at
    // two pages, with 4 chunks, so that a transfer of 32 KiB or more already
    // moves in chunks smaller than its staging buffer, at their own
    // offsets, as by default only one of 512 KiB or more does; and above
    // the smallest staging buffer tested (staging-chunk-bytes=4096), so
    // that where the two meet (the combined configurations) the floor lies
    // past the buffer, as the default floor does past any buffer under
    // 256 KiB, and the chunk must be cut to the buffer.
    BackendParameter stagingMinSplit = BackendParameter::unsignedInRange(
        "staging-min-split-bytes", uint64_t(256) << 10, 4096, uint64_t(1) << 30,
        "smallest chunk staging-min-chunks splits a transfer into (rounded up "
        "to 4 KiB pages; at most a staging buffer)",
        {8192});
    stagingMinSplit.testedWith = {{"pinned-staging", "1"},
                                  {"staging-min-bytes", "0"},
                                  {"staging-min-chunks", "4"}};
    // The size past which a chunk is split between the copy threads. Tested
    // at 512 bytes, so that the small transfers of the concurrency families'
    // parallel blocks, and every chunk of staging-chunk-bytes=4096, share
    // the copy threads, as only chunks of 512 KiB and more do by default.
    BackendParameter stagingMinSlice = BackendParameter::unsignedInRange(
        "staging-min-slice-bytes", ParallelCopy::MinSliceBytes, 64,
        uint64_t(1) << 30,
        "smallest slice of a chunk a copy thread takes: a chunk of less than "
        "twice it is copied by one thread",
        {512});
    stagingMinSlice.testedWith = {{"pinned-staging", "1"},
                                  {"staging-copy-threads", "2"},
                                  {"staging-min-bytes", "0"}};
    // The count past which a staging buffer whose transfer ended goes back
    // to the driver instead of to the pool. Tested at 1, with every
    // transfer staged: a transfer takes two buffers, so that one of them is
    // released and made anew at each transfer, where by default three
    // branches' six buffers all stay pooled.
    BackendParameter stagingPool = BackendParameter::unsignedInRange(
        "staging-pool-buffers", DefaultPooledStagingBuffers, 0, 1024,
        "staging buffers kept for reuse once their transfer ends; the others "
        "go back to the driver (0: none kept)",
        {1});
    stagingPool.testedWith = {{"pinned-staging", "1"},
                              {"staging-min-bytes", "0"}};
    BackendParameter deviceIndex = BackendParameter::unsignedInRange(
        "device-index", 0, 0, std::numeric_limits<uint32_t>::max(),
        "which of the matching devices to use (default: the device's "
        "ordinal among those created together, modulo their count)");
    deviceIndex.untestedBecause =
        "it chooses the device to test, not how the backend works";
    return std::vector<BackendParameter>{
        BackendParameter::text(
            "platform", "index or case-insensitive name substring of the "
                        "platform (default: env DRT_OPENCL_PLATFORM, else the "
                        "first platform with a matching device)"),
        BackendParameter::text(
            "device", "index or case-insensitive name substring of the device "
                      "(default: env DRT_OPENCL_DEVICE, else every device)"),
        deviceIndex,
        pinnedStaging,
        stagingMinBytes,

        sharedContext,
        programBinaries,
        BackendParameter::text(
            "driver-faults",
            "OpenCL calls to fail from the first call init() makes, "
            "CALL:NTH:STATUS[,...] (clCreateBuffer:2:CL_OUT_OF_RESOURCES); "
            "for testing error paths"),
        driverDelay,
        driverJitter,
        stagingChunk,
        stagingThreads,
        stagingMinChunks,
        stagingMinSplit,
        stagingMinSlice,
        stagingPool,
        // Tested off, and small enough that blocks are given back to the
        // driver while others stay cached.
        BackendParameter::unsignedInRange(
            "memory-pool-bytes", uint64_t(1) << 30, 0,
            std::numeric_limits<uint64_t>::max(),
            "most bytes of freed device blocks kept for reuse without a "
            "driver call (0: every free releases its cl_mem)",
            {0, 65536}),
    };
  }();
  return parameters;
}

Capabilities OpenCLDeviceManager::capabilities() const {
  return openCLCapabilities();
}

Error OpenCLDeviceManager::init() {
  auto start = std::chrono::steady_clock::now();
  State &s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.initialised)
      return makeError(ErrorCode::InvalidArgument,
                       "device '" + name() + "' is already initialised");
  }
  if (Error e = checkParameters(config(), openCLParameters(),
                                "OpenCL device '" + name() + "'"))
    return e;
  // checkParameters accepted every value, so each one parses.
  std::string pinned =
      config().parameter("pinned-staging").value_or(std::string("auto"));
  Expected<uint64_t> stagingMinBytes =
      config().uintParameter("staging-min-bytes", uint64_t(64) << 10);
  Expected<bool> sharedContext = config().boolParameter("shared-context", true);
  bool programBinaries =
      config().parameter("program-binaries").value_or("1") == "1";
  Expected<uint64_t> stagingChunk =
      config().uintParameter("staging-chunk-bytes", uint64_t(4) << 20);
  Expected<uint64_t> stagingThreads =
      config().uintParameter("staging-copy-threads", 0);
  Expected<uint64_t> stagingMinChunks =
      config().uintParameter("staging-min-chunks", 1);
  Expected<uint64_t> stagingMinSplit =
      config().uintParameter("staging-min-split-bytes", uint64_t(256) << 10);
  Expected<uint64_t> stagingMinSlice = config().uintParameter(
      "staging-min-slice-bytes", ParallelCopy::MinSliceBytes);
  Expected<uint64_t> poolLimit =
      config().uintParameter("memory-pool-bytes", uint64_t(1) << 30);
  Expected<uint64_t> stagingPoolLimit = config().uintParameter(
      "staging-pool-buffers", DefaultPooledStagingBuffers);
  if (std::optional<std::string> faults = config().parameter("driver-faults")) {
    Expected<std::vector<DriverFault>> planned = parseDriverFaults(*faults);
    if (!planned)
      return makeError(ErrorCode::InvalidArgument,
                       "OpenCL device '" + name() + "': parameter " +
                           "'driver-faults': " + planned.takeError().message());
    for (const DriverFault &f : *planned)
      s.driver.plan(f);
  }
  if (Expected<uint64_t> jitter = config().uintParameter("driver-jitter-us", 0);
      *jitter)
    s.driver.jitterCalls(std::chrono::microseconds(*jitter));
  Expected<SelectedDevice> selected = selectDevice(s.driver, config());
  if (!selected)
    return selected.takeError();
  s.platform = selected->platform;
  s.device = selected->device;
  s.info = selected->info;
  if (Expected<uint64_t> delay = config().uintParameter("driver-delay-us", 0);
      *delay) {
    if (std::string hang = userEventGatesHang(s.info); !hang.empty())
      return makeError(ErrorCode::NotSupported,
                       "OpenCL device '" + name() +
                           "': parameter 'driver-delay-us' holds commands "
                           "back with user events, which " +
                           s.info.toString() + " cannot do: " + hang);
    s.driver.delayCommands(std::chrono::microseconds(*delay));
  }
  if (config().memoryBudget > s.info.globalMemoryBytes)
    return makeError(ErrorCode::InvalidArgument,
                     "OpenCL device '" + name() + "': memory budget of " +
                         std::to_string(config().memoryBudget) +
                         " bytes is more than the " +
                         std::to_string(s.info.globalMemoryBytes) +
                         " bytes of global memory of " + s.info.toString() +
                         " (allowed: 0 for all of it, or 1 to " +
                         std::to_string(s.info.globalMemoryBytes) + ")");
  s.pinnedStaging =
      pinned == "1" || (pinned == "auto" && !s.info.hostUnifiedMemory);
  s.stagingMinBytes = *stagingMinBytes;
  s.stagingChunk = *stagingChunk;
  s.stagingMinChunks = *stagingMinChunks;
  s.stagingMinSplit = *stagingMinSplit;
  if (s.pinnedStaging && !s.stagingCopy)
    s.stagingCopy = std::make_unique<ParallelCopy>(
        *stagingThreads ? unsigned(*stagingThreads)
                        : ParallelCopy::defaultThreads(),
        size_t(*stagingMinSlice));
  s.poolLimit = *poolLimit;
  s.stagingPoolLimit = *stagingPoolLimit;
  std::string where =
      "initialising device '" + name() + "' (" + s.info.toString() + ")";

  cl_uint alignBits = 0;
  if (cl_int rc =
          s.driver.getDeviceInfo(s.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN,
                                 sizeof(alignBits), &alignBits, nullptr))
    return openCLError(rc, "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)",
                       where);
  s.baseAlignment = std::max<uint64_t>(1, alignBits / 8);

  cl_device_fp_config singleConfig = 0;
  if (cl_int rc =
          s.driver.getDeviceInfo(s.device, CL_DEVICE_SINGLE_FP_CONFIG,
                                 sizeof(singleConfig), &singleConfig, nullptr))
    return openCLError(rc, "clGetDeviceInfo(CL_DEVICE_SINGLE_FP_CONFIG)",
                       where);
  s.flushesDenormals = !(singleConfig & CL_FP_DENORM);

  cl_int rc = CL_SUCCESS;
  auto buildStart = std::chrono::steady_clock::now();
  DeviceProgramCache::Entry shared;
  if (*sharedContext)
    shared = DeviceProgramCache::instance().find(s.driver, s.device);
  s.context = shared.context;
  s.program = shared.program;
  s.programReused = s.context != nullptr;
  s.sharesContext = *sharedContext;
  if (s.programReused)
    s.programCachePath.countUse();
  if (!s.programReused) {
    cl_context_properties properties[] = {
        CL_CONTEXT_PLATFORM,
        reinterpret_cast<cl_context_properties>(s.platform), 0};
    s.context = s.driver.createContext(properties, 1, &s.device, &rc);
    if (rc != CL_SUCCESS)
      return openCLError(rc, "clCreateContext", where);
    DeviceProgramCache &cache = DeviceProgramCache::instance();
    std::shared_ptr<const std::vector<unsigned char>> binary =
        programBinaries && !*sharedContext ? cache.binary(s.driver, s.device)
                                           : nullptr;
    if (binary) {
      s.program =
          s.driver.createProgramWithBinary(s.context, s.device, *binary, &rc);
      if (rc != CL_SUCCESS && rc != CL_INVALID_BINARY)
        return openCLError(rc, "clCreateProgramWithBinary", where);
      if (rc == CL_SUCCESS)
        rc = s.driver.buildProgram(s.program, s.device, KernelBuildOptions);
      // A binary the driver no longer takes is built from source instead.
      if (rc == CL_INVALID_BINARY) {
        if (s.program)
          s.driver.releaseProgram(s.program);
        s.program = nullptr;
        binary.reset();
        rc = CL_SUCCESS;
      }
      s.programFromBinary = binary != nullptr;
    }
    if (!binary) {
      s.program =
          s.driver.createProgramWithSource(s.context, KernelSource, &rc);
      if (rc != CL_SUCCESS)
        return openCLError(rc, "clCreateProgramWithSource", where);
      rc = s.driver.buildProgram(s.program, s.device, KernelBuildOptions);
      if (rc == CL_SUCCESS && programBinaries && !*sharedContext)
        cache.keepBinary(s.driver, s.device, s.program);
    }
    ++s.programBuilds;
    if (rc == CL_SUCCESS && *sharedContext)
      cache.keep(s.driver, s.device, {s.context, s.program});
  }
  s.buildSeconds = secondsSince(buildStart);
  if (rc != CL_SUCCESS) {
    size_t logSize = 0;
    std::string log;
    if (s.driver.getProgramBuildInfo(s.program, s.device, CL_PROGRAM_BUILD_LOG,
                                     0, nullptr, &logSize) == CL_SUCCESS) {
      log.resize(logSize);
      if (s.driver.getProgramBuildInfo(s.program, s.device,
                                       CL_PROGRAM_BUILD_LOG, logSize,
                                       log.data(), nullptr) != CL_SUCCESS)
        log = "(unavailable)";
    }
    return openCLError(rc, "clBuildProgram", where + "; build log:\n" + log);
  }
  s.queue = s.driver.createCommandQueue(s.context, s.device, &rc);
  if (rc != CL_SUCCESS)
    return openCLError(rc, "clCreateCommandQueue", where);
  for (size_t k = 0; k < NumKernels; ++k) {
    const char *kernel = kernelName(static_cast<KernelId>(k));
    s.kernels[k] = s.driver.createKernel(s.program, kernel, &rc);
    if (rc != CL_SUCCESS)
      return openCLError(rc, std::string("clCreateKernel(") + kernel + ")",
                         where);
  }

  s.budget =
      config().memoryBudget ? config().memoryBudget : s.info.globalMemoryBytes;
  s.completionThread = std::thread([&s] { s.completionLoop(); });
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.initialised = true;
  }
  s.initSeconds = secondsSince(start);
  return Error::success();
}

std::string OpenCLDeviceManager::description() const {
  const OpenCLDeviceInfo &i = state_->info;
  if (i.deviceName.empty())
    return "opencl: not initialised";
  return "opencl: " + i.deviceName + " on " + i.platformName + " (" +
         i.deviceVersion + ")";
}

uint64_t OpenCLDeviceManager::maximumMemory() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->budget;
}

uint64_t OpenCLDeviceManager::usedMemory() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->used;
}

uint64_t OpenCLDeviceManager::physicalMemoryInUse() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->physical;
}

size_t OpenCLDeviceManager::liveAllocations() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->allocations.size();
}

DeviceStats OpenCLDeviceManager::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  DeviceStats out = state_->stats;
  out.deviceCopies = state_->driver.deviceCopies();
  return out;
}

Error OpenCLDeviceManager::injectFault(const FaultSpec &fault) {
  if (isShutDown())
    return makeError(ErrorCode::DeviceLost,
                     "injectFault: device '" + name() + "' is shut down");
  return state_->faults.add(fault);
}

const OpenCLDeviceInfo &OpenCLDeviceManager::deviceInfo() const {
  return state_->info;
}

std::vector<PathUse> OpenCLDeviceManager::pathUses() const {
  const State &s = *state_;
  std::vector<PathUse> out = {s.kernelsPath.read()};
  if (s.sharesContext)
    out.push_back(s.programCachePath.read());
  if (s.poolLimit) {
    out.push_back(s.poolPath.read());
    out.push_back(s.poolReusePath.read());
  }
  if (s.pinnedStaging)
    out.push_back(s.stagingPath.read());
  // Only a staging buffer's worth can be split between the copy threads.
  if (s.stagingCopy && s.stagingCopy->threads() > 1 &&
      s.stagingChunk / s.stagingCopy->minSlice() >= 2)
    out.push_back(s.stagingCopy->pathUse());
  return out;
}

bool OpenCLDeviceManager::programReused() const {
  return state_->programReused;
}

bool OpenCLDeviceManager::programFromBinary() const {
  return state_->programFromBinary;
}

uint64_t OpenCLDeviceManager::programBuilds() const {
  return state_->programBuilds;
}

double OpenCLDeviceManager::initSeconds() const { return state_->initSeconds; }

double OpenCLDeviceManager::buildSeconds() const {
  return state_->buildSeconds;
}

bool OpenCLDeviceManager::usesPinnedStaging() const {
  return state_->pinnedStaging;
}

uint64_t OpenCLDeviceManager::stagingMinBytes() const {
  return state_->stagingMinBytes;
}

uint64_t OpenCLDeviceManager::stagedTransfers() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stagedTransfers;
}

Expected<std::shared_ptr<HostMemory>> OpenCLDeviceManager::pinnedHostMemory() {
  State &s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialised || s.stopping)
    return makeError(ErrorCode::DeviceLost, "pinnedHostMemory: device '" +
                                                name() + "' is not running");
  if (!s.pinnedMemory) {
    Expected<std::shared_ptr<HostMemory>> memory =
        makePinnedHostMemory(s.context, s.device, name());
    if (!memory)
      return memory.takeError();
    s.pinnedMemory = *memory;
  }
  return s.pinnedMemory;
}

OpenCLPoolStats OpenCLDeviceManager::poolStats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  OpenCLPoolStats out = state_->poolStats;
  out.cachedBytes = state_->pool.cachedBytes();
  out.reservedBytes = state_->physical + out.cachedBytes;
  return out;
}

Error OpenCLDeviceManager::injectDriverFault(const DriverFault &fault) {
  if (isShutDown())
    return makeError(ErrorCode::DeviceLost,
                     "injectDriverFault: device '" + name() + "' is shut down");
  if (fault.nth == 0 || fault.status >= 0)
    return makeError(
        ErrorCode::InvalidArgument,
        "injectDriverFault: " + std::string(openCLCallName(fault.call)) +
            " nth=" + std::to_string(fault.nth) + " status " +
            std::to_string(fault.status) +
            ": nth must be at least 1 and the status negative");
  state_->driver.plan(fault);
  return Error::success();
}

std::vector<uint64_t> OpenCLDeviceManager::driverCalls() const {
  return state_->driver.calls();
}

//===----------------------------------------------------------------------===//
// Memory.
//===----------------------------------------------------------------------===//

Expected<DeviceLocation> OpenCLDeviceManager::allocate(uint64_t bytes) {
  State &s = *state_;
  auto what = [&] {
    return "allocating " + std::to_string(bytes) + " bytes on device '" +
           name() + "'";
  };
  std::optional<ErrorCode> injected =
      s.faults.strike(FaultSite::Allocation, [this] { refuseWork(); });
  if (injected == ErrorCode::DeviceLost) {
    shutdown();
    return makeError(ErrorCode::DeviceLost,
                     what() + ": the device was lost (injected)");
  }
  PathCounter::Scope pool = s.poolPath.enter();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.initialised || s.stopping)
    return makeError(ErrorCode::DeviceLost,
                     what() + ": the device is not running");
  if (bytes == 0)
    return makeError(ErrorCode::InvalidArgument, what() + ": size 0");
  // A planned fault strikes its allocation whatever the budget says
  // (semantics §6): the driver call below fails with it.
  if (!injected && bytes > s.budget - s.used)
    return makeError(ErrorCode::OutOfMemory,
                     what() + ": " + std::to_string(bytes) +
                         " bytes requested, " + std::to_string(s.used) +
                         " of " + std::to_string(s.budget) +
                         " budget bytes already in use");
  DeviceBlock block;
  // A block is rounded up to its size class only when the pool could keep
  // it: one past memory-pool-bytes goes back to the driver when it is
  // freed, so rounding it up would only hold more memory.
  uint64_t blockBytes = blockSizeClass(
      bytes, std::max(MinimumBlockBytes, std::bit_ceil(s.baseAlignment)));
  if (blockBytes > s.poolLimit)
    blockBytes = bytes;
  // An injected fault must reach the driver call it plans to fail.
  if (s.poolLimit && !injected)
    block = s.pool.take(blockBytes);
  if (block.buffer) {
    ++s.poolStats.reuses;
    s.poolReusePath.countUse();
  } else {
    // Cached blocks give way before the blocks held pass the budget; a size
    // class that would pass it on its own is not rounded up.
    uint64_t held = s.physical + s.pool.cachedBytes();
    if (held + blockBytes > s.budget)
      s.releaseBlocks(s.pool.evict(held + blockBytes - s.budget));
    if (s.physical + blockBytes > s.budget)
      blockBytes = bytes;
    cl_int rc = CL_SUCCESS;
    if (injected)
      s.driver.plan(siteFault(*injected, FaultSite::Allocation,
                              OpenCLCall::CreateBuffer));
    block = {
        s.driver.createBuffer(s.context, CL_MEM_READ_WRITE, blockBytes, &rc),
        blockBytes};
    bool outOfMemory = rc == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                       rc == CL_OUT_OF_RESOURCES || rc == CL_OUT_OF_HOST_MEMORY;
    if (outOfMemory && !injected && s.pool.cachedBytes() != 0) {
      // The driver ran out where the pool still holds memory: give it all
      // back before reporting OutOfMemory.
      s.releaseBlocks(s.pool.evictAll());
      block.buffer =
          s.driver.createBuffer(s.context, CL_MEM_READ_WRITE, blockBytes, &rc);
    }
    if (rc != CL_SUCCESS)
      return openCLError(rc, "clCreateBuffer",
                         "while " + what() + " (max allocation " +
                             std::to_string(s.info.maxAllocationBytes) +
                             " bytes)");
    ++s.poolStats.driverAllocations;
  }
  DeviceLocation location =
      s.allocations.insert(Allocation{block.buffer, bytes, block.bytes});
  if (location.isNull()) {
    s.releaseBlocks({block});
    return makeError(ErrorCode::OutOfMemory,
                     what() + ": no handle is left for another allocation");
  }
  s.used += bytes;
  s.physical += block.bytes;
  ++s.stats.allocations;
  return location;
}

Error OpenCLDeviceManager::free(DeviceLocation location) {
  State &s = *state_;
  PathCounter::Scope pool = s.poolPath.enter();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::optional<Allocation> a = s.allocations.erase(location);
  if (!a)
    return makeError(ErrorCode::InvalidArgument,
                     "location " + location.toString() +
                         " is stale or unknown on device '" + name() + "'");
  s.used -= a->bytes;
  s.physical -= a->blockBytes;
  ++s.stats.frees;
  // The location is stale from now on (the table's generation check), so a
  // block reused for another allocation is never reachable through it.
  // A block a transfer still moves data into or out of without the lock
  // goes back to the driver, whose release waits for that call's own.
  if (a->blockBytes <= s.poolLimit &&
      std::find(s.buffersWithoutLock.begin(), s.buffersWithoutLock.end(),
                a->buffer) == s.buffersWithoutLock.end()) {
    uint64_t cached = s.pool.cachedBytes() + a->blockBytes;
    if (cached > s.poolLimit)
      s.releaseBlocks(s.pool.evict(cached - s.poolLimit));
    s.pool.keep({a->buffer, a->blockBytes});
    return Error::success();
  }
  ++s.poolStats.driverReleases;
  if (cl_int rc = s.driver.releaseMemObject(a->buffer))
    return openCLError(rc, "clReleaseMemObject",
                       "for " + location.toString() + " on device '" + name() +
                           "'");
  return Error::success();
}

Expected<uint64_t>
OpenCLDeviceManager::allocationSize(DeviceLocation location) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const Allocation *a = state_->allocations.lookup(location);
  if (!a)
    return makeError(ErrorCode::InvalidArgument,
                     "location " + location.toString() +
                         " is stale or unknown on device '" + name() + "'");
  return a->bytes;
}

//===----------------------------------------------------------------------===//
// Transfers.
//===----------------------------------------------------------------------===//

void OpenCLDeviceManager::copyToDevice(DeviceLocation dst, const std::byte *src,
                                       uint64_t bytes,
                                       CompletionCallback done) {
  State &s = *state_;
  Completion c;
  c.operation = {Operation::Kind::CopyToDevice, bytes, dst, {}};
  auto what = [&] { return c.operation.text(name()); };
  std::optional<ErrorCode> injected =
      s.faults.strike(FaultSite::TransferToDevice, [this] { refuseWork(); });
  if (injected == ErrorCode::DeviceLost)
    return shutdown();
  std::unique_lock<std::mutex> lock(s.mutex);
  // An injected fault keeps the lock: the driver fault it plans must strike
  // this transfer's calls, not those another thread makes without the lock
  // meanwhile. They end first, before the checks below (the wait releases
  // the lock: a shutdown or a free may come meanwhile).
  if (injected)
    s.waitForCallsWithoutLock(lock);
  // Failures from the claim on drop it before calling back.
  bool claimed = false;
  auto fail = [&](Error e) {
    s.failSubmission(lock, claimed, done, std::move(e));
  };
  if (!s.initialised || s.stopping)
    return fail(makeError(ErrorCode::DeviceLost,
                          what() + ": the device is not running"));
  const Allocation *a = s.allocations.lookup(dst);
  if (!a)
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": the location is stale or unknown"));
  if (bytes > a->bytes)
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": the allocation has only " +
                              std::to_string(a->bytes) + " bytes"));
  // The allocation may go while the lock is released below: its buffer is
  // retained for that time.
  cl_mem buffer = a->buffer;
  cl_int rc = CL_SUCCESS;
  bool retainedForCompletion = false;
  claimed = s.claimInline();
  if (injected && *injected == ErrorCode::OutOfMemory)
    s.driver.plan(siteFault(*injected, FaultSite::TransferToDevice,
                            OpenCLCall::EnqueueWriteBuffer));
  if (!s.stages(src, bytes)) {
    // A caller that delivers its own completion waits in the driver,
    // without the lock.
    bool unlocked = s.unlockForBlockingCall(lock, claimed && !injected, buffer);
    rc = s.driver.enqueueWriteBuffer(s.queue, buffer, claimed, 0, bytes, src,
                                     claimed ? nullptr : &c.event);
    s.relockAfterBlockingCall(lock, unlocked, buffer);
    if (rc != CL_SUCCESS)
      return fail(openCLError(rc, "clEnqueueWriteBuffer", "during " + what()));
  } else {
    // Chunk i is copied into pinned buffer i % 2 while the driver moves
    // chunk i - 1 out of the other one. A caller that delivers its own
    // completion writes the last chunk with a blocking call, which needs
    // no event and measured a little faster than an event's wait on
    // NVIDIA's OpenCL (docs/performance.md).
    PathCounter::Scope staged = s.stagingPath.enter();
    uint64_t chunk = s.chunkFor(bytes);
    uint64_t chunks = (bytes + chunk - 1) / chunk;
    std::vector<StagingBuffer> staging;
    if (Error e = s.takeStaging(std::min<uint64_t>(chunks, 2), staging))
      return fail(std::move(e));
    ++s.stagedTransfers;
    std::array<cl_event, 2> written{};
    const char *call = nullptr;
    // The waits for the chunks are made without the lock.
    bool unlocked = s.unlockForBlockingCall(lock, !injected, buffer);
    for (uint64_t i = 0; i < chunks && !call; ++i) {
      cl_event &pending = written[i % 2];
      if (pending) {
        rc = s.driver.waitForEvents(pending);
        s.driver.releaseEvent(pending);
        pending = nullptr;
        if (rc != CL_SUCCESS) {
          call = "clWaitForEvents";
          break;
        }
      }
      uint64_t offset = i * chunk;
      uint64_t size = std::min(chunk, bytes - offset);
      bool blocking = claimed && i + 1 == chunks;
      s.stagingCopy->copy(staging[i % 2].mapped, src + offset, size);
      rc = s.driver.enqueueWriteBuffer(s.queue, buffer, blocking, offset, size,
                                       staging[i % 2].mapped,
                                       blocking ? nullptr : &pending);
      if (rc != CL_SUCCESS)
        call = "clEnqueueWriteBuffer";
    }
    // After a blocking last write the chunk before it may still be listed:
    // its buffer goes back to the pool only once its write has ended.
    if (claimed && !call)
      if (cl_event &other = written[chunks % 2]; other) {
        rc = s.driver.waitForEvents(other);
        s.driver.releaseEvent(other);
        other = nullptr;
        if (rc != CL_SUCCESS)
          call = "clWaitForEvents";
      }
    if (call)
      s.driver.finish(s.queue);
    // Unless the caller's blocking call ended it, the last chunk's write may
    // still run: the call's retain of the buffer passes to the completion.
    bool running = !call && !claimed;
    s.relockAfterBlockingCall(lock, unlocked, buffer, running ? &c : nullptr);
    retainedForCompletion = unlocked && running;
    if (call) {
      for (cl_event e : written)
        if (e)
          s.driver.releaseEvent(e);
      s.returnStagingLocked(staging);
      return fail(openCLError(rc, call, "during " + what()));
    }
    if (claimed) {
      s.returnStagingLocked(staging);
    } else {
      // The queue is in order: the last chunk's write completes the
      // transfer.
      c.event = written[(chunks - 1) % 2];
      if (cl_event other = written[chunks % 2]; chunks > 1 && other)
        s.driver.releaseEvent(other);
      c.after = [&s, staging = std::move(staging)] {
        s.returnStaging(staging);
      };
    }
  }
  if (c.event && !retainedForCompletion)
    retainUntilDone(s.driver, s.queue, c, buffer);
  ++s.stats.transfersToDevice;
  s.stats.bytesToDevice += bytes;
  if (injected)
    s.driver.plan(siteFault(*injected, FaultSite::TransferToDevice,
                            OpenCLCall::CommandExecutionStatus));
  // Taken only now: every failure above calls back through fail().
  c.done = std::move(done);
  s.submit(std::move(c), lock, claimed);
}

void OpenCLDeviceManager::copyFromDevice(DeviceLocation src, std::byte *dst,
                                         uint64_t bytes,
                                         CompletionCallback done) {
  State &s = *state_;
  Completion c;
  c.operation = {Operation::Kind::CopyFromDevice, bytes, src, {}};
  auto what = [&] { return c.operation.text(name()); };
  std::optional<ErrorCode> injected =
      s.faults.strike(FaultSite::TransferFromDevice, [this] { refuseWork(); });
  if (injected == ErrorCode::DeviceLost)
    return shutdown();
  std::unique_lock<std::mutex> lock(s.mutex);
  // An injected fault keeps the lock: the driver fault it plans must strike
  // this transfer's calls, not those another thread makes without the lock
  // meanwhile. They end first, before the checks below (the wait releases
  // the lock: a shutdown or a free may come meanwhile).
  if (injected)
    s.waitForCallsWithoutLock(lock);
  // Failures from the claim on drop it before calling back.
  bool claimed = false;
  auto fail = [&](Error e) {
    s.failSubmission(lock, claimed, done, std::move(e));
  };
  if (!s.initialised || s.stopping)
    return fail(makeError(ErrorCode::DeviceLost,
                          what() + ": the device is not running"));
  const Allocation *a = s.allocations.lookup(src);
  if (!a)
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": the location is stale or unknown"));
  if (bytes > a->bytes)
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": the allocation has only " +
                              std::to_string(a->bytes) + " bytes"));
  // The allocation may go while the lock is released below: its buffer is
  // retained for that time.
  cl_mem buffer = a->buffer;
  cl_int rc = CL_SUCCESS;
  claimed = s.claimInline();
  if (injected && *injected == ErrorCode::OutOfMemory)
    s.driver.plan(siteFault(*injected, FaultSite::TransferFromDevice,
                            OpenCLCall::EnqueueReadBuffer));
  if (!s.stages(dst, bytes)) {
    // A caller that delivers its own completion waits in the driver,
    // without the lock.
    bool unlocked = s.unlockForBlockingCall(lock, claimed && !injected, buffer);
    rc = s.driver.enqueueReadBuffer(s.queue, buffer, claimed, 0, bytes, dst,
                                    claimed ? nullptr : &c.event);
    s.relockAfterBlockingCall(lock, unlocked, buffer);
    if (rc != CL_SUCCESS)
      return fail(openCLError(rc, "clEnqueueReadBuffer", "during " + what()));
  } else {
    // The driver moves chunk i + 1 into one pinned buffer while chunk i is
    // copied out of the other; the data is in place when the loop ends, so
    // the completion has no command left to wait for.
    PathCounter::Scope staged = s.stagingPath.enter();
    uint64_t chunk = s.chunkFor(bytes);
    uint64_t chunks = (bytes + chunk - 1) / chunk;
    std::vector<StagingBuffer> staging;
    if (Error e = s.takeStaging(std::min<uint64_t>(chunks, 2), staging))
      return fail(std::move(e));
    ++s.stagedTransfers;
    std::array<cl_event, 2> read{};
    // A single chunk has no copy to overlap: it is read with a blocking
    // call and no event (as the last chunk to the device).
    bool single = chunks == 1;
    auto enqueueChunk = [&](uint64_t i) {
      uint64_t offset = i * chunk;
      return s.driver.enqueueReadBuffer(
          s.queue, buffer, single, offset, std::min(chunk, bytes - offset),
          staging[i % 2].mapped, single ? nullptr : &read[i % 2]);
    };
    // As to the device: the waits are made without the lock.
    bool unlocked = s.unlockForBlockingCall(lock, !injected, buffer);
    const char *call = nullptr;
    rc = enqueueChunk(0);
    if (rc != CL_SUCCESS)
      call = "clEnqueueReadBuffer";
    for (uint64_t i = 0; i < chunks && !call; ++i) {
      if (i + 1 < chunks && (rc = enqueueChunk(i + 1)) != CL_SUCCESS) {
        call = "clEnqueueReadBuffer";
        break;
      }
      if (!single) {
        rc = s.driver.waitForEvents(read[i % 2]);
        s.driver.releaseEvent(read[i % 2]);
        read[i % 2] = nullptr;
        if (rc != CL_SUCCESS) {
          call = "clWaitForEvents";
          break;
        }
      }
      uint64_t offset = i * chunk;
      s.stagingCopy->copy(dst + offset, staging[i % 2].mapped,
                          std::min(chunk, bytes - offset));
    }
    if (call)
      s.driver.finish(s.queue);
    s.relockAfterBlockingCall(lock, unlocked, buffer);
    if (call) {
      for (cl_event e : read)
        if (e)
          s.driver.releaseEvent(e);
      s.returnStagingLocked(staging);
      return fail(openCLError(rc, call, "during " + what()));
    }
    s.returnStagingLocked(staging);
  }
  if (c.event)
    retainUntilDone(s.driver, s.queue, c, buffer);
  ++s.stats.transfersFromDevice;
  s.stats.bytesFromDevice += bytes;
  if (injected)
    s.driver.plan(siteFault(*injected, FaultSite::TransferFromDevice,
                            OpenCLCall::CommandExecutionStatus));
  // Taken only now: every failure above calls back through fail().
  c.done = std::move(done);
  s.submit(std::move(c), lock, claimed);
}

//===----------------------------------------------------------------------===//
// Functions and runs.
//===----------------------------------------------------------------------===//

Error OpenCLDeviceManager::compileFunction(const Function &function) {
  PreparedFunction prepared;
  for (const Placeholder &p : function.placeholders()) {
    prepared.placeholderBytes.push_back(p.type.sizeInBytes());
    prepared.placeholderElementBytes.push_back(elemSize(p.type.kind));
  }
  for (const Node &n : function.nodes()) {
    int output = function.placeholderIndex(n.output);
    const Placeholder *out = function.findPlaceholder(n.output);
    if (output < 0 || !out)
      return makeError(ErrorCode::InvalidArgument,
                       "network '" + function.name() + "': node " +
                           std::string(opKindName(n.op)) +
                           " writes unknown placeholder '" + n.output + "'");
    // The contract keeps denormals (docs/semantics.md section 7): a device
    // that flushes them says so here rather than computing other results.
    if (state_->flushesDenormals && isFloatingPoint(out->type.kind) &&
        n.op != OpKind::Copy)
      return makeError(ErrorCode::NotSupported,
                       "network '" + function.name() + "' on device '" +
                           name() + "': " + std::string(opKindName(n.op)) +
                           " over " + out->type.toString() +
                           " needs float denormals, which this device "
                           "flushes to zero (no CL_FP_DENORM in "
                           "CL_DEVICE_SINGLE_FP_CONFIG)");
    PreparedNode node{kernelFor(n.op, out->type.kind),
                      {},
                      size_t(output),
                      out->type.kind,
                      n.factor,
                      out->type.numElements()};
    for (const std::string &input : n.inputs) {
      int index = function.placeholderIndex(input);
      if (index < 0)
        return makeError(ErrorCode::InvalidArgument,
                         "network '" + function.name() +
                             "': node reads unknown placeholder '" + input +
                             "'");
      node.inputs.push_back(size_t(index));
    }
    prepared.nodes.push_back(std::move(node));
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->functions[function.name()] = std::move(prepared);
  return Error::success();
}

void OpenCLDeviceManager::evictFunction(const std::string &name) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->functions.erase(name);
}

void OpenCLDeviceManager::execute(const Function &function,
                                  std::vector<RunArgument> arguments,
                                  CompletionCallback done) {
  State &s = *state_;
  Completion c;
  c.operation.network = function.name();
  auto what = [&] { return c.operation.text(name()); };
  std::optional<ErrorCode> injected =
      s.faults.strike(FaultSite::Run, [this] { refuseWork(); });
  if (injected == ErrorCode::DeviceLost)
    return shutdown();
  PathCounter::Scope launch = s.kernelsPath.enter();
  std::unique_lock<std::mutex> lock(s.mutex);
  // Failures from the claim on drop it before calling back.
  bool claimed = false;
  auto fail = [&](Error e) {
    s.failSubmission(lock, claimed, done, std::move(e));
  };
  if (!s.initialised || s.stopping)
    return fail(makeError(ErrorCode::DeviceLost,
                          what() + ": the device is not running"));
  auto found = s.functions.find(function.name());
  if (found == s.functions.end())
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": the network was not compiled here"));
  const PreparedFunction &prepared = found->second;
  if (arguments.size() != prepared.placeholderBytes.size())
    return fail(makeError(ErrorCode::InvalidArgument,
                          what() + ": " + std::to_string(arguments.size()) +
                              " arguments for " +
                              std::to_string(prepared.placeholderBytes.size()) +
                              " placeholders"));
  std::vector<cl_mem> buffers;
  std::vector<cl_ulong> elementOffsets;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const RunArgument &arg = arguments[i];
    const Allocation *a = s.allocations.lookup(arg.location);
    auto which = [&] {
      return what() + ": argument " + std::to_string(i) + " at " +
             arg.location.toString();
    };
    if (!a)
      return fail(makeError(ErrorCode::InvalidArgument,
                            which() + " is stale or unknown"));
    uint64_t elementBytes = prepared.placeholderElementBytes[i];
    if (arg.offsetBytes % elementBytes != 0 || arg.offsetBytes > a->bytes ||
        prepared.placeholderBytes[i] > a->bytes - arg.offsetBytes)
      return fail(makeError(
          ErrorCode::InvalidArgument,
          which() + ": " + std::to_string(prepared.placeholderBytes[i]) +
              " bytes at offset " + std::to_string(arg.offsetBytes) +
              " do not fit its " + std::to_string(a->bytes) + " bytes"));
    buffers.push_back(a->buffer);
    elementOffsets.push_back(arg.offsetBytes / elementBytes);
  }
  if (prepared.nodes.empty())
    return fail(injected ? makeError(*injected,
                                     what() + ": injected " +
                                         std::string(errorCodeName(*injected)))
                         : Error::success());

  claimed = s.claimInline();
  for (size_t n = 0; n < prepared.nodes.size(); ++n) {
    const PreparedNode &node = prepared.nodes[n];
    cl_kernel kernel = s.kernels[static_cast<unsigned>(node.kernel)];
    cl_uint arg = 0;
    cl_int rc = CL_SUCCESS;
    auto setBuffer = [&](size_t placeholder) {
      if (rc == CL_SUCCESS)
        rc = s.driver.setKernelArg(kernel, arg++, sizeof(cl_mem),
                                   &buffers[placeholder]);
      if (rc == CL_SUCCESS)
        rc = s.driver.setKernelArg(kernel, arg++, sizeof(cl_ulong),
                                   &elementOffsets[placeholder]);
    };
    for (size_t input : node.inputs)
      setBuffer(input);
    setBuffer(node.output);
    if (rc == CL_SUCCESS && node.kernel == kernelFor(OpKind::Scale, node.kind))
      rc = setScaleFactor(s.driver, kernel, arg++, node.kind, node.factor);
    cl_ulong count = node.elements;
    if (rc == CL_SUCCESS)
      rc = s.driver.setKernelArg(kernel, arg++, sizeof count, &count);
    if (rc != CL_SUCCESS) {
      s.driver.finish(s.queue);
      return fail(openCLError(rc, "clSetKernelArg",
                              std::string("of ") + kernelName(node.kernel) +
                                  " in " + what()));
    }
    bool last = n + 1 == prepared.nodes.size();
    if (n == 0 && injected == ErrorCode::OutOfMemory)
      s.driver.plan(siteFault(*injected, FaultSite::Run,
                              OpenCLCall::EnqueueNDRangeKernel));
    size_t local = KernelWorkGroupSize;
    size_t global = s.fixedWorkGroups
                        ? (node.elements + local - 1) / local * local
                        : node.elements;
    rc = s.driver.enqueueNDRangeKernel(s.queue, kernel, &global,
                                       s.fixedWorkGroups ? &local : nullptr,
                                       last ? &c.event : nullptr);
    if (rc == CL_INVALID_WORK_GROUP_SIZE && s.fixedWorkGroups) {
      // A device whose work-groups are smaller: the driver chooses.
      s.fixedWorkGroups = false;
      global = node.elements;
      rc = s.driver.enqueueNDRangeKernel(s.queue, kernel, &global, nullptr,
                                         last ? &c.event : nullptr);
    }
    if (rc != CL_SUCCESS) {
      s.driver.finish(s.queue);
      return fail(openCLError(rc, "clEnqueueNDRangeKernel",
                              std::string("of ") + kernelName(node.kernel) +
                                  " in " + what()));
    }
  }
  for (cl_mem b : buffers)
    retainUntilDone(s.driver, s.queue, c, b);
  c.done = std::move(done);
  ++s.stats.runs;
  if (injected)
    s.driver.plan(siteFault(*injected, FaultSite::Run,
                            OpenCLCall::CommandExecutionStatus));
  s.submit(std::move(c), lock, claimed);
}

//===----------------------------------------------------------------------===//
// Shutdown.
//===----------------------------------------------------------------------===//

void OpenCLDeviceManager::shutdownBackend() {
  State &s = *state_;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (!s.initialised || s.stopping)
      return;
    s.stopping = true;
    // Transfers making blocking calls without the lock use the queue and
    // their staging buffers: they end (and submit their completions) first.
    s.waitForCallsWithoutLock(lock);
  }
  // No submission can start now; let the queued work finish and deliver it
  // (the completion thread waits on each command even if this fails).
  s.driver.finish(s.queue);
  {
    std::lock_guard<std::mutex> lock(s.completionMutex);
    s.completionExit = true;
  }
  s.completionReady.notify_all();
  if (std::this_thread::get_id() == s.completionThread.get_id()) {
    // Called from a callback: deliver the rest here; the thread ends when
    // that callback returns, and the destructor joins it.
    s.drain();
  } else {
    s.completionThread.join();
  }
  if (!deliveringInlineFor(&s)) {
    // A caller delivering its own completion finishes it before the
    // memory goes (one that shuts down from inside its callback is done
    // with its commands).
    std::unique_lock<std::mutex> lock(s.completionMutex);
    s.inlineDone.wait(lock, [&s] { return s.inlineDeliveries == 0; });
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations.forEach([&s](DeviceLocation, Allocation &a) {
    s.releaseBlocks({{a.buffer, a.blockBytes}});
  });
  s.allocations.clear();
  s.used = 0;
  s.physical = 0;
  s.releaseBlocks(s.pool.evictAll());
  // Tensors keep the pinned memory (and its context) for as long as they
  // hold storage of it.
  s.pinnedMemory.reset();
  for (StagingBuffer &staging : s.stagingPool)
    s.releaseStaging(staging);
  s.stagingPool.clear();
  s.functions.clear();
  // Nothing is submitted after this: the kernels, program, queue and
  // context go now rather than with the manager.
  s.releaseObjects();
}

DRT_REGISTER_BACKEND(drt::BackendInfo{
    "opencl",
    "device resident tensors in OpenCL device memory (any OpenCL 1.2+ "
    "platform; POCL in CI)",
    openCLCapabilities(),
    [](const drt::DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
      return std::make_unique<OpenCLDeviceManager>(config);
    },
    false, openCLParameters()});

} // namespace drt::opencl
