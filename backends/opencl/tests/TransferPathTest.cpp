//===- TransferPathTest.cpp - Counters, pool, staging, pinned, completions ===//
//
// The OpenCL backend's fast paths, each checked for keeping the contract:
// counters taken where the driver is called, the pool of freed device
// blocks (reuse without a driver call, exact logical accounting, the
// budget, stale locations), staging in chunks, pinned tensors, and
// completions delivered on the waiting caller's thread. No death tests:
// fork() after POCL has started hangs the child.
//
//===----------------------------------------------------------------------===//
#include "OpenCLTestSupport.h"

#include "DeviceBlockPool.h"
#include "OpenCLSupport.h"
#include "ParallelCopy.h"
#include "PinnedHostMemory.h"

#include "drt/SyncTransfer.h"
#include "drt/Violation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

using namespace drt;
using namespace drt::opencl;
using namespace drt::opencl::testing;

namespace {

Type f32(size_t n) { return Type{ElemKind::Float32, {n}}; }

uint64_t callsOf(const OpenCLDeviceManager &device, OpenCLCall call) {
  return device.driverCalls()[size_t(call)];
}

std::vector<int32_t> iota(size_t n, int32_t first) {
  std::vector<int32_t> values(n);
  std::iota(values.begin(), values.end(), first);
  return values;
}

//===----------------------------------------------------------------------===//
// Counters.
//===----------------------------------------------------------------------===//

/// Three outputs, one of them read by a later node.
Function threeOutputs(size_t n) {
  Function fn("three");
  for (const char *p : {"x", "a", "b", "c"})
    fn.addPlaceholder(p, f32(n));
  fn.addNode(Node{OpKind::Scale, {"x"}, "a", 2.0});
  fn.addNode(Node{OpKind::Relu, {"a"}, "b"});
  fn.addNode(Node{OpKind::Add, {"a", "b"}, "c"});
  return fn;
}

TEST(OpenCLCounters, RunsMakeNoDeviceCopyPerOutput) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  ASSERT_TRUE(addNetworkSync(*device, threeOutputs(256)).isSuccess());
  ExecutionContext context;
  context.bindings().allocate("x", f32(256));
  for (const char *out : {"a", "b", "c"})
    context.bindings().allocate(out, f32(256));
  uint64_t copiesBefore = callsOf(*device, OpenCLCall::EnqueueCopyBuffer);
  uint64_t kernelsBefore = callsOf(*device, OpenCLCall::EnqueueNDRangeKernel);
  constexpr int Runs = 5;
  for (int r = 0; r < Runs; ++r)
    ASSERT_TRUE(runFunctionSync(*device, "three", context).isSuccess());
  // The outputs are written where they stay resident: whatever copy a run
  // made would be a clEnqueueCopyBuffer counted at the seam.
  EXPECT_EQ(callsOf(*device, OpenCLCall::EnqueueCopyBuffer), copiesBefore);
  EXPECT_EQ(device->stats().deviceCopies, 0u);
  EXPECT_EQ(callsOf(*device, OpenCLCall::EnqueueNDRangeKernel) - kernelsBefore,
            uint64_t(3 * Runs));
  EXPECT_EQ(device->stats().runs, uint64_t(Runs));
  for (const char *out : {"a", "b", "c"})
    EXPECT_EQ(context.bindings().get(out)->residencySnapshot().state,
              ResidencyState::Device);
}

TEST(OpenCLKernels, APartialWorkGroupComputesAndARefusedSizeIsLaunchedWithout) {
  // 100 elements: a whole work-group of 64 and part of a second one.
  constexpr size_t N = 100;
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Function fn("double");
  fn.addPlaceholder("x", f32(N)).addPlaceholder("y", f32(N));
  fn.addNode(Node{OpKind::Scale, {"x"}, "y", 2.0});
  ASSERT_TRUE(addNetworkSync(*device, std::move(fn)).isSuccess());
  ExecutionContext context;
  Tensor &x = context.bindings().allocate("x", f32(N));
  Tensor &y = context.bindings().allocate("y", f32(N));
  std::vector<float> values(N);
  std::iota(values.begin(), values.end(), 1.0f);
  std::memcpy(x.mutableHostBytes().data(), values.data(), N * sizeof(float));
  // Runs once and returns the kernel launches it took, checking every
  // element of the result.
  auto run = [&] {
    uint64_t before = callsOf(*device, OpenCLCall::EnqueueNDRangeKernel);
    Error e = runFunctionSync(*device, "double", context);
    EXPECT_TRUE(e.isSuccess()) << e.toString();
    EXPECT_TRUE(transferFromDeviceSync(*device, y).isSuccess());
    std::vector<float> out(N);
    std::memcpy(out.data(), y.hostBytes().data(), N * sizeof(float));
    for (size_t i = 0; i < N; ++i)
      EXPECT_EQ(out[i], 2.0f * values[i]) << "element " << i;
    return callsOf(*device, OpenCLCall::EnqueueNDRangeKernel) - before;
  };
  EXPECT_EQ(run(), 1u);
  // A device whose work-groups cannot hold 64 items: the launch is made
  // again without a work-group size, and every later one is made so.
  ASSERT_FALSE(device->injectDriverFault(
      {OpenCLCall::EnqueueNDRangeKernel, 1, CL_INVALID_WORK_GROUP_SIZE}));
  EXPECT_EQ(run(), 2u);
  EXPECT_EQ(run(), 1u);
}

TEST(OpenCLCounters, TransfersAndAllocationsAreCountedWithTheirBytes) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Tensor t(ElemKind::Int32, {1000}, "t");
  uint64_t writes = callsOf(*device, OpenCLCall::EnqueueWriteBuffer);
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.allocations, 1u);
  EXPECT_EQ(stats.frees, 1u);
  EXPECT_EQ(stats.transfersToDevice, 1u);
  EXPECT_EQ(stats.bytesToDevice, 4000u);
  EXPECT_EQ(stats.transfersFromDevice, 1u);
  EXPECT_EQ(stats.bytesFromDevice, 4000u);
  EXPECT_EQ(callsOf(*device, OpenCLCall::EnqueueWriteBuffer) - writes, 1u);
  EXPECT_EQ(device->poolStats().driverAllocations, 1u);
}

