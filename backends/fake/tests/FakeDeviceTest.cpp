//===- FakeDeviceTest.cpp - What only the reference device shows ----------===//
#include "drt/fake/FakeDevice.h"
#include "drt/BackendRegistry.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

using namespace drt;
using drt::fake::FakeDevice;

namespace {
std::unique_ptr<FakeDevice> makeFake(std::map<std::string, std::string> params,
                                     uint64_t budget = 0) {
  DeviceConfig c;
  c.name = "fake-test";
  c.parameters = std::move(params);
  c.memoryBudget = budget;
  auto d = std::make_unique<FakeDevice>(c);
  Error e = d->init();
  EXPECT_FALSE(e) << e.toString();
  return d;
}

/// Where a device's hook stops until the test opens it; the test can wait
/// for the hook to get there.
class Gate {
public:
  /// For the hook: says it has arrived, then waits until the gate opens.
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  /// Returns once a hook has arrived.
  void waitForArrival() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return arrived_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool arrived_ = false, open_ = false;
};

/// Expects \p device to hold exactly one background error, whose message
/// contains \p text.
void expectOneBackgroundError(DeviceManager &device, const std::string &text) {
  std::vector<Error> errors = device.takeBackgroundErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors.front().message().find(text), std::string::npos)
      << errors.front().toString();
}
} // namespace

TEST(FakeDevice, IsRegisteredWithItsCapabilities) {
  const BackendInfo *info = BackendRegistry::instance().find("fake");
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->capabilities.residentTensors);
  EXPECT_TRUE(info->capabilities.faultInjection);
  // The default configuration completes before each call returns.
  EXPECT_FALSE(info->capabilities.asynchronousCompletion);
  EXPECT_FALSE(info->testOnly);
}

TEST(FakeDevice, CapabilitiesFollowTheParameters) {
  BackendRegistry &registry = BackendRegistry::instance();
  auto async = registry.capabilitiesFor("fake", {{"async", "1"}});
  ASSERT_TRUE(async);
  EXPECT_TRUE(async->asynchronousCompletion);
  EXPECT_TRUE(async->residentTensors);
  auto host = registry.capabilitiesFor("fake", {{"resident", "0"}});
  ASSERT_TRUE(host);
  EXPECT_FALSE(host->residentTensors);
  EXPECT_FALSE(host->asynchronousCompletion);
  // What the registry answers is what a created device declares.
  auto configurations = registry.configurationsToTest("fake");
  ASSERT_TRUE(configurations);
  for (const ParameterMap &p : *configurations) {
    DeviceConfig c;
    c.parameters = p;
    auto device = registry.create("fake", c);
    ASSERT_TRUE(device.hasValue()) << device.takeError().toString();
    EXPECT_EQ((*device)->capabilities().toString(),
              registry.capabilitiesFor("fake", p)->toString());
  }
}

TEST(FakeDevice, DeclaresTheConfigurationsWorthTesting) {
  auto configurations =
      BackendRegistry::instance().configurationsToTest("fake");
  ASSERT_TRUE(configurations);
  EXPECT_EQ(*configurations, (std::vector<ParameterMap>{
                                 {},
                                 {{"async", "1"}},
                                 {{"resident", "0"}},
                                 {{"alignment", "4096"}},
                                 // Combined: resident=0 would take resident
                                 // tensors away, so it is left out.
                                 {{"alignment", "4096"}, {"async", "1"}}}));
  // A fixed parameter is in every configuration and is not swept.
  configurations = BackendRegistry::instance().configurationsToTest(
      "fake", {{"async", "1"}});
  ASSERT_TRUE(configurations);
  EXPECT_EQ(*configurations, (std::vector<ParameterMap>{
                                 {{"async", "1"}},
                                 {{"async", "1"}, {"resident", "0"}},
                                 {{"alignment", "4096"}, {"async", "1"}}}));
}

TEST(FakeDevice, BadValuesNameTheAllowedRange) {
  auto message = [](ParameterMap parameters) {
    DeviceConfig c;
    c.name = "f";
    c.parameters = std::move(parameters);
    FakeDevice d(c);
    Error e = d.init();
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.message();
  };
  EXPECT_EQ(message({{"asynch", "1"}}),
            "fake device 'f': unknown parameter 'asynch' (known: async, "
            "resident, seed, max-delay-us, alignment)");
  EXPECT_EQ(message({{"alignment", "48"}}),
            "fake device 'f': parameter 'alignment' must be a power of two "
            "from 1 to 2097152, got '48'");
  EXPECT_EQ(message({{"max-delay-us", "5000000"}}),
            "fake device 'f': parameter 'max-delay-us' must be an integer "
            "from 0 to 1000000, got '5000000'");
  EXPECT_EQ(message({{"async", "yes"}}),
            "fake device 'f': parameter 'async' must be 0 or 1 (also "
            "true/false, on/off), got 'yes'");
}

