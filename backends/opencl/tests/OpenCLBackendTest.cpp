//===- OpenCLBackendTest.cpp - OpenCL-specific backend tests --------------===//
//
// What the framework-level behaviour tests cannot see: device selection,
// OpenCL error mapping, stale handles kept away from the driver, the budget,
// pinned staging, kernels built once, and run results bit-equal to the fake
// device's. No death tests: fork() after POCL has started hangs the child.
//
//===----------------------------------------------------------------------===//
#include "OpenCLTestSupport.h"

#include "drt/BackendRegistry.h"
#include "drt/ExecutionEngine.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <thread>

using namespace drt;
using namespace drt::opencl;
using namespace drt::opencl::testing;

namespace {

Type f32(size_t n) { return Type{ElemKind::Float32, {n}}; }
Type i32(size_t n) { return Type{ElemKind::Int32, {n}}; }

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

//===----------------------------------------------------------------------===//
// Devices and selection.
//===----------------------------------------------------------------------===//

TEST(OpenCLDevices, ListsTheDevicesTheLoaderReports) {
  Expected<std::vector<OpenCLDeviceInfo>> devices = listOpenCLDevices();
  ASSERT_TRUE(devices.hasValue()) << devices.takeError().toString();
  ASSERT_FALSE(devices->empty()) << "no OpenCL device (is POCL installed?)";
  std::string listing = formatOpenCLDeviceList();
  for (const OpenCLDeviceInfo &info : *devices) {
    EXPECT_TRUE(contains(listing, info.deviceName)) << listing;
    EXPECT_GT(info.globalMemoryBytes, 0u);
    EXPECT_GT(info.maxAllocationBytes, 0u);
  }
}

TEST(OpenCLSelection, UnknownDeviceIsInvalidArgumentListingTheDevices) {
  OpenCLDeviceManager device(
      configNamed("cl", {{"device", "no-such-device-anywhere"}}));
  Error e = device.init();
  ASSERT_EQ(e.code(), ErrorCode::InvalidArgument) << e.toString();
  EXPECT_TRUE(contains(e.message(), "no-such-device-anywhere")) << e.message();
  auto devices = listOpenCLDevices();
  ASSERT_TRUE(devices.hasValue());
  EXPECT_TRUE(contains(e.message(), devices->front().deviceName))
      << e.message();
}

TEST(OpenCLSelection, UnknownPlatformIsInvalidArgument) {
  OpenCLDeviceManager device(configNamed("cl", {{"platform", "99"}}));
  Error e = device.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.toString();
}

TEST(OpenCLSelection, DeviceIndexPastTheMatchesIsInvalidArgument) {
  OpenCLDeviceManager device(configNamed("cl", {{"device-index", "4096"}}));
  Error e = device.init();
  ASSERT_EQ(e.code(), ErrorCode::InvalidArgument) << e.toString();
  EXPECT_TRUE(contains(e.message(), "device-index 4096")) << e.message();
}

TEST(OpenCLSelection, MalformedParametersAreInvalidArgument) {
  OpenCLDeviceManager pinned(configNamed("cl", {{"pinned-staging", "maybe"}}));
  Error e = pinned.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "'pinned-staging' must be one of auto, 1, "
                                    "0, got 'maybe'"))
      << e.message();
  OpenCLDeviceManager index(configNamed("cl", {{"device-index", "first"}}));
  EXPECT_EQ(index.init().code(), ErrorCode::InvalidArgument);
}

TEST(OpenCLSelection, ChoosesByIndexAndByCaseInsensitiveNameSubstring) {
  auto devices = listOpenCLDevices();
  ASSERT_TRUE(devices.hasValue());
  ASSERT_FALSE(devices->empty());
  const OpenCLDeviceInfo &first = devices->front();
  std::string upper;
  for (char c : first.deviceName.substr(0, 4))
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto byName = openDevice(
      configNamed("cl", {{"platform", std::to_string(first.platformIndex)},
                         {"device", upper}}));
  ASSERT_TRUE(byName);
  EXPECT_EQ(byName->deviceInfo().platformIndex, first.platformIndex);
  EXPECT_TRUE(
      contains(byName->deviceInfo().deviceName, first.deviceName.substr(0, 4)));
  auto byIndex = openDevice(
      configNamed("cl", {{"platform", first.platformName},
                         {"device", std::to_string(first.deviceIndex)}}));
  ASSERT_TRUE(byIndex);
  EXPECT_EQ(byIndex->deviceInfo().deviceName, first.deviceName);
  EXPECT_TRUE(contains(byIndex->description(), first.deviceName));
}

TEST(OpenCLBackend, IsRegisteredWithTruthfulCapabilities) {
  const BackendInfo *info = BackendRegistry::instance().find("opencl");
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->capabilities.residentTensors);
  EXPECT_TRUE(info->capabilities.asynchronousCompletion);
  EXPECT_FALSE(info->capabilities.peerToPeer);
  EXPECT_TRUE(info->capabilities.memoryBudget);
  EXPECT_TRUE(info->capabilities.faultInjection);
  EXPECT_TRUE(info->capabilities.deviceLoss);
  auto device =
      BackendRegistry::instance().create("opencl", configNamed("registry"));
  ASSERT_TRUE(device.hasValue()) << device.takeError().toString();
  EXPECT_EQ((*device)->name(), "registry");
}