//===----------------------------------------------------------------------===//
// The pool of freed device blocks.
//===----------------------------------------------------------------------===//

TEST(OpenCLPool, SizeClassesAreAtMostAQuarterLarger) {
  for (uint64_t bytes : {uint64_t(1), uint64_t(512), uint64_t(513),
                         uint64_t(1000), uint64_t(4097), uint64_t(1) << 28,
                         (uint64_t(1) << 28) + 1, uint64_t(300) << 20}) {
    uint64_t block = blockSizeClass(bytes, 512);
    EXPECT_GE(block, bytes);
    EXPECT_EQ(block % 512, 0u) << bytes;
    if (bytes > 2048) {
      EXPECT_LE(block - bytes, bytes / 4) << bytes;
    }
  }
  EXPECT_EQ(blockSizeClass(uint64_t(1) << 28, 512), uint64_t(1) << 28);
  EXPECT_EQ(blockSizeClass(1000, 512), 1024u);
  EXPECT_EQ(blockSizeClass(900, 512), 1024u);
}

// A size that take() emptied stays listed (so that giving a block of it
// back allocates nothing): it holds no block, and eviction skips it.
TEST(OpenCLPool, AnEmptiedSizeHoldsNoBlockAndEvictionPassesIt) {
  DeviceBlockPool pool;
  auto a = reinterpret_cast<cl_mem>(uintptr_t(0x1000));
  auto b = reinterpret_cast<cl_mem>(uintptr_t(0x2000));
  pool.keep({a, 4096});
  EXPECT_EQ(pool.take(4096).buffer, a);
  EXPECT_EQ(pool.take(4096).buffer, nullptr);
  EXPECT_EQ(pool.cachedBytes(), 0u);
  pool.keep({b, 1024});
  std::vector<DeviceBlock> evicted = pool.evict(1);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].buffer, b);
  EXPECT_EQ(evicted[0].bytes, 1024u);
  EXPECT_EQ(pool.cachedBytes(), 0u);
  EXPECT_TRUE(pool.evictAll().empty());
  pool.keep({a, 4096});
  EXPECT_EQ(pool.take(4096).buffer, a);
}

TEST(OpenCLPool,
     AFreedBlockIsReusedWithoutADriverCallNeverThroughItsOldLocation) {
  ScopedThrowingViolationHandler violations;
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Expected<DeviceLocation> first = device->allocateDeviceMemory(1000);
  ASSERT_TRUE(first.hasValue());
  EXPECT_EQ(device->usedMemory(), 1000u);
  EXPECT_EQ(device->physicalMemoryInUse(), 1024u);
  ASSERT_TRUE(device->releaseDeviceMemory(*first).isSuccess());
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->physicalMemoryInUse(), 0u);
  EXPECT_EQ(device->poolStats().cachedBytes, 1024u);

  uint64_t creates = callsOf(*device, OpenCLCall::CreateBuffer);
  Tensor t(ElemKind::Int32, {225}, "t"); // 900 bytes: the same class
  fill(t, iota(225, 7));
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  EXPECT_EQ(callsOf(*device, OpenCLCall::CreateBuffer), creates);
  OpenCLPoolStats pool = device->poolStats();
  EXPECT_EQ(pool.reuses, 1u);
  EXPECT_EQ(pool.driverAllocations, 1u);
  EXPECT_EQ(pool.cachedBytes, 0u);
  EXPECT_EQ(pool.reservedBytes, 1024u);
  EXPECT_EQ(device->usedMemory(), 900u);

  // The block is t's now: the location it had before is stale.
  DeviceLocation now = t.residencySnapshot().location;
  EXPECT_NE(now, *first);
  EXPECT_EQ(device->releaseDeviceMemory(*first).code(),
            ErrorCode::InvalidArgument);
  Tensor other(ElemKind::Int32, {250}, "other");
  EXPECT_EQ(transferToDeviceSync(*device, other, *first).code(),
            ErrorCode::InvalidArgument);
  ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
  EXPECT_EQ(contents<int32_t>(t), iota(225, 7));
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_TRUE(device->takeBackgroundErrors().empty());
}

TEST(OpenCLPool, AReusedBlockShowsOnlyItsNewContents) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  for (int round = 0; round < 4; ++round) {
    Tensor t(ElemKind::Int32, {4096}, "t");
    fill(t, iota(4096, round * 10000));
    ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
    ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
    EXPECT_EQ(contents<int32_t>(t), iota(4096, round * 10000));
  }
  EXPECT_EQ(device->poolStats().driverAllocations, 1u);
  EXPECT_EQ(device->poolStats().reuses, 3u);
}

TEST(OpenCLPool, CachedBlocksGiveWayBeforeTheBudgetIsPassed) {
  auto device = openDevice(configNamed("small", {}, 4096));
  ASSERT_TRUE(device);
  Expected<DeviceLocation> a = device->allocateDeviceMemory(3000);
  ASSERT_TRUE(a.hasValue());
  ASSERT_TRUE(device->releaseDeviceMemory(*a).isSuccess());
  EXPECT_EQ(device->poolStats().cachedBytes, 3072u);
  // 2048 more would hold 5120 bytes: the cached block goes first.
  Expected<DeviceLocation> b = device->allocateDeviceMemory(2000);
  ASSERT_TRUE(b.hasValue());
  OpenCLPoolStats pool = device->poolStats();
  EXPECT_EQ(pool.cachedBytes, 0u);
  EXPECT_EQ(pool.reservedBytes, 2048u);
  EXPECT_EQ(pool.driverReleases, 1u);
  // Logical accounting stays exact: the budget's last bytes are usable,
  // in a block of the exact size when its class would pass the budget.
  Expected<DeviceLocation> rest = device->allocateDeviceMemory(2096);
  ASSERT_TRUE(rest.hasValue());
  EXPECT_EQ(device->usedMemory(), 4096u);
  EXPECT_LE(device->poolStats().reservedBytes, 4096u + 48u);
  Expected<DeviceLocation> over = device->allocateDeviceMemory(1);
  ASSERT_FALSE(over.hasValue());
  EXPECT_EQ(over.takeError().code(), ErrorCode::OutOfMemory);
  ASSERT_TRUE(device->releaseDeviceMemory(*b).isSuccess());
  ASSERT_TRUE(device->releaseDeviceMemory(*rest).isSuccess());
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->physicalMemoryInUse(), 0u);
}

