//===- OpenCLMutants.cpp - The OpenCL backend with one bug ----------------===//
//
// An OpenCL-level mutant: the caller hears that the read-back succeeded before
// the non-blocking read has landed. POCL finishes a small read within
// microseconds, so to make the timing the same on every run the mutant calls
// back before it enqueues the read, then waits for the read so that it never
// lands in memory the caller has freed. The suite sees the stale bytes inside
// the callback, where it reads them. Reads issued from inside a completion
// (outputs copied to host after a run) are left correct: waiting there would
// block the completion thread that delivers the read.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/FaultPlan.h"
#include "drt/opencl/OpenCLDevice.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace drt::conformance::selftest {
namespace {

using opencl::OpenCLDeviceManager;

class ReadNotWaited final : public OpenCLDeviceManager {
public:
  using OpenCLDeviceManager::OpenCLDeviceManager;
  ~ReadNotWaited() override { shutdown(); }

  Error injectFault(const FaultSpec &fault) override {
    Error e = OpenCLDeviceManager::injectFault(fault);
    if (e.isSuccess()) {
      std::lock_guard<std::mutex> lock(mutex_);
      (void)planned_.add(fault);
    }
    return e;
  }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    // A read-back that a planned fault strikes fails as the real backend's
    // does: the mutant breaks only the timing of successful reads.
    bool faulted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      faulted = planned_.strike(FaultSite::TransferFromDevice).has_value();
    }
    if (InCompletion || faulted)
      return OpenCLDeviceManager::copyFromDevice(src, dst, bytes,
                                                 std::move(done));
    // The bug: success is reported before the read is in place.
    done(Error::success());
    struct Read {
      std::mutex mutex;
      std::condition_variable landed;
      bool completed = false;
    };
    auto read = std::make_shared<Read>();
    OpenCLDeviceManager::copyFromDevice(src, dst, bytes, [read](Error) {
      std::lock_guard<std::mutex> lock(read->mutex);
      read->completed = true;
      read->landed.notify_all();
    });
    std::unique_lock<std::mutex> lock(read->mutex);
    while (!read->completed && !isShutDown())
      read->landed.wait_for(lock, std::chrono::milliseconds(10));
  }

  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    OpenCLDeviceManager::execute(function, std::move(arguments),
                                 [done = std::move(done)](Error e) {
                                   InCompletion = true;
                                   done(std::move(e));
                                   InCompletion = false;
                                 });
  }

private:
  static thread_local bool InCompletion;
  std::mutex mutex_;
  /// The faults planned on the real backend, struck in step with it.
  FaultPlan planned_;
};

thread_local bool ReadNotWaited::InCompletion = false;

DRT_REGISTER_BACKEND(BackendInfo{
    "mutant:opencl-read-not-waited",
    "OpenCL: the read-back is not waited for before the callback",
    opencl::openCLCapabilities(),
    [](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
      return std::make_unique<ReadNotWaited>(config);
    },
    /*testOnly=*/true, opencl::openCLParameters()});

} // namespace
} // namespace drt::conformance::selftest