TEST(FakeDevice, ABudgetLargerThanTheHostIsRejected) {
  DeviceConfig c;
  c.name = "f";
  c.memoryBudget = uint64_t(1) << 62;
  FakeDevice d(c);
  Error e = d.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("memory budget of 4611686018427387904 bytes is "
                             "more than the host's"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("(allowed: 0 for the default of 1073741824, or "
                             "1 to "),
            std::string::npos)
      << e.message();
}

TEST(FakeDevice, QualifiedParametersReachOnlyTheirBackend) {
  DeviceConfig c;
  c.parameters = {{"fake:async", "1"}, {"opencl:pinned-staging", "1"}};
  auto device = BackendRegistry::instance().create("fake", c);
  ASSERT_TRUE(device.hasValue()) << device.takeError().toString();
  EXPECT_TRUE((*device)->capabilities().asynchronousCompletion);
}

TEST(FakeDevice, UnknownOrMalformedParametersAreClearErrors) {
  DeviceConfig c;
  c.name = "f";
  c.parameters = {{"asynch", "1"}};
  FakeDevice d(c);
  Error e = d.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("'asynch'"), std::string::npos) << e.message();
  c.parameters = {{"alignment", "48"}};
  FakeDevice d2(c);
  EXPECT_EQ(d2.init().code(), ErrorCode::InvalidArgument);
  c.parameters = {{"seed", "-1"}};
  FakeDevice d3(c);
  EXPECT_EQ(d3.init().code(), ErrorCode::InvalidArgument);
}

TEST(FakeDevice, PhysicalUsageRoundsToTheAlignmentLogicalDoesNot) {
  auto d = makeFake({{"alignment", "256"}});
  Tensor t(ElemKind::UInt8, {10}, "t");
  ASSERT_FALSE(transferToDeviceSync(*d, t));
  EXPECT_EQ(d->usedMemory(), 10u);
  EXPECT_EQ(d->physicalMemoryInUse(), 256u);
  ASSERT_FALSE(d->releaseDeviceTensor(t));
  EXPECT_EQ(d->physicalMemoryInUse(), 0u);
  EXPECT_EQ(d->maximumMemory(), fake::DefaultMemoryBudget);
}

TEST(FakeDevice, DeviceBytesAreTheTransferredBytes) {
  auto d = makeFake({});
  Tensor t(ElemKind::Int32, {3}, "t");
  auto h = t.mutableHostData<int32_t>();
  h[0] = 1, h[1] = -2, h[2] = 3;
  ASSERT_FALSE(transferToDeviceSync(*d, t));
  std::vector<std::byte> bytes = d->deviceBytes(t.residencySnapshot().location);
  ASSERT_EQ(bytes.size(), 12u);
  int32_t second;
  std::memcpy(&second, bytes.data() + 4, 4);
  EXPECT_EQ(second, -2);
  DeviceLocation loc = t.residencySnapshot().location;
  ASSERT_FALSE(d->releaseDeviceTensor(t));
  EXPECT_TRUE(d->deviceBytes(loc).empty()) << "released memory is gone";
}

TEST(FakeDevice, EventLogRecordsEachActionInOrder) {
  auto d = makeFake({});
  Tensor t(ElemKind::Float32, {4}, "t");
  ASSERT_FALSE(transferToDeviceSync(*d, t));
  ASSERT_FALSE(transferFromDeviceSync(*d, t, true));
  std::vector<std::string> ev = d->events();
  ASSERT_GE(ev.size(), 5u);
  EXPECT_EQ(ev[1].rfind("alloc ", 0), 0u) << ev[1];
  EXPECT_EQ(ev[2].rfind("to-device ", 0), 0u) << ev[2];
  EXPECT_EQ(ev[3].rfind("from-device ", 0), 0u) << ev[3];
  EXPECT_EQ(ev[4].rfind("free ", 0), 0u) << ev[4];
  DeviceStats s = d->stats();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(s.bytesToDevice, 16u);
  EXPECT_EQ(s.bytesFromDevice, 16u);
}