TEST(OpenCLBackend, DeclaresItsParametersAndTheConfigurationsToTest) {
  const BackendInfo *info = BackendRegistry::instance().find("opencl");
  ASSERT_NE(info, nullptr);
  std::vector<std::string> names;
  for (const BackendParameter &p : info->parameters)
    names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "platform", "device", "device-index", "pinned-staging",
                       "staging-min-bytes", "shared-context",
                       "program-binaries", "driver-faults", "driver-delay-us",
                       "driver-jitter-us", "staging-chunk-bytes",
                       "staging-copy-threads", "staging-min-chunks",
                       "staging-min-split-bytes", "staging-min-slice-bytes",
                       "staging-pool-buffers", "memory-pool-bytes"}));
  auto configurations =
      BackendRegistry::instance().configurationsToTest("opencl");
  ASSERT_TRUE(configurations);
  EXPECT_EQ(*configurations,
            (std::vector<ParameterMap>{
                {},
                {{"pinned-staging", "1"}},
                {{"pinned-staging", "1"}, {"staging-min-bytes", "0"}},
                {{"shared-context", "0"}},
                {{"driver-delay-us", "300"},
                 {"pinned-staging", "1"},
                 {"staging-min-bytes", "0"}},
                {{"driver-jitter-us", "50"}},
                {{"pinned-staging", "1"},
                 {"staging-chunk-bytes", "4096"},
                 {"staging-min-bytes", "0"}},
                {{"pinned-staging", "1"}, {"staging-copy-threads", "2"}},
                {{"pinned-staging", "1"},
                 {"staging-min-bytes", "0"},
                 {"staging-min-chunks", "4"}},
                {{"pinned-staging", "1"},
                 {"staging-min-bytes", "0"},
                 {"staging-min-chunks", "4"},
                 {"staging-min-split-bytes", "8192"}},
                {{"pinned-staging", "1"},
                 {"staging-copy-threads", "2"},
                 {"staging-min-bytes", "0"},
                 {"staging-min-slice-bytes", "512"}},
                {{"pinned-staging", "1"},
                 {"staging-min-bytes", "0"},
                 {"staging-pool-buffers", "1"}},
                {{"memory-pool-bytes", "0"}},
                {{"memory-pool-bytes", "65536"}},
                // Then every parameter at a non-default value at once.
                {{"driver-delay-us", "300"},
                 {"driver-jitter-us", "50"},
                 {"memory-pool-bytes", "0"},
                 {"pinned-staging", "1"},
                 {"staging-chunk-bytes", "4096"},
                 {"staging-copy-threads", "2"},
                 {"staging-min-bytes", "0"},
                 {"staging-min-chunks", "4"},
                 {"staging-min-slice-bytes", "512"},
                 {"staging-min-split-bytes", "8192"},
                 {"staging-pool-buffers", "1"}},
                {{"driver-delay-us", "300"},
                 {"driver-jitter-us", "50"},
                 {"memory-pool-bytes", "65536"},
                 {"pinned-staging", "1"},
                 {"staging-chunk-bytes", "4096"},
                 {"staging-copy-threads", "2"},
                 {"staging-min-bytes", "0"},
                 {"staging-min-chunks", "4"},
                 {"staging-min-slice-bytes", "512"},
                 {"staging-min-split-bytes", "8192"},
                 {"staging-pool-buffers", "1"}}}));
  // A fixed setting that turns staging off leaves the chunk size and the
  // copying threads untested.
  auto unstaged = BackendRegistry::instance().configurationsToTest(
      "opencl", {{"pinned-staging", "0"}});
  ASSERT_TRUE(unstaged);
  for (const ParameterMap &c : *unstaged) {
    EXPECT_EQ(c.count("staging-chunk-bytes"), 0u);
    EXPECT_EQ(c.count("staging-min-bytes"), 0u);
    EXPECT_EQ(c.count("staging-copy-threads"), 0u);
    EXPECT_EQ(c.count("staging-min-chunks"), 0u);
    EXPECT_EQ(c.count("staging-min-split-bytes"), 0u);
    EXPECT_EQ(c.count("staging-min-slice-bytes"), 0u);
    EXPECT_EQ(c.count("staging-pool-buffers"), 0u);
  }
  auto caps = BackendRegistry::instance().capabilitiesFor(
      "opencl", {{"pinned-staging", "1"}});
  ASSERT_TRUE(caps);
  EXPECT_EQ(caps->toString(), info->capabilities.toString());
  // Only the jitter widens race windows, at its tested value.
  for (const BackendParameter &p : info->parameters)
    EXPECT_EQ(p.widensRacesWith, p.name == "driver-jitter-us" ? "50" : "")
        << p.name;
  // Only the delay holds operations in flight.
  for (const BackendParameter &p : info->parameters)
    EXPECT_EQ(p.holdsOperationsWith, p.name == "driver-delay-us" ? "500" : "")
        << p.name;
}

TEST(OpenCLBackend,
     UnknownParametersAndBadValuesAreRejectedNamingWhatIsAllowed) {
  OpenCLDeviceManager misspelt(configNamed("cl", {{"pinned-stageing", "1"}}));
  Error e = misspelt.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "unknown parameter 'pinned-stageing'"))
      << e.message();
  EXPECT_TRUE(contains(e.message(), "pinned-staging, staging-min-bytes"))
      << e.message();
  OpenCLDeviceManager badValue(configNamed("cl", {{"shared-context", "2"}}));
  e = badValue.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "'shared-context' must be 0 or 1"))
      << e.message();
  OpenCLDeviceManager badIndex(configNamed("cl", {{"device-index", "-1"}}));
  e = badIndex.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "an integer from 0 to 4294967295"))
      << e.message();
  // The registry refuses them without creating a device.
  auto caps =
      BackendRegistry::instance().capabilitiesFor("opencl", {{"async", "1"}});
  ASSERT_FALSE(caps);
  EXPECT_TRUE(
      contains(caps.takeError().message(), "unknown parameter 'async'"));
}