TEST(OpenCLPool, TheLimitBoundsTheCacheAndZeroTurnsItOff) {
  auto limited =
      openDevice(configNamed("limited", {{"memory-pool-bytes", "2048"}}));
  ASSERT_TRUE(limited);
  std::vector<DeviceLocation> locations;
  for (int i = 0; i < 4; ++i) {
    Expected<DeviceLocation> loc = limited->allocateDeviceMemory(1024);
    ASSERT_TRUE(loc.hasValue());
    locations.push_back(*loc);
  }
  for (DeviceLocation loc : locations)
    ASSERT_TRUE(limited->releaseDeviceMemory(loc).isSuccess());
  EXPECT_EQ(limited->poolStats().cachedBytes, 2048u);
  EXPECT_EQ(limited->poolStats().driverReleases, 2u);

  auto off = openDevice(configNamed("off", {{"memory-pool-bytes", "0"}}));
  ASSERT_TRUE(off);
  for (int i = 0; i < 3; ++i) {
    Expected<DeviceLocation> loc = off->allocateDeviceMemory(1000);
    ASSERT_TRUE(loc.hasValue());
    EXPECT_EQ(off->physicalMemoryInUse(), 1000u);
    ASSERT_TRUE(off->releaseDeviceMemory(*loc).isSuccess());
  }
  OpenCLPoolStats pool = off->poolStats();
  EXPECT_EQ(pool.driverAllocations, 3u);
  EXPECT_EQ(pool.driverReleases, 3u);
  EXPECT_EQ(pool.reuses, 0u);
  EXPECT_EQ(pool.reservedBytes, 0u);
}

TEST(OpenCLPool, ShutdownGivesEveryBlockBack) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Tensor kept(ElemKind::Float32, {300}, "kept");
  Tensor freed(ElemKind::Float32, {5000}, "freed");
  ASSERT_TRUE(transferToDeviceSync(*device, kept).isSuccess());
  ASSERT_TRUE(transferToDeviceSync(*device, freed).isSuccess());
  ASSERT_TRUE(device->releaseDeviceTensor(freed).isSuccess());
  EXPECT_GT(device->poolStats().cachedBytes, 0u);
  uint64_t releases = callsOf(*device, OpenCLCall::ReleaseMemObject);
  device->shutdown();
  OpenCLPoolStats pool = device->poolStats();
  EXPECT_EQ(pool.reservedBytes, 0u);
  EXPECT_EQ(pool.driverReleases, pool.driverAllocations);
  EXPECT_GE(callsOf(*device, OpenCLCall::ReleaseMemObject) - releases, 2u);
  EXPECT_EQ(kept.residencySnapshot().state, ResidencyState::Lost);
}

TEST(OpenCLPool, ADriverOutOfMemoryGivesTheCachedBlocksBackAndRetries) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Expected<DeviceLocation> cached = device->allocateDeviceMemory(1000);
  ASSERT_TRUE(cached.hasValue());
  ASSERT_TRUE(device->releaseDeviceMemory(*cached).isSuccess());
  ASSERT_EQ(device->poolStats().cachedBytes, 1024u);

  // The driver runs out once: the cached block goes back and the call is
  // made again, successfully (5000 bytes are another size class).
  uint64_t creates = callsOf(*device, OpenCLCall::CreateBuffer);
  ASSERT_TRUE(device
                  ->injectDriverFault({OpenCLCall::CreateBuffer, 1,
                                       CL_MEM_OBJECT_ALLOCATION_FAILURE})
                  .isSuccess());
  Expected<DeviceLocation> retried = device->allocateDeviceMemory(5000);
  ASSERT_TRUE(retried.hasValue()) << retried.takeError().toString();
  EXPECT_EQ(callsOf(*device, OpenCLCall::CreateBuffer) - creates, 2u);
  OpenCLPoolStats pool = device->poolStats();
  EXPECT_EQ(pool.cachedBytes, 0u);
  EXPECT_EQ(pool.driverReleases, 1u);
  EXPECT_EQ(pool.driverAllocations, 2u);
  EXPECT_EQ(device->usedMemory(), 5000u);
  ASSERT_TRUE(device->releaseDeviceMemory(*retried).isSuccess());
  ASSERT_GT(device->poolStats().cachedBytes, 0u);

  // It runs out again on the retry: OutOfMemory, with nothing cached or
  // held after it.
  creates = callsOf(*device, OpenCLCall::CreateBuffer);
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(device
                    ->injectDriverFault({OpenCLCall::CreateBuffer, 1,
                                         CL_MEM_OBJECT_ALLOCATION_FAILURE})
                    .isSuccess());
  Expected<DeviceLocation> failed = device->allocateDeviceMemory(20000);
  ASSERT_FALSE(failed.hasValue());
  Error e = failed.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(e.message().find("clCreateBuffer"), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("allocating 20000 bytes"), std::string::npos)
      << e.message();
  EXPECT_EQ(callsOf(*device, OpenCLCall::CreateBuffer) - creates, 2u);
  EXPECT_EQ(device->poolStats().cachedBytes, 0u);
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->physicalMemoryInUse(), 0u);
  EXPECT_EQ(device->liveAllocations(), 0u);

  // With nothing cached there is nothing to give back: no second call.
  creates = callsOf(*device, OpenCLCall::CreateBuffer);
  ASSERT_TRUE(device
                  ->injectDriverFault({OpenCLCall::CreateBuffer, 1,
                                       CL_MEM_OBJECT_ALLOCATION_FAILURE})
                  .isSuccess());
  EXPECT_EQ(device->allocateDeviceMemory(3000).takeError().code(),
            ErrorCode::OutOfMemory);
  EXPECT_EQ(callsOf(*device, OpenCLCall::CreateBuffer) - creates, 1u);
  Expected<DeviceLocation> after = device->allocateDeviceMemory(3000);
  ASSERT_TRUE(after.hasValue());
  ASSERT_TRUE(device->releaseDeviceMemory(*after).isSuccess());
}