TEST(FakeDevice, AsyncCompletionArrivesOnAnotherThreadAfterTheCall) {
  auto d = makeFake({{"async", "1"}, {"seed", "3"}, {"max-delay-us", "2000"}});
  EXPECT_TRUE(d->capabilities().asynchronousCompletion);
  Tensor t(ElemKind::Float32, {4}, "t");
  std::atomic<bool> done{false};
  std::thread::id callbackThread;
  d->transferToDevice(t, std::nullopt, [&](Error e) {
    EXPECT_FALSE(e);
    callbackThread = std::this_thread::get_id();
    done = true;
  });
  EXPECT_TRUE(t.residencySnapshot().busy || done)
      << "the record is busy until the callback";
  t.residency().waitUntilIdle();
  while (!done)
    std::this_thread::yield();
  EXPECT_NE(callbackThread, std::this_thread::get_id());
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device);
}

/// A synchronous fake device that declares asynchronous completion: its
/// transfers come back on the caller's thread before the call returns.
class InlineThoughAsynchronous final : public FakeDevice {
public:
  InlineThoughAsynchronous() : FakeDevice(DeviceConfig{}) {}
  ~InlineThoughAsynchronous() override { shutdown(); }
  Capabilities capabilities() const override {
    Capabilities caps = FakeDevice::capabilities();
    caps.asynchronousCompletion = true;
    return caps;
  }
};

TEST(FakeDevice,
     AnInlineCompletionForACallerThatDoesNotWaitIsABackgroundError) {
  InlineThoughAsynchronous d;
  ASSERT_FALSE(d.init());
  // A caller that waits may be completed on its own thread.
  Tensor waited(ElemKind::Float32, {4}, "waited");
  ASSERT_FALSE(transferToDeviceSync(d, waited));
  EXPECT_TRUE(d.takeBackgroundErrors().empty());
  // One that does not wait may hold a lock its callback takes: the device
  // must not call back before the call returns.
  Tensor issued(ElemKind::Float32, {4}, "issued");
  bool returned = false, calledBeforeReturn = false;
  d.transferToDevice(issued, std::nullopt, [&](Error e) {
    EXPECT_FALSE(e);
    calledBeforeReturn = !returned;
  });
  returned = true;
  EXPECT_TRUE(calledBeforeReturn);
  expectOneBackgroundError(
      d, "completed transferToDevice of tensor 'issued' (16 bytes) on the "
         "thread that submitted it, before the submission returned");
  // What the framework answers itself, without the device (a read-back of
  // a tensor already on the host), may come back at once.
  Tensor host(ElemKind::Float32, {4}, "host");
  bool answered = false;
  d.transferFromDevice(host, true, [&](Error e) {
    EXPECT_FALSE(e);
    answered = true;
  });
  EXPECT_TRUE(answered);
  EXPECT_TRUE(d.takeBackgroundErrors().empty());
}

/// Declares asynchronous completion, holds back the completion of an
/// upload made for a caller that does not wait until release(), and
/// completes a waiting caller's at once, on its own thread.
class InlineOvertakesHeldUpload final : public FakeDevice {
public:
  InlineOvertakesHeldUpload() : FakeDevice(DeviceConfig{}) {}
  ~InlineOvertakesHeldUpload() override {
    release();
    shutdown();
  }
  Capabilities capabilities() const override {
    Capabilities caps = FakeDevice::capabilities();
    caps.asynchronousCompletion = true;
    return caps;
  }
  void release() {
    if (held_)
      std::exchange(held_, nullptr)(Error::success());
  }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (callerWaitsForCompletion())
      return FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
    FakeDevice::copyToDevice(dst, src, bytes, [this, done](Error e) mutable {
      held_ = [done = std::move(done), e = std::move(e)](Error) mutable {
        done(std::move(e));
      };
    });
  }

private:
  CompletionCallback held_;
};

/// A synchronous device shut down on another thread while an upload's call
/// is inside it: the shutdown claims the operation first and completes it
/// on its own thread, and is held (in the free of the upload's allocation)
/// until the call has returned; the device's own completion loses.
class ShutDownDuringAnUpload final : public fake::FakeDevice {
public:
  ShutDownDuringAnUpload() : FakeDevice(DeviceConfig{}) {}
  ~ShutDownDuringAnUpload() override {
    if (shutter_.joinable())
      shutter_.join();
  }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (shutter_.joinable())
      return FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
    shutter_ = std::thread([this] { shutdown(); });
    while (!freeing_.load())
      std::this_thread::yield();
    done(makeError(ErrorCode::DeviceLost, "the device is stopping"));
    returned_.store(true);
  }
  Error free(DeviceLocation location) override {
    freeing_.store(true);
    while (!returned_.load())
      std::this_thread::yield();
    // Time for the helper to look at its waiter after the call returned.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return FakeDevice::free(location);
  }

private:
  std::thread shutter_;
  std::atomic<bool> freeing_{false}, returned_{false};
};