TEST(OpenCLBackend, ParametersForAnotherBackendAreLeftToIt) {
  // A scenario configured for the fake device ("fake:async") also creates
  // OpenCL devices when OpenCL is the differential partner.
  auto device = BackendRegistry::instance().create(
      "opencl", configNamed("partner", {{"fake:async", "1"},
                                        {"opencl:pinned-staging", "1"}}));
  ASSERT_TRUE(device.hasValue()) << device.takeError().toString();
  auto *manager = dynamic_cast<OpenCLDeviceManager *>(device->get());
  ASSERT_NE(manager, nullptr);
  EXPECT_TRUE(manager->usesPinnedStaging());
}

TEST(OpenCLErrors, NamesStatusCodes) {
  EXPECT_EQ(openCLErrorName(-61), "CL_INVALID_BUFFER_SIZE");
  EXPECT_EQ(openCLErrorName(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
  EXPECT_EQ(openCLErrorName(-5), "CL_OUT_OF_RESOURCES");
  EXPECT_EQ(openCLErrorName(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_EQ(openCLErrorName(-12345), "CL_UNKNOWN_ERROR(-12345)");
}

//===----------------------------------------------------------------------===//
// Kernels and init.
//===----------------------------------------------------------------------===//

Function scaleNetwork(std::string name, double factor) {
  Function fn(std::move(name));
  fn.addPlaceholder("x", f32(4)).addPlaceholder("y", f32(4));
  fn.addNode(Node{OpKind::Scale, {"x"}, "y", factor});
  return fn;
}

TEST(OpenCLKernels, AreBuiltOncePerDeviceNotPerNetworkOrRun) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  // Built by this manager, or by an earlier one of the device and reused.
  uint64_t builds = device->programBuilds();
  EXPECT_EQ(builds, device->programReused() ? 0u : 1u);
  for (int n = 0; n < 3; ++n)
    ASSERT_TRUE(
        addNetworkSync(*device, scaleNetwork("s" + std::to_string(n), n + 1.0))
            .isSuccess());
  for (int r = 0; r < 5; ++r) {
    ExecutionContext context;
    context.bindings().allocate("x", f32(4));
    context.bindings().allocate("y", f32(4));
    Error e = runFunctionSync(*device, "s" + std::to_string(r % 3), context);
    ASSERT_TRUE(e.isSuccess()) << e.toString();
  }
  EXPECT_EQ(device->programBuilds(), builds);
  EXPECT_EQ(device->stats().runs, 5u);
}

TEST(OpenCLKernels, InitTimeIsMeasured) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  EXPECT_GT(device->initSeconds(), 0.0);
  if (!device->programReused()) {
    EXPECT_GT(device->buildSeconds(), 0.0);
  }
  EXPECT_LE(device->buildSeconds(), device->initSeconds());
  ::testing::Test::RecordProperty("init_ms",
                                  std::to_string(device->initSeconds() * 1e3));
  ::testing::Test::RecordProperty("build_ms",
                                  std::to_string(device->buildSeconds() * 1e3));
}

TEST(OpenCLKernels, ALaterManagerOfTheDeviceReusesTheContextAndProgram) {
  auto first = openDevice(configNamed("first"));
  ASSERT_TRUE(first);
  auto second = openDevice(configNamed("second"));
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->programReused());
  EXPECT_EQ(second->programBuilds(), 0u);
  ::testing::Test::RecordProperty("init_ms_reused",
                                  std::to_string(second->initSeconds() * 1e3));
  // Its own queue and kernels compute what the first manager's do, and its
  // buffers stay its own.
  ASSERT_TRUE(addNetworkSync(*second, scaleNetwork("s", 2.5)).isSuccess());
  ExecutionContext context;
  context.bindings().allocate("x", f32(4));
  fill<float>(*context.bindings().get("x"), {1, -2, 3, 0.5f});
  Tensor &y = context.bindings().allocate("y", f32(4));
  ASSERT_TRUE(runFunctionSync(*second, "s", context).isSuccess());
  EXPECT_EQ(first->liveAllocations(), 0u);
  EXPECT_EQ(second->liveAllocations(), 1u);
  ASSERT_TRUE(transferFromDeviceSync(*second, y, true).isSuccess());
  EXPECT_EQ(contents<float>(y), (std::vector<float>{2.5f, -5, 7.5f, 1.25f}));
  // Shutting one manager down leaves the shared context to the other.
  second->shutdown();
  auto third = openDevice(configNamed("third"));
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->programReused());
  ASSERT_TRUE(addNetworkSync(*first, scaleNetwork("s", 2.0)).isSuccess());
  ExecutionContext again;
  fill<float>(again.bindings().allocate("x", f32(4)), {1, 2, 3, 4});
  Tensor &z = again.bindings().allocate("y", f32(4));
  ASSERT_TRUE(runFunctionSync(*first, "s", again).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*first, z, true).isSuccess());
  EXPECT_EQ(contents<float>(z), (std::vector<float>{2, 4, 6, 8}));
}

TEST(OpenCLKernels, SharedContextZeroBuildsItsOwn) {
  auto first = openDevice(configNamed("first"));
  ASSERT_TRUE(first);
  auto own = openDevice(configNamed("own", {{"shared-context", "0"}}));
  ASSERT_TRUE(own);
  EXPECT_FALSE(own->programReused());
  EXPECT_EQ(own->programBuilds(), 1u);
  ASSERT_TRUE(addNetworkSync(*own, scaleNetwork("s", -1.0)).isSuccess());
  ExecutionContext context;
  fill<float>(context.bindings().allocate("x", f32(4)), {1, 2, 3, 4});
  Tensor &y = context.bindings().allocate("y", f32(4));
  ASSERT_TRUE(runFunctionSync(*own, "s", context).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*own, y, true).isSuccess());
  EXPECT_EQ(contents<float>(y), (std::vector<float>{-1, -2, -3, -4}));

  OpenCLDeviceManager bad(configNamed("bad", {{"shared-context", "maybe"}}));
  Error e = bad.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.toString();
  EXPECT_TRUE(contains(e.message(), "shared-context")) << e.message();
}