TEST(OpenCLPool, ABlockPastTheLimitIsNotRoundedUpAndTheLimitIsExact) {
  auto device =
      openDevice(configNamed("capped", {{"memory-pool-bytes", "1000"}}));
  ASSERT_TRUE(device);
  // 900 bytes round up to a class of 1024, which the pool could never
  // keep: the block has the exact size, and the pool keeps and reuses it.
  Expected<DeviceLocation> a = device->allocateDeviceMemory(900);
  ASSERT_TRUE(a.hasValue());
  EXPECT_EQ(device->physicalMemoryInUse(), 900u);
  ASSERT_TRUE(device->releaseDeviceMemory(*a).isSuccess());
  EXPECT_EQ(device->poolStats().cachedBytes, 900u);
  a = device->allocateDeviceMemory(900);
  ASSERT_TRUE(a.hasValue());
  EXPECT_EQ(device->poolStats().reuses, 1u);
  Expected<DeviceLocation> b = device->allocateDeviceMemory(500);
  ASSERT_TRUE(b.hasValue());
  EXPECT_EQ(device->physicalMemoryInUse(), 900u + 512u);
  ASSERT_TRUE(device->releaseDeviceMemory(*a).isSuccess());
  ASSERT_TRUE(device->releaseDeviceMemory(*b).isSuccess());
  OpenCLPoolStats pool = device->poolStats();
  EXPECT_LE(pool.cachedBytes, 1000u);
  EXPECT_EQ(pool.reservedBytes, pool.cachedBytes);
  // Past the default limit too: a class above 1 GiB is not rounded up.
  EXPECT_GT(blockSizeClass((uint64_t(1) << 30) + 1, 512), uint64_t(1) << 30);
}

TEST(OpenCLPool, BadPoolParametersAreRejected) {
  OpenCLDeviceManager bad(configNamed("bad", {{"memory-pool-bytes", "lots"}}));
  Error e = bad.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("memory-pool-bytes"), std::string::npos)
      << e.message();
  OpenCLDeviceManager chunk(
      configNamed("chunk", {{"staging-chunk-bytes", "5000"}}));
  e = chunk.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("staging-chunk-bytes"), std::string::npos)
      << e.message();
}

//===----------------------------------------------------------------------===//
// Staging in chunks.
//===----------------------------------------------------------------------===//

/// Moves an Int32 tensor of \p n elements to \p device and back, checking
/// that each way took \p chunks driver calls and kept the contents.
void expectRoundTripInChunks(OpenCLDeviceManager &device, size_t n,
                             uint64_t chunks) {
  Tensor t(ElemKind::Int32, {n}, "t");
  fill(t, iota(n, int32_t(n)));
  uint64_t writes = callsOf(device, OpenCLCall::EnqueueWriteBuffer);
  uint64_t reads = callsOf(device, OpenCLCall::EnqueueReadBuffer);
  ASSERT_TRUE(transferToDeviceSync(device, t).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(device, t).isSuccess());
  EXPECT_EQ(callsOf(device, OpenCLCall::EnqueueWriteBuffer) - writes, chunks)
      << n << " elements";
  EXPECT_EQ(callsOf(device, OpenCLCall::EnqueueReadBuffer) - reads, chunks)
      << n << " elements";
  EXPECT_EQ(contents<int32_t>(t), iota(n, int32_t(n))) << n << " elements";
}

TEST(OpenCLStagingChunks, TransfersOfSeveralChunksPreserveContents) {
  auto device = openDevice(configNamed("cl", {{"pinned-staging", "1"},
                                              {"staging-chunk-bytes", "4096"},
                                              {"staging-min-bytes", "0"}}));
  ASSERT_TRUE(device);
  for (size_t n : {size_t(1), size_t(1024), size_t(1025), size_t(3 * 1024 + 7),
                   size_t(100000)})
    expectRoundTripInChunks(*device, n, (n * 4 + 4095) / 4096);
  EXPECT_EQ(device->stats().deviceCopies, 0u);
  EXPECT_EQ(device->liveAllocations(), 0u);
}

// With staging on, transfers below staging-min-bytes go direct and the
// rest through the staging buffers, in one manager.
TEST(OpenCLStagingChunks, TransfersBelowTheMinimumGoDirect) {
  auto device = openDevice(configNamed("cl", {{"pinned-staging", "1"}}));
  ASSERT_TRUE(device);
  ASSERT_TRUE(device->usesPinnedStaging());
  ASSERT_EQ(device->stagingMinBytes(), uint64_t(64) << 10);
  for (size_t bytes :
       {size_t(4096), size_t(65532), size_t(65536), size_t(1) << 20}) {
    size_t n = bytes / 4;
    Tensor t(ElemKind::Int32, {n}, "t");
    fill(t, iota(n, int32_t(bytes)));
    uint64_t staged = device->stagedTransfers();
    ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
    ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
    EXPECT_EQ(device->stagedTransfers() - staged, bytes >= 65536 ? 2u : 0u)
        << bytes << " bytes";
    EXPECT_EQ(contents<int32_t>(t), iota(n, int32_t(bytes))) << bytes;
  }
}