TEST(FakeDevice, AHelperWaitsForTheCompletionOfAShutdownOnAnotherThread) {
  // The device is synchronous, but its call returned before the operation
  // was called back: the shutdown under way calls back on its thread, and
  // the helper waits for that instead of reporting a device that returned
  // without completing (semantics §4).
  ShutDownDuringAnUpload d;
  ASSERT_FALSE(d.init());
  Tensor t(ElemKind::Float32, {4}, "t");
  Error e = transferToDeviceSync(d, t);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::DeviceLost) << e.toString();
  EXPECT_TRUE(d.isShutDown());
  EXPECT_TRUE(d.takeBackgroundErrors().empty());
}

TEST(FakeDevice,
     AnInlineCompletionThatOvertakesAnEarlierOneIsABackgroundError) {
  // A caller that waits may be completed on its own thread only once every
  // operation submitted before it has been completed (semantics §4).
  InlineOvertakesHeldUpload d;
  ASSERT_FALSE(d.init());
  Tensor first(ElemKind::Float32, {4}, "first"),
      second(ElemKind::Float32, {4}, "second");
  bool firstDone = false;
  d.transferToDevice(first, std::nullopt, [&](Error e) {
    EXPECT_FALSE(e);
    firstDone = true;
  });
  EXPECT_FALSE(firstDone);
  ASSERT_FALSE(transferToDeviceSync(d, second));
  d.release();
  EXPECT_TRUE(firstDone);
  expectOneBackgroundError(
      d, "completed transferToDevice of tensor 'second' (16 bytes) on the "
         "thread that submitted it before completing transferToDevice of "
         "tensor 'first' (16 bytes), submitted earlier");
  // Once the earlier one is completed, a waiting caller's inline completion
  // is in order.
  Tensor third(ElemKind::Float32, {4}, "third");
  ASSERT_FALSE(transferToDeviceSync(d, third));
  EXPECT_TRUE(d.takeBackgroundErrors().empty());
}

TEST(FakeDevice, EveryResidencyChangeGivesTheRecordANewVersion) {
  // A sweep of the conformance runner skips reading a record whose version
  // it has seen match the model: a change that kept the version would go
  // unchecked there.
  auto d = makeFake({});
  Tensor a(ElemKind::Float32, {4}, "a"), b(ElemKind::Float32, {4}, "b");
  std::set<uint64_t> seen = {a.residency().version()};
  EXPECT_TRUE(seen.insert(b.residency().version()).second)
      << "two records share a version";
  auto changedTo = [&](const char *what, ResidencyState state) {
    ResidencySnapshot s = a.residencySnapshot();
    EXPECT_EQ(s.state, state) << what;
    EXPECT_EQ(s.version, a.residency().version()) << what;
    EXPECT_TRUE(seen.insert(s.version).second)
        << what << " kept a version seen before";
  };
  ASSERT_FALSE(transferToDeviceSync(*d, a));
  changedTo("to device", ResidencyState::Device);
  ASSERT_FALSE(transferFromDeviceSync(*d, a, /*release=*/false));
  changedTo("from device, kept", ResidencyState::Mirrored);
  a.mutableHostBytes();
  changedTo("host write of a mirrored tensor", ResidencyState::Host);
  ASSERT_FALSE(transferToDeviceSync(*d, a));
  changedTo("to device again", ResidencyState::Device);
  ASSERT_FALSE(d->releaseDeviceTensor(a));
  changedTo("release", ResidencyState::Host);
  ASSERT_FALSE(transferToDeviceSync(*d, a));
  changedTo("to device a third time", ResidencyState::Device);
  // A refused command changes nothing, and neither does reading.
  auto other = makeFake({});
  uint64_t before = a.residency().version();
  EXPECT_TRUE(other->releaseDeviceTensor(a)) << "resident elsewhere";
  (void)a.residencySnapshot();
  EXPECT_EQ(a.residency().version(), before);
  d->shutdown();
  changedTo("shutdown", ResidencyState::Lost);
  ASSERT_FALSE(d->releaseDeviceTensor(a));
  changedTo("release of a lost tensor", ResidencyState::Host);
}

TEST(FakeDevice, ABusyRecordHasAVersionOfItsOwn) {
  auto d = makeFake({{"async", "1"}, {"seed", "7"}, {"max-delay-us", "2000"}});
  Tensor t(ElemKind::Float32, {4}, "t");
  uint64_t before = t.residency().version();
  std::atomic<bool> done{false};
  d->transferToDevice(t, std::nullopt, [&](Error) { done = true; });
  ResidencySnapshot during = t.residencySnapshot();
  t.residency().waitUntilIdle();
  while (!done)
    std::this_thread::yield();
  ResidencySnapshot after = t.residencySnapshot();
  EXPECT_NE(after.version, before);
  if (during.busy) {
    EXPECT_NE(during.version, before);
    EXPECT_NE(during.version, after.version);
  }
}