TEST(OpenCLKernels, AManagerOfItsOwnContextBuildsFromTheKeptBinary) {
  // The second of two managers with contexts of their own finds the binary
  // of the device's first build from source, and its program computes what
  // one built from source does.
  ParameterMap own = {{"shared-context", "0"}};
  auto first = openDevice(configNamed("first", own));
  ASSERT_TRUE(first);
  auto second = openDevice(configNamed("second", own));
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->programFromBinary());
  EXPECT_FALSE(second->programReused());
  EXPECT_EQ(second->programBuilds(), 1u);
  EXPECT_EQ(second->driverCalls()[size_t(OpenCLCall::CreateProgramWithSource)],
            0u);
  auto scaled = [](OpenCLDeviceManager &device) {
    EXPECT_TRUE(addNetworkSync(device, scaleNetwork("s", 3.0)).isSuccess());
    ExecutionContext context;
    fill<float>(context.bindings().allocate("x", f32(4)), {1, -2, 3, 0.5f});
    Tensor &y = context.bindings().allocate("y", f32(4));
    EXPECT_TRUE(runFunctionSync(device, "s", context).isSuccess());
    EXPECT_TRUE(transferFromDeviceSync(device, y, true).isSuccess());
    return contents<float>(y);
  };
  std::vector<float> expected = {3, -6, 9, 1.5f};
  EXPECT_EQ(scaled(*second), expected);

  // program-binaries=0: from source.
  ParameterMap fromSource = own;
  fromSource["program-binaries"] = "0";
  auto third = openDevice(configNamed("third", fromSource));
  ASSERT_TRUE(third);
  EXPECT_FALSE(third->programFromBinary());
  EXPECT_EQ(third->driverCalls()[size_t(OpenCLCall::CreateProgramWithBinary)],
            0u);
  EXPECT_EQ(scaled(*third), expected);

  // A binary the driver refuses, when the program is made or when it is
  // built, is built from source instead.
  for (const char *refusal : {"clCreateProgramWithBinary:1:CL_INVALID_BINARY",
                              "clBuildProgram:1:CL_INVALID_BINARY"}) {
    ParameterMap refused = own;
    refused["driver-faults"] = refusal;
    auto device = openDevice(configNamed("refused", refused));
    ASSERT_TRUE(device) << refusal;
    EXPECT_FALSE(device->programFromBinary()) << refusal;
    EXPECT_EQ(
        device->driverCalls()[size_t(OpenCLCall::CreateProgramWithSource)], 1u)
        << refusal;
    EXPECT_EQ(scaled(*device), expected) << refusal;
  }

  // Any other failure fails init, naming the call.
  ParameterMap failing = own;
  failing["driver-faults"] =
      "clCreateProgramWithBinary:1:CL_OUT_OF_HOST_MEMORY";
  OpenCLDeviceManager failed(configNamed("failed", failing));
  Error e = failed.init();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory) << e.toString();
  EXPECT_TRUE(contains(e.message(), "clCreateProgramWithBinary"))
      << e.message();
}

//===----------------------------------------------------------------------===//
// Memory: stale handles, errors, budget.
//===----------------------------------------------------------------------===//

TEST(OpenCLMemory, StaleAndForgedLocationsNeverReachTheDriver) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Expected<DeviceLocation> loc = device->allocateDeviceMemory(256);
  ASSERT_TRUE(loc.hasValue()) << loc.takeError().toString();
  EXPECT_EQ(device->liveAllocations(), 1u);
  EXPECT_EQ(device->usedMemory(), 256u);
  ASSERT_TRUE(device->releaseDeviceMemory(*loc).isSuccess());
  // A double release would abort the process inside POCL; here it is an
  // error value.
  Error again = device->releaseDeviceMemory(*loc);
  EXPECT_EQ(again.code(), ErrorCode::InvalidArgument) << again.toString();
  EXPECT_EQ(device->releaseDeviceMemory(DeviceLocation{0xdead00000007}).code(),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(device->releaseDeviceMemory(DeviceLocation{}).code(),
            ErrorCode::InvalidArgument);
  // A fresh allocation reusing the slot does not revive the stale handle.
  Expected<DeviceLocation> reused = device->allocateDeviceMemory(64);
  ASSERT_TRUE(reused.hasValue());
  EXPECT_NE(*reused, *loc);
  EXPECT_EQ(device->releaseDeviceMemory(*loc).code(),
            ErrorCode::InvalidArgument);
  Tensor t(ElemKind::Float32, {16}, "t");
  Error stale = transferToDeviceSync(*device, t, *loc);
  EXPECT_EQ(stale.code(), ErrorCode::InvalidArgument) << stale.toString();
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  ASSERT_TRUE(device->releaseDeviceMemory(*reused).isSuccess());
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->physicalMemoryInUse(), 0u);
  EXPECT_TRUE(device->takeBackgroundErrors().empty());
}

