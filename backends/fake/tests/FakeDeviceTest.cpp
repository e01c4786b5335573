//===- FakeDeviceTest.cpp - What only the reference device shows ----------===//
#include "drt/fake/FakeDevice.h"
#include "drt/BackendRegistry.h"
#include "drt/SyncTransfer.h"

#include <gtest/gtest.h>

#include <cstring>
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
  EXPECT_EQ(
      *configurations,
      (std::vector<ParameterMap>{
          {}, {{"async", "1"}}, {{"resident", "0"}}, {{"alignment", "4096"}}}));
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