TEST(FakeDevice, ASyncTransferWaitsForAMoveFromAnAsynchronousDevice) {
  // The record has a transfer to an asynchronous device in flight when the
  // blocking helper moves it to a synchronous one: the framework waits for
  // that transfer, then moves the record from the asynchronous device, which
  // completes after the call returns. The helper must wait for it, not
  // report the synchronous device for returning early.
  auto async = makeFake({{"async", "1"}, {"seed", "5"}});
  auto sync = makeFake({});
  for (int i = 0; i < 50; ++i) {
    Tensor t(ElemKind::Float32, {4}, "t");
    std::atomic<bool> first{false};
    async->transferToDevice(t, std::nullopt, [&](Error e) {
      EXPECT_FALSE(e) << e.toString();
      first = true;
    });
    Error e = transferToDeviceSync(*sync, t);
    ASSERT_FALSE(e) << "round " << i << ": " << e.toString();
    EXPECT_TRUE(first);
    ResidencySnapshot s = t.residencySnapshot();
    EXPECT_EQ(s.state, ResidencyState::Device);
    EXPECT_EQ(s.manager, sync.get());
    ASSERT_FALSE(transferFromDeviceSync(*sync, t, /*release=*/true));
  }
}

/// A synchronous fake device whose upload hook completes in place, then
/// stays in the hook a while before it returns, touching nothing of the
/// device: a backend may return from a hook well after it completed.
class LingersAfterCompletingUploads final : public FakeDevice {
public:
  LingersAfterCompletingUploads() : FakeDevice(DeviceConfig{}) {}
  ~LingersAfterCompletingUploads() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
};

TEST(FakeDevice, ADeviceMayGoOnceItsLastOperationHasCompleted) {
  // Moving a record from an asynchronous device uploads it to the target
  // on the source's thread. Once the caller has seen the move and the
  // release complete, nothing of the target's is in use, so the caller may
  // destroy it while that thread is still in the target's hook: the
  // framework must not touch the target after the hook returns. (In a
  // build with AddressSanitizer, the asan preset, a touch is a
  // heap-use-after-free that fails this test.)
  auto async = makeFake({{"async", "1"}});
  auto target = std::make_unique<LingersAfterCompletingUploads>();
  ASSERT_FALSE(target->init());
  Tensor t(ElemKind::Float32, {4}, "t");
  ASSERT_FALSE(transferToDeviceSync(*async, t));
  ASSERT_FALSE(transferToDeviceSync(*target, t));
  EXPECT_EQ(t.residencySnapshot().manager, target.get());
  ASSERT_FALSE(transferFromDeviceSync(*target, t, /*release=*/true));
  target.reset();
  // The source's thread returns from the target's hook meanwhile; async's
  // destructor waits for it.
  async.reset();
}

/// A synchronous fake device whose free() of one chosen location waits,
/// once, until the test lets it go.
class HoldsOneFree final : public FakeDevice {
public:
  HoldsOneFree() : FakeDevice(DeviceConfig{}) {}
  ~HoldsOneFree() override {
    gate.open();
    shutdown();
  }
  void holdFreeOf(DeviceLocation location) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = location;
  }
  /// Where the free of that location waits.
  Gate gate;

protected:
  Error free(DeviceLocation location) override {
    bool hold;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hold = held_ && *held_ == location;
      if (hold)
        held_.reset();
    }
    if (hold)
      gate.arriveAndWait();
    return FakeDevice::free(location);
  }

private:
  std::mutex mutex_;
  std::optional<DeviceLocation> held_;
};

TEST(FakeDevice, ALocationItsRecordIsReleasingIsNoProgramsToFree) {
  // A tensor took over a raw location; its read-back releases it. While
  // the device frees it, a program's releaseDeviceMemory of it must be
  // refused: in program order the location went with the release, and
  // letting the free through frees it twice (the framework once
  // unregistered the location before freeing it).
  HoldsOneFree d;
  ASSERT_FALSE(d.init());
  Tensor t(ElemKind::Float32, {64}, "t");
  Expected<DeviceLocation> location = d.allocateDeviceMemory(t.sizeInBytes());
  ASSERT_TRUE(location);
  ASSERT_FALSE(transferToDeviceSync(d, t, *location));
  d.holdFreeOf(*location);
  Error released = Error::success();
  std::thread readBack(
      [&] { released = transferFromDeviceSync(d, t, /*release=*/true); });
  d.gate.waitForArrival();
  Error e = d.releaseDeviceMemory(*location);
  d.gate.open();
  readBack.join();
  ASSERT_TRUE(e) << "a free of a location its record is releasing succeeded";
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("released since"), std::string::npos)
      << e.toString();
  EXPECT_FALSE(released) << released.toString();
  EXPECT_TRUE(d.takeBackgroundErrors().empty());
  EXPECT_EQ(d.usedMemory(), 0u);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  // Gone for good: freeing it now is refused by the device.
  EXPECT_TRUE(d.releaseDeviceMemory(*location));
}