TEST(OpenCLMemory, AllocationPastMaxAllocSizeNamesTheOpenCLError) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  uint64_t tooBig = device->deviceInfo().maxAllocationBytes + 1;
  if (tooBig > device->maximumMemory())
    GTEST_SKIP() << "max allocation size " << tooBig - 1
                 << " is not below the budget " << device->maximumMemory();
  Expected<DeviceLocation> loc = device->allocateDeviceMemory(tooBig);
  if (loc.hasValue()) {
    // Some drivers (NVIDIA's) accept buffers past their reported maximum.
    ASSERT_TRUE(device->releaseDeviceMemory(*loc).isSuccess());
    EXPECT_EQ(device->usedMemory(), 0u);
    GTEST_SKIP() << device->description() << " accepted " << tooBig
                 << " bytes, past its maximum allocation size";
  }
  Error e = loc.takeError();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.toString();
  EXPECT_TRUE(contains(e.message(), "CL_INVALID_BUFFER_SIZE")) << e.message();
  EXPECT_TRUE(contains(e.message(), "clCreateBuffer")) << e.message();
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->liveAllocations(), 0u);
  // The device is still usable.
  Tensor t(ElemKind::Int32, {4}, "t");
  fill<int32_t>(t, {1, 2, 3, 4});
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
  EXPECT_EQ(contents<int32_t>(t), (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(OpenCLMemory, DefaultBudgetIsGlobalMemoryAndALargerBudgetIsRejected) {
  auto whole = openDevice(configNamed("cl"));
  ASSERT_TRUE(whole);
  uint64_t global = whole->deviceInfo().globalMemoryBytes;
  EXPECT_EQ(whole->maximumMemory(), global);
  // maximumMemory() is the budget asked for (docs/semantics.md §5), so one
  // the device cannot give is an error naming what it can.
  OpenCLDeviceManager larger(configNamed("cl", {}, global + 1));
  Error e = larger.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.message(), "(allowed: 0 for all of it, or 1 to " +
                                        std::to_string(global) + ")"))
      << e.message();
  auto exact = openDevice(configNamed("cl", {}, global));
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->maximumMemory(), global);
  auto smaller = openDevice(configNamed("cl", {}, 4096));
  ASSERT_TRUE(smaller);
  EXPECT_EQ(smaller->maximumMemory(), 4096u);
  EXPECT_EQ(smaller->availableMemory(), 4096u);
}

TEST(OpenCLMemory, BudgetIsEnforcedWithTheSizesInTheMessage) {
  auto device = openDevice(configNamed("small", {}, 1024));
  ASSERT_TRUE(device);
  Expected<DeviceLocation> first = device->allocateDeviceMemory(1000);
  ASSERT_TRUE(first.hasValue());
  Expected<DeviceLocation> second = device->allocateDeviceMemory(100);
  ASSERT_FALSE(second.hasValue());
  Error e = second.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(e.message(), "100 bytes requested")) << e.message();
  EXPECT_TRUE(contains(e.message(), "1000 of 1024")) << e.message();
  EXPECT_TRUE(contains(e.message(), "'small'")) << e.message();
  // Exactly filling the budget is allowed.
  Expected<DeviceLocation> rest = device->allocateDeviceMemory(24);
  ASSERT_TRUE(rest.hasValue());
  EXPECT_EQ(device->availableMemory(), 0u);
  ASSERT_TRUE(device->releaseDeviceMemory(*first).isSuccess());
  ASSERT_TRUE(device->releaseDeviceMemory(*rest).isSuccess());

  Tensor big(ElemKind::Float32, {512}, "big"); // 2048 bytes
  Error oom = transferToDeviceSync(*device, big);
  EXPECT_EQ(oom.code(), ErrorCode::OutOfMemory) << oom.toString();
  EXPECT_EQ(big.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(device->usedMemory(), 0u);
}

//===----------------------------------------------------------------------===//
// Transfers, with and without pinned staging.
//===----------------------------------------------------------------------===//

class OpenCLStaging : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    // Staged: every transfer, the smallest included.
    device_ = openDevice(
        configNamed("cl", {{"pinned-staging", GetParam() ? "1" : "0"},
                           {"staging-min-bytes", "0"}}));
    ASSERT_TRUE(device_);
    ASSERT_EQ(device_->usesPinnedStaging(), GetParam());
  }
  std::unique_ptr<OpenCLDeviceManager> device_;
};

TEST_P(OpenCLStaging, RoundTripsPreserveContents) {
  ScopedThrowingViolationHandler violations;
  std::mt19937 random(7);
  for (size_t n : {size_t(1), size_t(3), size_t(1000), size_t(1) << 18}) {
    Tensor t(ElemKind::Int32, {n}, "t");
    std::vector<int32_t> values(n);
    for (int32_t &v : values)
      v = static_cast<int32_t>(random());
    fill(t, values);
    ASSERT_TRUE(transferToDeviceSync(*device_, t).isSuccess());
    EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device);
    EXPECT_EQ(device_->usedMemory(), n * 4);
    EXPECT_THROW(t.hostBytes(), ContractViolationError);
    ASSERT_TRUE(
        transferFromDeviceSync(*device_, t, /*release=*/false).isSuccess());
    EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored);
    EXPECT_EQ(contents<int32_t>(t), values);
    // Writing the host copy drops the device copy.
    t.mutableHostData<int32_t>()[0] = 42;
    values[0] = 42;
    EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
    EXPECT_EQ(device_->usedMemory(), 0u);
    ASSERT_TRUE(transferToDeviceSync(*device_, t).isSuccess());
    ASSERT_TRUE(transferFromDeviceSync(*device_, t).isSuccess());
    EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
    EXPECT_EQ(contents<int32_t>(t), values);
  }
  EXPECT_EQ(device_->liveAllocations(), 0u);
  EXPECT_EQ(device_->physicalMemoryInUse(), 0u);
  EXPECT_TRUE(device_->takeBackgroundErrors().empty());
}