// pinned-staging=auto (the default) stages where the device's memory is
// not the host's: never on POCL's CPU device, from 64 KiB on a discrete
// GPU.
TEST(OpenCLStagingChunks, AutoStagesWhereTheDeviceDoesNotShareHostMemory) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  bool discrete = !device->deviceInfo().hostUnifiedMemory;
  EXPECT_EQ(device->usesPinnedStaging(), discrete);
  size_t n = (1 << 20) / 4;
  Tensor t(ElemKind::Int32, {n}, "t");
  fill(t, iota(n, 11));
  ASSERT_TRUE(transferToDeviceSync(*device, t).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*device, t).isSuccess());
  EXPECT_EQ(device->stagedTransfers(), discrete ? 2u : 0u);
  EXPECT_EQ(contents<int32_t>(t), iota(n, 11));
  auto direct = openDevice(configNamed("cl", {{"pinned-staging", "0"}}));
  ASSERT_TRUE(direct);
  EXPECT_FALSE(direct->usesPinnedStaging());
}

// staging-min-chunks splits a transfer that fills fewer buffers into that
// many chunks of at least 256 KiB (the last one partial), both ways.
TEST(OpenCLStagingChunks, ATransferOfLessThanABufferIsSplitIntoChunks) {
  auto device = openDevice(configNamed(
      "cl", {{"pinned-staging", "1"}, {"staging-min-chunks", "4"}}));
  ASSERT_TRUE(device);
  // Bytes, and the chunks of each: 1 MiB in 4 of 256 KiB; 600 KiB in 3 of
  // 256 KiB, the last partial; 4 MiB in 4 of 1 MiB; 300 KiB in 2 of 256 KiB;
  // a buffer's worth and 4 bytes (2 buffers) in 4 of about 1 MiB.
  for (auto [bytes, chunks] :
       std::vector<std::pair<size_t, uint64_t>>{{size_t(1) << 20, 4},
                                                {(size_t(600) << 10) + 4, 3},
                                                {size_t(4) << 20, 4},
                                                {size_t(300) << 10, 2},
                                                {(size_t(4) << 20) + 4, 4}})
    expectRoundTripInChunks(*device, bytes / 4, chunks);
}

// staging-min-split-bytes lowers the floor of those chunks: with a page,
// transfers of a few KiB already move in chunks smaller than their buffer.
TEST(OpenCLStagingChunks, TheSplitFloorIsAParameter) {
  auto device =
      openDevice(configNamed("cl", {{"pinned-staging", "1"},
                                    {"staging-min-bytes", "0"},
                                    {"staging-min-chunks", "4"},
                                    {"staging-min-split-bytes", "4096"}}));
  ASSERT_TRUE(device);
  // 16 KiB in 4 of 4 KiB; 10 KiB in 3 of 4 KiB, the last partial; 4 KiB
  // and less in one.
  for (auto [bytes, chunks] : std::vector<std::pair<size_t, uint64_t>>{
           {size_t(16) << 10, 4}, {size_t(10) << 10, 3}, {4096, 1}, {64, 1}})
    expectRoundTripInChunks(*device, bytes / 4, chunks);
}

// staging-min-slice-bytes lowers the size from which a chunk is split
// between the copy threads; the manager reports those copies as its
// "parallel-copy" path, and the staged transfers as "staging-buffers".
TEST(OpenCLStagingChunks, SmallChunksAreSplitBetweenThreadsWithASmallSlice) {
  auto device =
      openDevice(configNamed("cl", {{"pinned-staging", "1"},
                                    {"staging-min-bytes", "0"},
                                    {"staging-copy-threads", "2"},
                                    {"staging-min-slice-bytes", "512"}}));
  ASSERT_TRUE(device);
  auto path = [&](const std::string &name) {
    for (const PathUse &p : device->pathUses())
      if (p.name == name)
        return std::optional<PathUse>(p);
    return std::optional<PathUse>();
  };
  ASSERT_TRUE(path("parallel-copy"));
  EXPECT_TRUE(path("parallel-copy")->concurrent);
  EXPECT_EQ(path("parallel-copy")->uses, 0u);
  // 300 elements (1200 bytes) up and back: two slices each way.
  expectRoundTripInChunks(*device, 300, 1);
  EXPECT_EQ(path("parallel-copy")->uses, 2u);
  EXPECT_EQ(path("staging-buffers")->uses, 2u);
  // 200 elements (800 bytes) are less than two slices: one thread copies.
  expectRoundTripInChunks(*device, 200, 1);
  EXPECT_EQ(path("parallel-copy")->uses, 2u);
  EXPECT_EQ(path("staging-buffers")->uses, 4u);
  // One thread at a time: no use met another.
  EXPECT_EQ(path("parallel-copy")->overlaps, 0u);
  // With the default slice a chunk of a 4 MiB buffer can still be split;
  // with one thread, or buffers of less than two slices, none can.
  using Parameters = std::map<std::string, std::string>;
  for (const Parameters &params :
       {Parameters{{"pinned-staging", "1"}, {"staging-copy-threads", "1"}},
        Parameters{{"pinned-staging", "1"},
                   {"staging-copy-threads", "2"},
                   {"staging-chunk-bytes", "4096"}}}) {
    auto other = openDevice(configNamed("cl", params));
    ASSERT_TRUE(other);
    for (const PathUse &p : other->pathUses())
      EXPECT_NE(p.name, "parallel-copy");
  }
}

// Chunks of 4 MiB copied by three threads (slices of at least 256 KiB; the
// last chunk partial and not a multiple of a slice), checked through a run:
// x goes up staged, the device copies it into o, o comes back staged into
// host memory that held zeros, so a slice copied to the wrong place, twice
// or not at all on either way shows in o.
TEST(OpenCLStagingChunks, ChunksCopiedBySeveralThreadsPreserveContents) {
  auto device = openDevice(
      configNamed("cl", {{"pinned-staging", "1"},
                         {"staging-chunk-bytes", std::to_string(4 << 20)},
                         {"staging-copy-threads", "3"}}));
  ASSERT_TRUE(device);
  size_t n = (9 << 20) / 4 + 1029;
  Type type{ElemKind::Int32, {n}};
  Function fn("cp");
  fn.addPlaceholder("x", type);
  fn.addPlaceholder("o", type);
  fn.addNode(Node{OpKind::Copy, {"x"}, "o"});
  ASSERT_TRUE(addNetworkSync(*device, fn).isSuccess());
  ExecutionContext context;
  Tensor &x = context.bindings().allocate("x", type);
  Tensor &o = context.bindings().allocate("o", type);
  fill(x, iota(n, 7));
  ASSERT_TRUE(transferToDeviceSync(*device, x).isSuccess());
  ASSERT_TRUE(runFunctionSync(*device, "cp", context).isSuccess());
  ASSERT_TRUE(transferFromDeviceSync(*device, o).isSuccess());
  EXPECT_EQ(contents<int32_t>(o), iota(n, 7));
}