TEST(FakeDevice, ShutdownFromACompletionOnTheWorkerDoesNotDeadlock) {
  auto d = makeFake({{"async", "1"}});
  Tensor t(ElemKind::Float32, {4}, "t");
  std::atomic<bool> done{false};
  FakeDevice *raw = d.get();
  d->transferToDevice(t, std::nullopt, [&](Error) {
    raw->shutdown();
    done = true;
  });
  while (!done)
    std::this_thread::yield();
  EXPECT_TRUE(d->isShutDown());
  d.reset();
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Lost);
}

TEST(FakeDevice, DestroyingTheDeviceLosesItsTensorsSafely) {
  Tensor t(ElemKind::Float32, {4}, "t");
  {
    auto d = makeFake({});
    ASSERT_FALSE(transferToDeviceSync(*d, t));
  }
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Lost);
  EXPECT_EQ(t.residencySnapshot().manager, nullptr);
}

namespace {
/// A fake device whose shutdown stops, once it has begun refusing work, at
/// a gate until the test opens it: what the device's records look like in
/// the middle of a shutdown.
class GatedShutdown final : public FakeDevice {
public:
  GatedShutdown() : FakeDevice(config()) {}
  ~GatedShutdown() override {
    gate.open();
    shutdown();
  }
  /// Where the shutdown waits.
  Gate gate;

protected:
  void shutdownBackend() override {
    gate.arriveAndWait();
    FakeDevice::shutdownBackend();
  }

private:
  static DeviceConfig config() {
    DeviceConfig c;
    c.name = "gated-shutdown";
    return c;
  }
};
} // namespace

// Once a shutdown refuses work, no thread may see the device's records as
// they were: a refused transfer followed by a read of a record still shown
// Device has no order with the shutdown (semantics, section 6; found by
// the parallel families, whose branches now shut devices down).
TEST(FakeDevice, AShutdownUnderWayShowsNoRecordAsItWas) {
  ScopedThrowingViolationHandler violations;
  GatedShutdown device;
  ASSERT_FALSE(device.init());
  Tensor onDevice(ElemKind::Float32, {4}, "on-device");
  Tensor mirrored(ElemKind::Float32, {4}, "mirrored");
  Tensor host(ElemKind::Float32, {4}, "host");
  Tensor looked(ElemKind::Float32, {4}, "looked-at");
  Tensor lookedMirrored(ElemKind::Float32, {4}, "looked-at-mirrored");
  ASSERT_FALSE(transferToDeviceSync(device, onDevice));
  ASSERT_FALSE(transferToDeviceSync(device, mirrored));
  ASSERT_FALSE(transferFromDeviceSync(device, mirrored, /*release=*/false));
  ASSERT_FALSE(transferToDeviceSync(device, looked));
  ASSERT_FALSE(transferToDeviceSync(device, lookedMirrored));
  ASSERT_FALSE(
      transferFromDeviceSync(device, lookedMirrored, /*release=*/false));
  std::thread stopper([&] { device.shutdown(); });
  device.gate.waitForArrival();
  // An observation alone, before any operation waits on the records, shows
  // them as the shutdown leaves them.
  EXPECT_EQ(looked.residencySnapshot().state, ResidencyState::Lost);
  EXPECT_EQ(lookedMirrored.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(transferToDeviceSync(device, host).code(), ErrorCode::DeviceLost);
  try {
    (void)onDevice.hostBytes();
    ADD_FAILURE() << "a host read of a record on a device being shut down";
  } catch (const ContractViolationError &v) {
    EXPECT_EQ(v.kind(), ViolationKind::HostAccessWhileLost) << v.what();
  }
  EXPECT_EQ(onDevice.residencySnapshot().state, ResidencyState::Lost);
  // The host copy of a mirrored record stays valid: a write needs nothing
  // of the device.
  mirrored.mutableHostBytes()[0] = std::byte{1};
  EXPECT_EQ(mirrored.residencySnapshot().state, ResidencyState::Host);
  device.gate.open();
  stopper.join();
  EXPECT_EQ(device.usedMemory(), 0u);
  EXPECT_TRUE(device.takeBackgroundErrors().empty());
}

namespace {
/// A fake device whose runs wait at a gate until the test opens it, so that
/// a test sees which runs reach the device before any completes.
class GatedRuns final : public FakeDevice {
public:
  GatedRuns(bool inOrder) : FakeDevice(config()), inOrder_(inOrder) {}
  ~GatedRuns() override {
    open();
    shutdown();
  }
  Capabilities capabilities() const override {
    Capabilities caps = FakeDevice::capabilities();
    caps.asynchronousCompletion = true;
    caps.inOrderRuns = inOrder_;
    return caps;
  }
  /// Runs reached the device so far.
  size_t issued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return issued_;
  }
  /// Performs the held runs in the order they were issued, and every later
  /// run at once.
  void open() {
    std::vector<Held> runs;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
      runs.swap(held_);
    }
    for (Held &h : runs)
      FakeDevice::execute(*h.function, std::move(h.arguments),
                          std::move(h.done));
  }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++issued_;
    if (!open_) {
      held_.push_back({&function, std::move(arguments), std::move(done)});
      return;
    }
    lock.unlock();
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  static DeviceConfig config() {
    DeviceConfig c;
    c.name = "gated";
    return c;
  }
  struct Held {
    const Function *function;
    std::vector<RunArgument> arguments;
    CompletionCallback done;
  };
  bool inOrder_;
  std::mutex mutex_;
  size_t issued_ = 0;
  bool open_ = false;
  std::vector<Held> held_;
};