TEST_P(OpenCLStaging, ConcurrentTransfersFromSeveralThreads) {
  constexpr int Threads = 4, Rounds = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < Threads; ++w)
    workers.emplace_back([&, w] {
      for (int r = 0; r < Rounds; ++r) {
        Tensor t(ElemKind::Int32, {64}, "t");
        std::vector<int32_t> values(64, w * 1000 + r);
        fill(t, values);
        if (transferToDeviceSync(*device_, t) ||
            transferFromDeviceSync(*device_, t) ||
            contents<int32_t>(t) != values)
          ++failures;
      }
    });
  for (std::thread &t : workers)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(device_->liveAllocations(), 0u);
  EXPECT_EQ(device_->stats().transfersToDevice, uint64_t(Threads * Rounds));
}

INSTANTIATE_TEST_SUITE_P(PinnedStaging, OpenCLStaging, ::testing::Bool(),
                         [](const auto &info) {
                           return info.param ? "Pinned" : "Pageable";
                         });

TEST(OpenCLCompletion, CallbacksArriveOnTheCompletionThreadExactlyOnce) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Tensor t(ElemKind::Float32, {1024}, "t");
  std::promise<std::thread::id> where;
  std::atomic<int> calls{0};
  device->transferToDevice(t, std::nullopt, [&](Error e) {
    EXPECT_TRUE(e.isSuccess()) << e.toString();
    if (++calls == 1)
      where.set_value(std::this_thread::get_id());
  });
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  t.residency().waitUntilIdle();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device);
}

TEST(OpenCLCompletion, DriverDelayHoldsEachCommandBackAndKeepsContents) {
  // Held back 50-100 ms per command; the transfers stay correct, and a
  // shutdown with held-back work in flight completes each once.
  auto device = openDevice(configNamed("cl", {{"driver-delay-us", "100000"},
                                              {"pinned-staging", "1"},
                                              {"staging-min-bytes", "0"}}));
  ASSERT_TRUE(device);
  Tensor t(ElemKind::Int32, {1000}, "t");
  std::vector<int32_t> values(1000);
  std::iota(values.begin(), values.end(), -500);
  fill(t, values);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(50));
  ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
  EXPECT_EQ(contents<int32_t>(t), values);
  std::vector<Tensor> tensors;
  for (int i = 0; i < 8; ++i)
    tensors.emplace_back(ElemKind::Float32, std::vector<size_t>{4096},
                         "t" + std::to_string(i));
  ShutdownTally tally;
  for (Tensor &held : tensors)
    device->transferToDevice(held, std::nullopt, tally.callback());
  device->shutdown();
  for (Tensor &held : tensors)
    held.residency().waitUntilIdle();
  EXPECT_EQ(tally.calls.load(), 8);
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->operationsInFlight(), 0u);
}

TEST(OpenCLCompletion, ShutdownWithWorkInFlightCompletesEachOnce) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  constexpr int Count = 16;
  std::vector<Tensor> tensors;
  for (int i = 0; i < Count; ++i)
    tensors.emplace_back(ElemKind::Float32, std::vector<size_t>{1 << 16},
                         "t" + std::to_string(i));
  ShutdownTally tally;
  for (Tensor &t : tensors)
    device->transferToDevice(t, std::nullopt, tally.callback());
  device->shutdown();
  for (Tensor &t : tensors)
    t.residency().waitUntilIdle();
  EXPECT_EQ(tally.calls.load(), Count);
  EXPECT_EQ(tally.succeeded.load() + tally.lost.load(), Count);
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->operationsInFlight(), 0u);
  for (Tensor &t : tensors) {
    ResidencyState s = t.residencySnapshot().state;
    EXPECT_TRUE(s == ResidencyState::Lost || s == ResidencyState::Host)
        << residencyStateName(s);
  }
}

TEST(OpenCLFaults, InjectedFaultsFailTheirOperation) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  ASSERT_TRUE(device
                  ->injectFault(
                      {FaultSite::TransferToDevice, 1, ErrorCode::DeviceError})
                  .isSuccess());
  Tensor t(ElemKind::Float32, {8}, "t");
  Error e = transferToDeviceSync(*device, t);
  EXPECT_EQ(e.code(), ErrorCode::DeviceError) << e.toString();
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(device->liveAllocations(), 0u);
  ASSERT_TRUE(
      device->injectFault({FaultSite::Allocation, 1, ErrorCode::OutOfMemory})
          .isSuccess());
  EXPECT_EQ(transferToDeviceSync(*device, t).code(), ErrorCode::OutOfMemory);
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  ASSERT_TRUE(device
                  ->injectFault(
                      {FaultSite::TransferFromDevice, 1, ErrorCode::DeviceLost})
                  .isSuccess());
  Error lost = transferFromDeviceSync(*device, t);
  EXPECT_EQ(lost.code(), ErrorCode::DeviceLost) << lost.toString();
  EXPECT_TRUE(device->isShutDown());
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Lost);
  EXPECT_EQ(device->liveAllocations(), 0u);
}

//===----------------------------------------------------------------------===//
// Runs: results bit-equal to the fake device's.
//===----------------------------------------------------------------------===//

/// Input data by placeholder name.
using Inputs = std::map<std::string, std::vector<std::byte>>;

template <typename T> std::vector<std::byte> asBytes(std::vector<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// Runs \p fn on \p device with host inputs, leaves the outputs resident,
/// checks that, and returns the output bytes by name.
std::map<std::string, std::vector<std::byte>>
runAndFetch(DeviceManager &device, const Function &fn, const Inputs &inputs) {
  std::map<std::string, std::vector<std::byte>> out;
  Error added = addNetworkSync(device, fn);
  EXPECT_TRUE(added.isSuccess()) << added.toString();
  ExecutionContext context;
  for (const Placeholder &p : fn.placeholders()) {
    Tensor &t = context.bindings().allocate(p.name, p.type);
    auto it = inputs.find(p.name);
    if (it != inputs.end())
      fill(t, it->second);
  }
  Error ran = runFunctionSync(device, fn.name(), context);
  EXPECT_TRUE(ran.isSuccess()) << device.name() << ": " << ran.toString();
  EXPECT_EQ(device.stats().deviceCopies, 0u);
  for (const std::string &name : fn.outputNames()) {
    Tensor &t = *context.bindings().get(name);
    EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device)
        << device.name() << ": output " << name;
    Error back = transferFromDeviceSync(device, t);
    EXPECT_TRUE(back.isSuccess()) << back.toString();
    out[name] = bytesOf(t);
  }
  return out;
}