TEST(OpenCLStagingChunks, BadCopyThreadsAreRejected) {
  OpenCLDeviceManager bad(configNamed("bad", {{"staging-copy-threads", "65"}}));
  Error e = bad.init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("staging-copy-threads"), std::string::npos)
      << e.message();
}

/// A buffer of \p bytes with a byte pattern that differs at every offset
/// and between \p seed values.
std::vector<uint8_t> patterned(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = uint8_t(i * 131 + (i >> 11) * 7 + seed);
  return v;
}

TEST(ParallelCopy, CopiesEveryByteOnceWithAnyNumberOfThreads) {
  constexpr size_t Slice = ParallelCopy::MinSliceBytes;
  for (unsigned threads : {1u, 2u, 3u, 4u, 7u}) {
    ParallelCopy copier(threads);
    EXPECT_EQ(copier.threads(), threads);
    for (size_t bytes : {size_t(0), size_t(1), 2 * Slice - 1, 2 * Slice,
                         2 * Slice + 63, 5 * Slice + 17, 16 * Slice + 3}) {
      std::vector<uint8_t> src = patterned(bytes, uint8_t(threads));
      // A guard past the end must stay as it was.
      std::vector<uint8_t> dst(bytes + 64, 0xA5);
      copier.copy(dst.data(), src.data(), bytes);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()))
          << threads << " threads, " << bytes << " bytes";
      EXPECT_TRUE(std::all_of(dst.begin() + bytes, dst.end(),
                              [](uint8_t b) { return b == 0xA5; }))
          << threads << " threads, " << bytes << " bytes";
    }
  }
  EXPECT_GE(ParallelCopy::defaultThreads(), 1u);
  EXPECT_LE(ParallelCopy::defaultThreads(), 4u);
}

TEST(ParallelCopy, CopiesOfSeveralThreadsTakeTurns) {
  ParallelCopy copier(3);
  constexpr size_t Bytes = 3 * ParallelCopy::MinSliceBytes + 5;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      std::vector<uint8_t> src = patterned(Bytes, uint8_t(c));
      std::vector<uint8_t> dst(Bytes);
      for (int round = 0; round < 8; ++round) {
        std::fill(dst.begin(), dst.end(), 0);
        copier.copy(dst.data(), src.data(), Bytes);
        if (dst != src)
          ++wrong;
      }
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(wrong.load(), 0);
}

//===----------------------------------------------------------------------===//
// Pinned tensors.
//===----------------------------------------------------------------------===//

class OpenCLPinnedTensors : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    device_ = openDevice(
        configNamed("cl", {{"pinned-staging", GetParam() ? "1" : "0"},
                           {"staging-min-bytes", "0"}}));
    ASSERT_TRUE(device_);
  }
  std::unique_ptr<OpenCLDeviceManager> device_;
};

TEST_P(OpenCLPinnedTensors, FollowTheResidencyRulesWithoutAStagingCopy) {
  ScopedThrowingViolationHandler violations;
  Expected<std::shared_ptr<HostMemory>> memory = device_->pinnedHostMemory();
  ASSERT_TRUE(memory.hasValue()) << memory.takeError().toString();
  EXPECT_TRUE((*memory)->isPinned());
  Expected<std::shared_ptr<HostMemory>> again = device_->pinnedHostMemory();
  ASSERT_TRUE(again.hasValue());
  EXPECT_EQ(again->get(), memory->get());

  Expected<Tensor> made =
      Tensor::create(Type{ElemKind::Int32, {5000}}, "p", *memory);
  ASSERT_TRUE(made.hasValue()) << made.takeError().toString();
  Tensor &p = *made;
  EXPECT_TRUE(p.isPinned());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.hostBytes().data()) % 64, 0u);
  EXPECT_EQ(contents<int32_t>(p), std::vector<int32_t>(5000, 0));
  fill(p, iota(5000, 3));
  uint64_t maps = callsOf(*device_, OpenCLCall::EnqueueMapBuffer);
  uint64_t writes = callsOf(*device_, OpenCLCall::EnqueueWriteBuffer);
  ASSERT_TRUE(transferToDeviceSync(*device_, p).isSuccess());
  EXPECT_EQ(p.residencySnapshot().state, ResidencyState::Device);
  EXPECT_THROW(p.hostBytes(), ContractViolationError);
  ASSERT_TRUE(transferFromDeviceSync(*device_, p, false).isSuccess());
  EXPECT_EQ(p.residencySnapshot().state, ResidencyState::Mirrored);
  EXPECT_EQ(contents<int32_t>(p), iota(5000, 3));
  // One write straight from the tensor's storage, no staging buffer.
  EXPECT_EQ(callsOf(*device_, OpenCLCall::EnqueueWriteBuffer) - writes, 1u);
  EXPECT_EQ(callsOf(*device_, OpenCLCall::EnqueueMapBuffer), maps);
  EXPECT_EQ(device_->stagedTransfers(), 0u);

  Tensor view = p.getUnowned({10}, 20);
  EXPECT_TRUE(view.isPinned());
  Tensor copy = p.clone();
  EXPECT_FALSE(copy.isPinned());
  EXPECT_EQ(contents<int32_t>(copy), iota(5000, 3));
  p.mutableHostData<int32_t>()[0] = -1;
  EXPECT_EQ(p.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(device_->usedMemory(), 0u);
}