Function scaleBy2(const char *name, const char *from, const char *to) {
  Type type{ElemKind::Float32, {4}};
  Function fn(name);
  fn.addPlaceholder(from, type).addPlaceholder(to, type);
  fn.addNode(Node{OpKind::Scale, {from}, to, 2.0f});
  return fn;
}

/// An asynchronous fake device whose uploads never complete on their own:
/// they stay pending until a shutdown abandons them.
class UploadsNeverComplete final : public FakeDevice {
public:
  UploadsNeverComplete() : FakeDevice(DeviceConfig{}) {}
  ~UploadsNeverComplete() override { shutdown(); }
  Capabilities capabilities() const override {
    Capabilities caps = FakeDevice::capabilities();
    caps.asynchronousCompletion = true;
    return caps;
  }

protected:
  void copyToDevice(DeviceLocation, const std::byte *, uint64_t,
                    CompletionCallback done) override {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(std::move(done));
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    // Dropped uncalled: the framework calls back what a shutdown abandons.
    std::lock_guard<std::mutex> lock(mutex_);
    held_.clear();
  }

private:
  std::mutex mutex_;
  std::vector<CompletionCallback> held_;
};

TEST(FakeDevice, AnOperationAShutdownAbandonsHearsOfItAfterTheNetworksWent) {
  // A shutdown is one step: a program that hears of its pending
  // operation's end (DeviceLost) must meet a device without networks, not
  // evict or run one the shutdown is about to drop (semantics, section 6).
  UploadsNeverComplete device;
  ASSERT_FALSE(device.init());
  ASSERT_FALSE(addNetworkSync(device, scaleBy2("n", "a", "b")));
  Tensor t(ElemKind::Float32, {4}, "t");
  std::optional<Error> heard;
  bool networkStillThere = true;
  device.transferToDevice(t, std::nullopt, [&](Error e) {
    heard = std::move(e);
    networkStillThere = device.hasNetwork("n");
  });
  ASSERT_FALSE(heard.has_value()) << "the upload completed on its own";
  device.shutdown();
  ASSERT_TRUE(heard.has_value());
  EXPECT_EQ(heard->code(), ErrorCode::DeviceLost) << heard->toString();
  EXPECT_FALSE(networkStillThere)
      << "the abandoned upload was called back while the device still held "
         "its network";
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
}