/// Equal bit patterns, except that any NaN matches any NaN (IEEE leaves NaN
/// payloads to the hardware: GPUs return a canonical NaN).
void expectSameFloats(const std::vector<std::byte> &expected,
                      const std::vector<std::byte> &actual,
                      const std::string &what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size() / 4; ++i) {
    uint32_t e, a;
    std::memcpy(&e, expected.data() + 4 * i, 4);
    std::memcpy(&a, actual.data() + 4 * i, 4);
    if (std::isnan(std::bit_cast<float>(e)) &&
        std::isnan(std::bit_cast<float>(a)))
      continue;
    EXPECT_EQ(e, a) << what << "[" << i << "]: expected "
                    << std::bit_cast<float>(e) << ", got "
                    << std::bit_cast<float>(a);
  }
}

std::vector<float> specialFloats(size_t n, unsigned seed) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          inf,
                          -inf,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          0.1f,
                          1.0f / 3.0f,
                          16777217.0f};
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> wide(-1e6f, 1e6f);
  while (v.size() < n)
    v.push_back(random() % 4 ? wide(random)
                             : std::bit_cast<float>(uint32_t(random())));
  v.resize(n);
  std::shuffle(v.begin(), v.end(), random);
  return v;
}

std::vector<int32_t> specialInts(size_t n, unsigned seed) {
  std::vector<int32_t> v = {0,
                            1,
                            -1,
                            2,
                            std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max() - 1,
                            std::numeric_limits<int32_t>::min() + 1,
                            65536,
                            -65536,
                            46341};
  std::mt19937 random(seed);
  while (v.size() < n)
    v.push_back(static_cast<int32_t>(random()));
  v.resize(n);
  std::shuffle(v.begin(), v.end(), random);
  return v;
}

/// Every op over \p type, chained so that later nodes read earlier outputs.
Function everyOp(std::string name, Type type, double factor) {
  Function fn(std::move(name));
  for (const char *p :
       {"a", "b", "sum", "prod", "relu", "scaled", "copied", "mixed"})
    fn.addPlaceholder(p, type);
  fn.addNode(Node{OpKind::Add, {"a", "b"}, "sum"});
  fn.addNode(Node{OpKind::Mul, {"a", "b"}, "prod"});
  fn.addNode(Node{OpKind::Relu, {"a"}, "relu"});
  fn.addNode(Node{OpKind::Scale, {"b"}, "scaled", factor});
  fn.addNode(Node{OpKind::Copy, {"a"}, "copied"});
  fn.addNode(Node{OpKind::Mul, {"sum", "scaled"}, "mixed"});
  return fn;
}

class OpenCLVersusFake : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    // Staged: every transfer, the smallest included.
    opencl_ = openDevice(
        configNamed("cl", {{"pinned-staging", GetParam() ? "1" : "0"},
                           {"staging-min-bytes", "0"}}));
    ASSERT_TRUE(opencl_);
    auto fake = BackendRegistry::instance().create("fake", configNamed("fake"));
    ASSERT_TRUE(fake.hasValue()) << fake.takeError().toString();
    fake_ = std::move(*fake);
  }
  std::unique_ptr<OpenCLDeviceManager> opencl_;
  std::unique_ptr<DeviceManager> fake_;
};

TEST_P(OpenCLVersusFake, Float32ResultsAreBitEqual) {
  constexpr size_t N = 4099;
  for (double factor : {0.1, -2.5, 3.0e38, 1.0e-40}) {
    Function fn = everyOp("f32_" + std::to_string(factor), f32(N), factor);
    Inputs inputs{{"a", asBytes(specialFloats(N, 1))},
                  {"b", asBytes(specialFloats(N, 2))}};
    auto expected = runAndFetch(*fake_, fn, inputs);
    auto actual = runAndFetch(*opencl_, fn, inputs);
    for (const auto &[name, bytes] : expected)
      expectSameFloats(bytes, actual[name], name);
  }
}

