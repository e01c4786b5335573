//===- drt/fake/FakeDevice.h - The reference device -------------*- C++ -*-===//
//
// FakeDevice simulates an accelerator exactly and observably: device memory is
// host memory held in a generation-checked table with a budget and an
// alignment, completions can arrive on a worker thread after seeded random
// delays, faults can be planned, and every action is counted and logged.
//
// Its DeviceConfig parameters are declared by fakeParameters() (the registry
// lists them; drt-conformance --list prints them): async, resident, seed,
// max-delay-us and alignment. The default budget (memoryBudget 0) is 1 GiB; a
// budget larger than the host's memory, which simulates the device's, is
// refused.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FAKE_FAKEDEVICE_H
#define DRT_FAKE_FAKEDEVICE_H

#include "drt/BackendRegistry.h"
#include "drt/DeviceManager.h"
#include "drt/FaultPlan.h"
#include "drt/LocationTable.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace drt::fake {

/// The budget of a fake device configured with memoryBudget 0.
inline constexpr uint64_t DefaultMemoryBudget = uint64_t(1) << 30;

/// What a fake device declares with the parameters async and resident.
Capabilities fakeCapabilities(bool async, bool resident);

/// The DeviceConfig parameters a fake device reads, with their defaults,
/// meanings, allowed values and the values a conformance run tests.
const std::vector<BackendParameter> &fakeParameters();

/// The registry entry of the fake backend: its parameters, the capabilities
/// of its default configuration (synchronous, resident tensors) and of any
/// other. A test layer deriving from FakeDevice registers a copy with its
/// own name and factory.
BackendInfo fakeBackendInfo();

/// The reference device. Not final: a test layer (the self-test's mutants)
/// may derive from it to change one hook and keep the rest exact.
class FakeDevice : public DeviceManager {
public:
  explicit FakeDevice(DeviceConfig config);
  ~FakeDevice() override;

  Error init() override;
  Capabilities capabilities() const override;
  std::string description() const override;
  uint64_t maximumMemory() const override;
  uint64_t usedMemory() const override;
  uint64_t physicalMemoryInUse() const override;
  size_t liveAllocations() const override;
  DeviceStats stats() const override;
  Error injectFault(const FaultSpec &fault) override;

  /// Every action taken so far ("alloc loc#1.1 16", "free ...", ...).
  std::vector<std::string> events() const;
  /// The simulated bytes at \p location (for tests); empty when stale.
  std::vector<std::byte> deviceBytes(DeviceLocation location) const;
  /// Writes \p bytes at \p offset of \p location at once, for devices
  /// derived from this one in tests (no transfer: no counter, no event);
  /// false when the location is stale or too small.
  bool overwriteDeviceBytes(DeviceLocation location, uint64_t offset,
                            std::span<const std::byte> bytes);

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override;
  Error free(DeviceLocation location) override;
  Expected<uint64_t> allocationSize(DeviceLocation location) const override;
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override;
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override;
  Error compileFunction(const Function &function) override;
  void evictFunction(const std::string &name) override;
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override;
  void shutdownBackend() override;

private:
  /// Simulated device memory, zeroed. From calloc, which maps fresh pages
  /// for a large block instead of writing zeros over them: a scenario that
  /// allocates what is left of a 1 GiB default budget then costs the pages
  /// it touches, not a second of writing.
  struct Allocation {
    struct Free {
      void operator()(std::byte *p) const { std::free(p); }
    };
    std::unique_ptr<std::byte, Free> data;
    uint64_t size = 0;

    std::byte *begin() const { return data.get(); }
  };
  /// Work whose completion is delivered now (sync) or by the worker (async).
  /// It returns the outcome; when the device stops first it is not run and
  /// the completion gets DeviceLost.
  struct Task {
    std::function<Error()> work;
    CompletionCallback done;
  };

  /// Runs \p work now (sync) or queues it for the worker (async), and
  /// completes \p done with its outcome.
  template <typename Work> void submit(Work &&work, CompletionCallback done);
  /// Queues \p work for the worker; DeviceLost once the device stops.
  void enqueue(std::function<Error()> work, CompletionCallback done);
  void workerLoop();
  void log(std::string event);
  /// Applies a planned fault at \p site: Success when none strikes.
  /// \p describe() names the action for the fault's message; it is called
  /// only when a fault strikes, so that an action without one builds no
  /// text.
  template <typename Describe>
  Error strikeFault(FaultSite site, const Describe &describe);
  Error runNodes(const Function &function,
                 const std::vector<RunArgument> &arguments);

  bool async_ = false;
  bool resident_ = true;
  uint64_t alignment_ = 64;
  uint64_t maxDelayUs_ = 200;
  uint64_t budget_ = DefaultMemoryBudget;

  mutable std::mutex mutex_;
  LocationTable<Allocation> table_;
  /// Bytes in use and live allocations, written under mutex_ and read
  /// without it: a harness asks for both after every step.
  std::atomic<uint64_t> used_{0};
  std::atomic<size_t> live_{0};
  uint64_t physical_ = 0;
  DeviceStats stats_;
  /// One entry of the event log. Allocations, frees and copies, which every
  /// transfer makes, are kept as their action and numbers and formatted only
  /// when events() is asked for; other actions keep their text.
  struct Event {
    /// "alloc", "free", "to-device" or "from-device"; null for a text event.
    const char *action = nullptr;
    DeviceLocation location;
    uint64_t bytes = 0;
    std::string text;
  };
  void logAction(const char *action, DeviceLocation location, uint64_t bytes);
  /// DeviceLost once shut down, checked (under mutex_) before a location:
  /// a shutdown on another thread may have come since the framework looked,
  /// and taken the locations with it.
  Error refuseIfStopped() const;
  std::vector<Event> events_;
  bool stopped_ = false;

  FaultPlan faults_;

  std::mutex queueMutex_;
  std::condition_variable queueReady_;
  std::deque<Task> queue_;
  bool stopWorker_ = false;
  std::mt19937_64 delays_;
  std::thread worker_;
};

} // namespace drt::fake

#endif // DRT_FAKE_FAKEDEVICE_H