TEST_P(OpenCLPinnedTensors, OnlyTheirOwnBytesCountAsPinned) {
  Expected<std::shared_ptr<HostMemory>> memory = device_->pinnedHostMemory();
  ASSERT_TRUE(memory.hasValue());
  Expected<Tensor> made =
      Tensor::create(Type{ElemKind::UInt8, {4096}}, "p", *memory);
  ASSERT_TRUE(made.hasValue());
  const std::byte *data = made->hostBytes().data();
  EXPECT_TRUE(isPinnedHostMemory(data, 4096));
  EXPECT_TRUE(isPinnedHostMemory(data + 4092, 4));
  EXPECT_FALSE(isPinnedHostMemory(data + (1 << 20), 4))
      << "an address past the end of the pinned block below it";
  std::vector<std::byte> pageable(4096);
  EXPECT_FALSE(isPinnedHostMemory(pageable.data(), pageable.size()));
}

TEST_P(OpenCLPinnedTensors, OutliveTheirDevice) {
  Expected<std::shared_ptr<HostMemory>> memory = device_->pinnedHostMemory();
  ASSERT_TRUE(memory.hasValue());
  Expected<Tensor> made = Tensor::create(f32(64), "p", *memory);
  ASSERT_TRUE(made.hasValue());
  Tensor p = std::move(*made);
  fill<float>(p, std::vector<float>(64, 1.5f));
  ASSERT_TRUE(transferToDeviceSync(*device_, p).isSuccess());
  device_.reset();
  EXPECT_EQ(p.residencySnapshot().state, ResidencyState::Lost);
  std::vector<float> values(64, 2.5f);
  ASSERT_TRUE(p.refillFromHost(std::as_bytes(std::span(values))).isSuccess());
  EXPECT_EQ(contents<float>(p), values);
}

INSTANTIATE_TEST_SUITE_P(PinnedStaging, OpenCLPinnedTensors, ::testing::Bool(),
                         [](const auto &info) {
                           return info.param ? "Staged" : "Direct";
                         });

TEST(OpenCLPinnedMemory, IsRefusedByAStoppedDevice) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  device->shutdown();
  Expected<std::shared_ptr<HostMemory>> memory = device->pinnedHostMemory();
  ASSERT_FALSE(memory.hasValue());
  EXPECT_EQ(memory.takeError().code(), ErrorCode::DeviceLost);
}

//===----------------------------------------------------------------------===//
// Completions.
//===----------------------------------------------------------------------===//

TEST(OpenCLCompletion, AWaitingCallerGetsItsCompletionOnItsOwnThread) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Tensor t(ElemKind::Float32, {16}, "t");
  std::thread::id where;
  Error e = waitForCompletion([&](CompletionCallback done) {
    device->transferToDevice(t, std::nullopt, [&, done](Error error) {
      where = std::this_thread::get_id();
      done(std::move(error));
    });
  });
  ASSERT_TRUE(e.isSuccess()) << e.toString();
  EXPECT_EQ(where, std::this_thread::get_id());
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device);
}

TEST(OpenCLCompletion, AWaitingCallerDoesNotOvertakeEarlierCompletions) {
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  Tensor big(ElemKind::Float32, {1 << 20}, "big");
  Tensor small(ElemKind::Float32, {4}, "small");
  std::mutex mutex;
  std::vector<std::string> order;
  auto note = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(std::move(what));
  };
  device->transferToDevice(big, std::nullopt, [&](Error) { note("big"); });
  Error e = waitForCompletion([&](CompletionCallback done) {
    device->transferToDevice(small, std::nullopt, [&, done](Error error) {
      note("small");
      done(std::move(error));
    });
  });
  ASSERT_TRUE(e.isSuccess()) << e.toString();
  big.residency().waitUntilIdle();
  EXPECT_EQ(order, (std::vector<std::string>{"big", "small"}));
}

TEST(OpenCLCompletion, AShutdownWaitsForTheInlineDeliveriesOfItsOwnManager) {
  // Thread t delivers b's completion itself and is held inside its
  // callback; this thread, delivering a's completion itself, shuts b down
  // from a's callback. Delivering a's completion does not exempt b's
  // shutdown from waiting for t's delivery of b's.
  auto a = openDevice(configNamed("a"));
  auto b = openDevice(configNamed("b"));
  ASSERT_TRUE(a && b);
  Tensor ta(ElemKind::Float32, {16}, "ta"), tb(ElemKind::Float32, {16}, "tb");
  std::promise<void> insideB, releaseB;
  std::shared_future<void> released = releaseB.get_future().share();
  std::atomic<bool> bDelivered{false};
  std::thread t([&] {
    Error e = waitForCompletion([&](CompletionCallback done) {
      b->transferToDevice(tb, std::nullopt, [&, done](Error error) {
        insideB.set_value();
        released.wait();
        bDelivered = true;
        done(std::move(error));
      });
    });
    EXPECT_TRUE(e.isSuccess()) << e.toString();
  });
  insideB.get_future().wait();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    releaseB.set_value();
  });
  bool deliveredBeforeShutdownReturned = false;
  Error e = waitForCompletion([&](CompletionCallback done) {
    a->transferToDevice(ta, std::nullopt, [&, done](Error error) {
      b->shutdown();
      deliveredBeforeShutdownReturned = bDelivered;
      done(std::move(error));
    });
  });
  releaser.join();
  t.join();
  ASSERT_TRUE(e.isSuccess()) << e.toString();
  EXPECT_TRUE(deliveredBeforeShutdownReturned);
  EXPECT_EQ(ta.residencySnapshot().state, ResidencyState::Device);
  EXPECT_EQ(tb.residencySnapshot().state, ResidencyState::Lost);
}