TEST_P(OpenCLVersusFake, MinusZeroAndNaNFollowTheModel) {
  Function fn = everyOp("f32_zero", f32(4), -1.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Inputs inputs{{"a", asBytes(std::vector<float>{-0.0f, nan, -3.0f, 0.0f})},
                {"b", asBytes(std::vector<float>{-0.0f, 1.0f, 0.0f, -0.0f})}};
  auto actual = runAndFetch(*opencl_, fn, inputs);
  auto floats = [&](const std::string &name) {
    std::vector<float> v(4);
    std::memcpy(v.data(), actual[name].data(), 16);
    return v;
  };
  // -0 + -0 = -0; relu(-0) = +0 (not greater than 0); relu(NaN) = +0.
  EXPECT_TRUE(std::signbit(floats("sum")[0]));
  EXPECT_EQ(std::bit_cast<uint32_t>(floats("relu")[0]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(floats("relu")[1]), 0u);
  EXPECT_TRUE(std::isnan(floats("sum")[1]));
  EXPECT_TRUE(std::isnan(floats("copied")[1]));
  // -0 scaled by -1 is +0; +0 * -0 is -0.
  EXPECT_EQ(std::bit_cast<uint32_t>(floats("scaled")[0]), 0u);
  EXPECT_TRUE(std::signbit(floats("prod")[3]));
  auto expected = runAndFetch(*fake_, fn, inputs);
  for (const auto &[name, bytes] : expected)
    expectSameFloats(bytes, actual[name], name);
}

TEST_P(OpenCLVersusFake, Int32ResultsAreBitEqualIncludingWrap) {
  constexpr size_t N = 2053;
  for (double factor : {-3.0, 2147483647.0, 65536.0}) {
    Function fn = everyOp("i32_" + std::to_string(factor), i32(N), factor);
    Inputs inputs{{"a", asBytes(specialInts(N, 3))},
                  {"b", asBytes(specialInts(N, 4))}};
    auto expected = runAndFetch(*fake_, fn, inputs);
    auto actual = runAndFetch(*opencl_, fn, inputs);
    for (const auto &[name, bytes] : expected)
      EXPECT_EQ(bytes, actual[name]) << name << " with factor " << factor;
  }
  // INT32_MAX + 1 wraps to INT32_MIN; INT32_MIN * -1 wraps to itself.
  Function wrap("wrap");
  wrap.addPlaceholder("a", i32(2)).addPlaceholder("b", i32(2));
  wrap.addPlaceholder("sum", i32(2)).addPlaceholder("prod", i32(2));
  wrap.addNode(Node{OpKind::Add, {"a", "b"}, "sum"});
  wrap.addNode(Node{OpKind::Mul, {"a", "b"}, "prod"});
  Inputs inputs{
      {"a", asBytes(std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                         std::numeric_limits<int32_t>::min()})},
      {"b", asBytes(std::vector<int32_t>{1, -1})}};
  auto actual = runAndFetch(*opencl_, wrap, inputs);
  EXPECT_EQ(actual["sum"],
            asBytes(std::vector<int32_t>{std::numeric_limits<int32_t>::min(),
                                         std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(actual["prod"],
            asBytes(std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                         std::numeric_limits<int32_t>::min()}));
}

TEST_P(OpenCLVersusFake, ResidentViewInputsAreUsedInPlace) {
  Function fn("view_add");
  fn.addPlaceholder("x", f32(8)).addPlaceholder("y", f32(8));
  fn.addPlaceholder("out", f32(8));
  fn.addNode(Node{OpKind::Add, {"x", "y"}, "out"});
  std::vector<float> values = specialFloats(32, 5);
  for (DeviceManager *device :
       {static_cast<DeviceManager *>(opencl_.get()), fake_.get()}) {
    ASSERT_TRUE(addNetworkSync(*device, fn).isSuccess());
    Tensor storage(ElemKind::Float32, {32}, "storage");
    fill(storage, values);
    ASSERT_TRUE(transferToDeviceSync(*device, storage).isSuccess());
    uint64_t transfersBefore = device->stats().transfersToDevice;
    Tensor x = storage.getUnowned({8}, 4);
    Tensor y = storage.getUnowned({8}, 20);
    Tensor out(ElemKind::Float32, {8}, "out");
    ExecutionContext context;
    context.bindings().bind("x", x);
    context.bindings().bind("y", y);
    context.bindings().bind("out", out);
    Error e = runFunctionSync(*device, "view_add", context);
    ASSERT_TRUE(e.isSuccess()) << device->name() << ": " << e.toString();
    EXPECT_EQ(device->stats().transfersToDevice, transfersBefore)
        << device->name() << ": resident view inputs were copied";
    ASSERT_TRUE(transferFromDeviceSync(*device, out).isSuccess());
    std::vector<float> sum = contents<float>(out);
    for (size_t i = 0; i < 8; ++i) {
      float expected = values[4 + i] + values[20 + i];
      if (std::isnan(expected))
        EXPECT_TRUE(std::isnan(sum[i]));
      else
        EXPECT_EQ(std::bit_cast<uint32_t>(sum[i]),
                  std::bit_cast<uint32_t>(expected))
            << device->name() << " [" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PinnedStaging, OpenCLVersusFake, ::testing::Bool(),
                         [](const auto &info) {
                           return info.param ? "Pinned" : "Pageable";
                         });

TEST(OpenCLRuns, CopyDeviceTensorsToHostAndEnsureOutputsAvailable) {
  DeviceConfig copying = configNamed("copying");
  copying.copyDeviceTensorsToHost = true;
  auto device = openDevice(copying);
  ASSERT_TRUE(device);
  ASSERT_TRUE(addNetworkSync(*device, scaleNetwork("s", 2.0)).isSuccess());
  ExecutionContext context;
  fill<float>(context.bindings().allocate("x", f32(4)), {1, 2, 3, 4});
  Tensor &y = context.bindings().allocate("y", f32(4));
  ASSERT_TRUE(runFunctionSync(*device, "s", context).isSuccess());
  EXPECT_EQ(y.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(contents<float>(y), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(device->liveAllocations(), 0u);

  auto engine = ExecutionEngine::create("opencl", configNamed("engine"));
  ASSERT_TRUE(engine.hasValue()) << engine.takeError().toString();
  ExecutionEngine &e = **engine;
  ASSERT_TRUE(e.compile(scaleNetwork("s", 0.5)).isSuccess());
  e.setKeepOutputsOnDevice(true);
  ExecutionContext kept;
  fill<float>(kept.bindings().allocate("x", f32(4)), {2, 4, 6, 8});
  Tensor &out = kept.bindings().allocate("y", f32(4));
  ASSERT_TRUE(e.run(kept, "s").isSuccess());
  EXPECT_EQ(out.residencySnapshot().state, ResidencyState::Device);
  ASSERT_TRUE(e.hostManager().ensureOutputsAvailable(kept).isSuccess());
  EXPECT_EQ(out.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(contents<float>(out), (std::vector<float>{1, 2, 3, 4}));
}

} // namespace