/// Two dependent runs (a -> b, then b -> a) on resident a and b, the second
/// issued while the first waits at the gate: it reaches the device then
/// (true) or only once the first completed (false). The gate opens by
/// itself after \p patienceMs, so that a framework that waits cannot hang
/// the test. Checks the result either way: a = 4 * a0.
bool secondRunReachedTheDeviceFirst(GatedRuns &device, unsigned patienceMs) {
  EXPECT_FALSE(device.init());
  EXPECT_FALSE(addNetworkSync(device, scaleBy2("ab", "a", "b")));
  EXPECT_FALSE(addNetworkSync(device, scaleBy2("ba", "b", "a")));
  ExecutionContext context;
  Tensor &a = context.bindings().allocate("a", {ElemKind::Float32, {4}});
  Tensor &b = context.bindings().allocate("b", {ElemKind::Float32, {4}});
  float a0[4] = {1, -2, 3.5f, 0.25f};
  std::memcpy(a.mutableHostBytes().data(), a0, sizeof a0);
  EXPECT_FALSE(transferToDeviceSync(device, a));
  EXPECT_FALSE(transferToDeviceSync(device, b));
  std::atomic<int> completed{0};
  auto count = [&](Error e) {
    EXPECT_FALSE(e) << e.toString();
    ++completed;
  };
  device.runFunction("ab", context, count);
  std::promise<void> answered;
  std::thread opener([&, future = answered.get_future()] {
    future.wait_for(std::chrono::milliseconds(patienceMs));
    device.open();
  });
  device.runFunction("ba", context, count);
  bool joined = device.issued() == 2 && completed == 0;
  answered.set_value();
  opener.join();
  EXPECT_FALSE(transferFromDeviceSync(device, a, /*release=*/true));
  EXPECT_EQ(completed, 2);
  float expected[4], got[4];
  for (int i = 0; i < 4; ++i)
    expected[i] = 4 * a0[i];
  std::memcpy(got, a.hostBytes().data(), sizeof got);
  EXPECT_EQ(std::memcmp(expected, got, sizeof got), 0)
      << got[0] << " " << got[1] << " " << got[2] << " " << got[3];
  return joined;
}
} // namespace

TEST(FakeDevice, ARunOnRecordsOfEarlierRunsIsIssuedWithoutWaitingWhenInOrder) {
  GatedRuns device(/*inOrder=*/true);
  EXPECT_TRUE(secondRunReachedTheDeviceFirst(device, 5000));
}

TEST(FakeDevice, ARunOnRecordsOfEarlierRunsWaitsWhenRunsMayBeReordered) {
  GatedRuns device(/*inOrder=*/false);
  EXPECT_FALSE(secondRunReachedTheDeviceFirst(device, 50));
}

/// A call made on a thread of its own, joined when the object goes: whether
/// it returns while the creating thread waits tells whether it needs a lock
/// that thread holds.
class CallOnAnotherThread {
public:
  explicit CallOnAnotherThread(std::function<void()> call)
      : thread_([this, call = std::move(call)] {
          call();
          returned_.set_value();
        }) {}
  ~CallOnAnotherThread() { thread_.join(); }
  bool returnedWithin(std::chrono::milliseconds patience) {
    return future_.wait_for(patience) == std::future_status::ready;
  }

private:
  std::promise<void> returned_;
  std::future<void> future_ = returned_.get_future();
  std::thread thread_;
};

TEST(FakeDevice, RefusalsFoundUnderTheDevicesLockCallBackWithoutIt) {
  // A program may call into the device from a callback (semantics §4),
  // also from that of a call the framework refuses after looking at the
  // device's networks or resident records under its lock.
  auto d = makeFake({});
  ASSERT_FALSE(addNetworkSync(*d, scaleBy2("n", "a", "b")));
  Tensor owner(ElemKind::Float32, {4}, "owner");
  Tensor other(ElemKind::Float32, {4}, "other");
  ASSERT_FALSE(transferToDeviceSync(*d, owner));
  DeviceLocation taken = owner.residencySnapshot().location;
  ExecutionContext context;
  struct Refusal {
    const char *what;
    std::function<void(CompletionCallback)> call;
  };
  std::vector<Refusal> refusals = {
      {"addNetwork of a network already there",
       [&](CompletionCallback cb) {
         d->addNetwork(scaleBy2("n", "a", "b"), std::move(cb));
       }},
      {"evictNetwork of no network",
       [&](CompletionCallback cb) { d->evictNetwork("none", std::move(cb)); }},
      {"runFunction of no network",
       [&](CompletionCallback cb) {
         d->runFunction("none", context, std::move(cb));
       }},
      {"transferToDevice to a location another tensor holds",
       [&](CompletionCallback cb) {
         d->transferToDevice(other, taken, std::move(cb));
       }},
  };
  for (Refusal &r : refusals) {
    std::optional<CallOnAnotherThread> probe;
    bool refused = false, answered = false;
    r.call([&](Error e) {
      refused = static_cast<bool>(e);
      probe.emplace([&] { (void)d->hasNetwork("n"); });
      answered = probe->returnedWithin(std::chrono::milliseconds(2000));
    });
    probe.reset();
    EXPECT_TRUE(refused) << r.what;
    EXPECT_TRUE(answered) << r.what << " called back holding the device's lock";
  }
  ASSERT_FALSE(transferFromDeviceSync(*d, owner, /*release=*/true));
}