TEST(OpenCLCompletion, BlockingTransfersOfSeveralThreadsKeepTheirContents) {
  // Each thread's synchronous transfers are blocking driver calls made
  // without the device's lock, side by side with the other threads' ones.
  auto device = openDevice(configNamed("cl"));
  ASSERT_TRUE(device);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {
        Tensor t(ElemKind::Int32, {size_t(4096 + 64 * k)}, "t");
        std::vector<int32_t> values = iota(4096 + 64 * k, k * 100000 + round);
        std::memcpy(t.mutableHostBytes().data(), values.data(),
                    values.size() * sizeof(int32_t));
        if (!transferToDeviceSync(*device, t).isSuccess() ||
            !transferFromDeviceSync(*device, t).isSuccess() ||
            std::memcmp(t.hostBytes().data(), values.data(),
                        values.size() * sizeof(int32_t)) != 0)
          ++failures;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->usedMemory(), 0u);
  // The buffers retained for the calls made without the lock are released.
  EXPECT_EQ(callsOf(*device, OpenCLCall::RetainMemObject),
            callsOf(*device, OpenCLCall::ReleaseMemObject));
}

TEST(OpenCLCompletion, AShutdownWaitsForStagedTransfersOfOtherThreads) {
  // Staged transfers wait for their chunks without the device's lock; a
  // shutdown that another thread starts meanwhile waits for them before
  // the queue and the staging buffers go, and each completes exactly once.
  auto device = openDevice(configNamed("cl", {{"pinned-staging", "1"},
                                              {"staging-chunk-bytes", "4096"},
                                              {"staging-min-bytes", "0"}}));
  ASSERT_TRUE(device);
  constexpr int Threads = 3, PerThread = 8;
  std::vector<std::vector<Tensor>> tensors(Threads);
  for (auto &mine : tensors)
    for (int i = 0; i < PerThread; ++i)
      mine.emplace_back(ElemKind::Float32, std::vector<size_t>{1 << 14}, "t");
  ShutdownTally tally;
  std::atomic<bool> started{false};
  std::vector<std::thread> threads;
  for (int k = 0; k < Threads; ++k)
    threads.emplace_back([&, k] {
      for (Tensor &t : tensors[k]) {
        device->transferToDevice(t, std::nullopt, tally.callback());
        started = true;
      }
    });
  while (!started)
    std::this_thread::yield();
  device->shutdown();
  for (std::thread &thread : threads)
    thread.join();
  for (auto &mine : tensors)
    for (Tensor &t : mine)
      t.residency().waitUntilIdle();
  EXPECT_EQ(tally.calls.load(), Threads * PerThread);
  EXPECT_EQ(tally.succeeded.load() + tally.lost.load(), Threads * PerThread);
  EXPECT_EQ(device->liveAllocations(), 0u);
  EXPECT_EQ(device->usedMemory(), 0u);
  EXPECT_EQ(device->operationsInFlight(), 0u);
}

} // namespace

TEST(OpenCLCompletion, AFreeDuringAStagedUploadLeavesOtherAllocationsAlone) {
  // A caller that frees a raw location while its staged upload still writes
  // chunks into it without the device's lock: the block must not reach
  // another allocation through the pool, whose contents the upload's late
  // chunks would overwrite.
  auto device = openDevice(configNamed("cl", {{"pinned-staging", "1"},
                                              {"staging-chunk-bytes", "4096"},
                                              {"staging-min-bytes", "0"}}));
  ASSERT_TRUE(device);
  constexpr size_t Elements = 1 << 18;
  constexpr uint64_t Bytes = Elements * sizeof(int32_t);
  int freedDuringTheUpload = 0;
  for (int round = 0; round < 20; ++round) {
    Expected<DeviceLocation> raw = device->allocateDeviceMemory(Bytes);
    ASSERT_TRUE(raw) << raw.takeError().toString();
    DeviceLocation location = *raw;
    Tensor uploaded(ElemKind::Int32, {Elements}, "uploaded");
    fill(uploaded, iota(Elements, -round * 1000000));
    std::atomic<bool> uploading{false}, returned{false};
    std::thread upload([&] {
      uploading = true;
      (void)transferToDeviceSync(*device, uploaded, location);
      returned = true;
    });
    // Until the upload is in flight, or over already (then this round's
    // free comes after it and is not counted below).
    while (!uploading || (device->operationsInFlight() == 0 && !returned))
      std::this_thread::yield();
    if (device->releaseDeviceMemory(location).isSuccess() &&
        device->operationsInFlight() > 0)
      ++freedDuringTheUpload;
    Tensor other(ElemKind::Int32, {Elements}, "other");
    fill(other, iota(Elements, round * 1000000));
    Error e = transferToDeviceSync(*device, other);
    upload.join();
    uploaded.residency().waitUntilIdle();
    if (!e)
      e = transferFromDeviceSync(*device, other);
    ASSERT_TRUE(e.isSuccess()) << e.toString();
    EXPECT_EQ(contents<int32_t>(other), iota(Elements, round * 1000000))
        << "round " << round;
  }
  std::printf("frees made while the upload was in flight: %d of 20\n",
              freedDuringTheUpload);
}

TEST(OpenCLPlatformDefects, UserEventGatesHangOnPOCLsBasicDeviceOnly) {
  auto device = [](std::string name, std::string version) {
    OpenCLDeviceInfo info;
    info.platformName = "Portable Computing Language";
    info.deviceName = std::move(name);
    info.deviceVersion = std::move(version);
    return info;
  };
  for (const char *name :
       {"basic-skylake-avx512-AMD EPYC", "cpu-minimal-znver3-AMD Ryzen"}) {
    std::string why =
        userEventGatesHang(device(name, "OpenCL 3.0 PoCL HSTR: basic"));
    EXPECT_NE(why.find("pocl/pocl#1177"), std::string::npos) << name;
  }
  EXPECT_EQ(userEventGatesHang(device("pthread-skylake-avx512-AMD EPYC",
                                      "OpenCL 3.0 PoCL HSTR: pthread")),
            "");
  EXPECT_EQ(
      userEventGatesHang(device("cpu-znver3-AMD Ryzen", "OpenCL 3.0 PoCL")),
      "");
  // Another platform's device of that name is not POCL's.
  OpenCLDeviceInfo other = device("basic", "OpenCL 3.0 CUDA");
  other.platformName = "NVIDIA CUDA";
  EXPECT_EQ(userEventGatesHang(other), "");
}
