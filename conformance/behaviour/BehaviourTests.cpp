//===- BehaviourTests.cpp - The contract on every backend -----------------===//
//
// Each test checks one rule of docs/semantics.md against a real
// DeviceManager created through the registry. The same tests are instantiated
// for every backend configuration chosen at run time (behaviourCases(), see
// drt/conformance/Behaviour.h); after every test each device must be back at
// its baseline: no bytes in use, no live allocations, no operation in flight,
// no background error.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/ExecutionEngine.h"
#include "drt/HostManager.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"
#include "drt/conformance/Behaviour.h"

#include "ViolationAssertions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

using namespace drt;
using drt::conformance::BehaviourCase;

namespace drt::conformance {
std::ostream &operator<<(std::ostream &os, const BehaviourCase &c) {
  return os << c.label;
}
} // namespace drt::conformance

namespace {

::testing::AssertionResult hasCode(const Error &e, ErrorCode code) {
  if (e.code() == code)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected " << errorCodeName(code) << ", got " << e.toString();
}
#define EXPECT_CODE(expr, codeValue) EXPECT_TRUE(hasCode((expr), codeValue))

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    Error e_ = (expr);                                                         \
    ASSERT_FALSE(e_) << #expr << " failed: " << e_.toString();                 \
  } while (0)

class Behaviour : public ::testing::TestWithParam<BehaviourCase> {
protected:
  /// Creates device \p index (0, 1, ...) on first use.
  DeviceManager &device(size_t index = 0, uint64_t budget = 0,
                        bool copyToHost = false) {
    while (devices_.size() <= index) {
      DeviceConfig config;
      config.name = GetParam().backend + std::to_string(devices_.size());
      config.parameters = GetParam().parameters;
      config.memoryBudget = budget;
      config.copyDeviceTensorsToHost = copyToHost;
      auto d = BackendRegistry::instance().create(GetParam().backend, config);
      if (!d) {
        ADD_FAILURE() << "cannot create " << GetParam().backend << ": "
                      << d.takeError().toString();
        std::abort();
      }
      devices_.push_back(std::move(*d));
    }
    return *devices_[index];
  }

  Capabilities caps() { return device().capabilities(); }

  void TearDown() override {
    for (auto &d : devices_) {
      EXPECT_EQ(d->operationsInFlight(), 0u) << d->name();
      for (const Error &e : d->takeBackgroundErrors())
        ADD_FAILURE() << d->name() << ": background error " << e.toString();
      if (d->isShutDown())
        continue;
      EXPECT_EQ(d->usedMemory(), 0u) << d->name() << " did not return to 0";
      EXPECT_EQ(d->liveAllocations(), 0u) << d->name();
    }
  }

  static Tensor floats(size_t n, const std::string &name, float base = 1) {
    Tensor t(ElemKind::Float32, {n}, name);
    auto d = t.mutableHostData<float>();
    for (size_t i = 0; i < n; ++i)
      d[i] = base + float(i) * 0.5f;
    return t;
  }

  static std::vector<float> values(const Tensor &t) {
    auto d = t.hostData<float>();
    return {d.begin(), d.end()};
  }

  Function addFunction(const std::string &name, size_t n) {
    Type t{ElemKind::Float32, {n}};
    Function f(name);
    f.addPlaceholder("a", t).addPlaceholder("b", t).addPlaceholder("sum", t);
    f.addPlaceholder("act", t);
    f.addNode({OpKind::Add, {"a", "b"}, "sum"});
    f.addNode({OpKind::Relu, {"sum"}, "act"});
    return f;
  }

  ScopedThrowingViolationHandler handler_;
  // Destroyed after the tensors of a test body, before TearDown checks.
  std::vector<std::unique_ptr<DeviceManager>> devices_;
};

TEST_P(Behaviour, ToDeviceMakesTheRecordDeviceAndHostAccessAViolation) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(16, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  ResidencySnapshot s = t.residencySnapshot();
  EXPECT_EQ(s.state, ResidencyState::Device);
  EXPECT_EQ(s.manager, &d);
  EXPECT_FALSE(s.location.isNull());
  EXPECT_EQ(d.usedMemory(), 64u);
  EXPECT_EQ(d.liveAllocations(), 1u);
  EXPECT_VIOLATION(t.hostBytes(), ViolationKind::HostAccessWhileOnDevice);
  EXPECT_VIOLATION(t.mutableHostBytes(),
                   ViolationKind::HostAccessWhileOnDevice);
  EXPECT_VIOLATION(t.clone(), ViolationKind::HostAccessWhileOnDevice);
}

TEST_P(Behaviour, RoundTripWithReleasePreservesContents) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(33, "t", -4);
  std::vector<float> before = values(t);
  ASSERT_OK(transferToDeviceSync(d, t));
  ASSERT_OK(transferFromDeviceSync(d, t, /*release=*/true));
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(values(t), before);
  EXPECT_EQ(d.usedMemory(), 0u);
}

TEST_P(Behaviour, KeepMakesMirroredAndTheFirstWriteDropsTheDeviceCopy) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(8, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  ASSERT_OK(transferFromDeviceSync(d, t, /*release=*/false));
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored);
  EXPECT_EQ(d.usedMemory(), 32u) << "Mirrored keeps the device copy";
  EXPECT_EQ(values(t)[7], 4.5f) << "host reads are allowed when Mirrored";
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored);
  t.mutableHostData<float>()[0] = 9;
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(d.usedMemory(), 0u);
  EXPECT_EQ(d.liveAllocations(), 0u);
}

TEST_P(Behaviour, MirroredToTheSameDeviceMovesNothing) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(8, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  ASSERT_OK(transferFromDeviceSync(d, t, false));
  DeviceStats before = d.stats();
  DeviceLocation loc = t.residencySnapshot().location;
  ASSERT_OK(transferToDeviceSync(d, t));
  EXPECT_EQ(d.stats().transfersToDevice, before.transfersToDevice);
  EXPECT_EQ(d.stats().allocations, before.allocations);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored);
  EXPECT_EQ(t.residencySnapshot().location, loc);
  // Device to the same device is a no-op too.
  ASSERT_OK(transferFromDeviceSync(d, t, true));
  ASSERT_OK(transferToDeviceSync(d, t));
  before = d.stats();
  ASSERT_OK(transferToDeviceSync(d, t));
  EXPECT_EQ(d.stats().transfersToDevice, before.transfersToDevice);
}

TEST_P(Behaviour, ViewsObserveResidencyOnlyOwnersAndFullViewsMoveIt) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor owner = floats(8, "o");
  Tensor part = owner.getUnowned({4}, 4);
  Tensor full = owner.getUnowned({8});
  EXPECT_CODE(transferToDeviceSync(d, part), ErrorCode::InvalidArgument);
  EXPECT_EQ(owner.residencySnapshot().state, ResidencyState::Host);
  ASSERT_OK(transferToDeviceSync(d, owner));
  EXPECT_EQ(part.residencySnapshot().state, ResidencyState::Device)
      << "a view shares its owner's record";
  EXPECT_VIOLATION(part.hostBytes(), ViolationKind::HostAccessWhileOnDevice);
  EXPECT_CODE(transferFromDeviceSync(d, part), ErrorCode::InvalidArgument);
  EXPECT_CODE(d.releaseDeviceTensor(part), ErrorCode::InvalidArgument);
  ASSERT_OK(transferFromDeviceSync(d, full, true));
  EXPECT_EQ(owner.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(values(part)[0], 3.0f);
}

TEST_P(Behaviour, LastReferenceReleasesDeviceMemoryExactlyOnce) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  uint64_t freesBefore = d.stats().frees;
  Tensor view;
  {
    Tensor owner = floats(8, "o");
    ASSERT_OK(transferToDeviceSync(d, owner));
    view = owner.getUnowned({2}, 6);
  }
  EXPECT_EQ(d.usedMemory(), 32u) << "the view keeps the record alive";
  EXPECT_EQ(view.residencySnapshot().state, ResidencyState::Device);
  view = Tensor();
  EXPECT_EQ(d.usedMemory(), 0u);
  EXPECT_EQ(d.stats().frees, freesBefore + 1);
}

TEST_P(Behaviour, DestroyingAViewWhileItsOwnerLivesReleasesNothing) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor owner = floats(8, "o", 2);
  ASSERT_OK(transferToDeviceSync(d, owner));
  uint64_t frees = d.stats().frees;
  {
    Tensor part = owner.getUnowned({4}, 2);
    Tensor full = owner.getUnowned({8});
  }
  EXPECT_EQ(owner.residencySnapshot().state, ResidencyState::Device);
  EXPECT_EQ(d.stats().frees, frees);
  EXPECT_EQ(d.usedMemory(), 32u);
  ASSERT_OK(transferFromDeviceSync(d, owner));
  EXPECT_EQ(values(owner)[7], 5.5f);
}

TEST_P(Behaviour, CloneOfMirroredIsAnIndependentHostTensor) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(4, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  ASSERT_OK(transferFromDeviceSync(d, t, false));
  Tensor c = t.clone();
  EXPECT_EQ(c.residencySnapshot().state, ResidencyState::Host);
  EXPECT_FALSE(c.sharesResidencyWith(t));
  EXPECT_EQ(values(c), values(t));
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored);
  c.mutableHostData<float>()[0] = 100;
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Mirrored)
      << "writing the clone must not touch the source's record";
}

TEST_P(Behaviour, ReleaseIsIdempotentAndCallsTheBackendOnce) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(4, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  uint64_t frees = d.stats().frees;
  ASSERT_OK(d.releaseDeviceTensor(t));
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  ASSERT_OK(d.releaseDeviceTensor(t));
  EXPECT_EQ(d.stats().frees, frees + 1);
  EXPECT_EQ(d.usedMemory(), 0u);
  (void)t.hostBytes(); // allowed: contents unspecified, but readable
}

TEST_P(Behaviour, StaleAndUnknownLocationsAreRejectedNotPassedOn) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  auto loc = d.allocateDeviceMemory(64);
  ASSERT_TRUE(loc) << loc.takeError().toString();
  EXPECT_EQ(d.liveAllocations(), 1u);
  ASSERT_OK(d.releaseDeviceMemory(*loc));
  EXPECT_CODE(d.releaseDeviceMemory(*loc), ErrorCode::InvalidArgument);
  EXPECT_CODE(d.releaseDeviceMemory(DeviceLocation{}),
              ErrorCode::InvalidArgument);
  EXPECT_CODE(d.releaseDeviceMemory(DeviceLocation{0x7777000000000009ull}),
              ErrorCode::InvalidArgument);
  Tensor t = floats(16, "t");
  EXPECT_CODE(transferToDeviceSync(d, t, *loc), ErrorCode::InvalidArgument);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_CODE(d.allocateDeviceMemory(0).takeError(),
              ErrorCode::InvalidArgument);
}

TEST_P(Behaviour, TensOfThousandsOfAllocationsLeaveTheDeviceAsNew) {
  // Counters and tables a backend keeps of fixed width meet counts here
  // that a scenario does not: a slot reused 65,537 times, its first, stale
  // location named after every allocation (a generation kept in 16 bits or
  // fewer wraps, and the stale location frees the live one), then rounds
  // of 1,100 allocations live at once beside a resident tensor (a slab or
  // free list that counts in 8 bits, or recycles a few hundred slots, fills
  // or carves anew under live data).
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  auto stale = d.allocateDeviceMemory(64);
  ASSERT_TRUE(stale) << stale.takeError().toString();
  ASSERT_OK(d.releaseDeviceMemory(*stale));
  for (int i = 1; i <= 65537; ++i) {
    auto loc = d.allocateDeviceMemory(64);
    ASSERT_TRUE(loc) << "allocation " << i << ": "
                     << loc.takeError().toString();
    ASSERT_TRUE(
        hasCode(d.releaseDeviceMemory(*stale), ErrorCode::InvalidArgument))
        << "the stale location, after allocation " << i;
    ASSERT_OK(d.releaseDeviceMemory(*loc));
  }
  Tensor t = floats(16, "t", 3);
  ASSERT_OK(transferToDeviceSync(d, t));
  std::vector<DeviceLocation> live;
  for (int round = 1; round <= 100; ++round) {
    for (int i = 0; i < 1100; ++i) {
      auto loc = d.allocateDeviceMemory(64);
      ASSERT_TRUE(loc) << "round " << round << ", allocation " << i + 1
                       << " of 1,100 live: " << loc.takeError().toString();
      live.push_back(*loc);
    }
    EXPECT_EQ(d.usedMemory(), 64u * 1101) << "round " << round;
    // Every other one first, then the rest: holes all over.
    for (size_t i = 0; i < live.size(); i += 2)
      ASSERT_OK(d.releaseDeviceMemory(live[i]));
    for (size_t i = 1; i < live.size(); i += 2)
      ASSERT_OK(d.releaseDeviceMemory(live[i]));
    live.clear();
  }
  EXPECT_EQ(d.usedMemory(), 64u);
  ASSERT_OK(transferFromDeviceSync(d, t));
  EXPECT_EQ(values(t), values(floats(16, "expected", 3)));
}

TEST_P(Behaviour, TransferToAGivenLocationTakesItOver) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(16, "t", 2);
  auto wrong = d.allocateDeviceMemory(60);
  ASSERT_TRUE(wrong);
  EXPECT_CODE(transferToDeviceSync(d, t, *wrong), ErrorCode::InvalidArgument);
  ASSERT_OK(d.releaseDeviceMemory(*wrong));
  auto loc = d.allocateDeviceMemory(64);
  ASSERT_TRUE(loc);
  ASSERT_OK(transferToDeviceSync(d, t, *loc));
  EXPECT_EQ(t.residencySnapshot().location, *loc);
  EXPECT_EQ(d.liveAllocations(), 1u);
  EXPECT_CODE(d.releaseDeviceMemory(*loc), ErrorCode::InvalidArgument)
      << "a location owned by a tensor cannot be released raw";
  Tensor other = floats(16, "other");
  EXPECT_CODE(transferToDeviceSync(d, other, *loc), ErrorCode::InvalidArgument);
  ASSERT_OK(transferFromDeviceSync(d, t));
  EXPECT_EQ(values(t)[15], 9.5f);
}

TEST_P(Behaviour, MoveAssignOntoAResidentTensorReleasesItsMemory) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor target = floats(8, "target");
  Tensor source = floats(4, "source", 7);
  ASSERT_OK(transferToDeviceSync(d, target));
  ASSERT_OK(transferToDeviceSync(d, source));
  EXPECT_EQ(d.usedMemory(), 48u);
  uint64_t frees = d.stats().frees;
  target = std::move(source);
  EXPECT_EQ(d.usedMemory(), 16u);
  EXPECT_EQ(d.stats().frees, frees + 1);
  EXPECT_EQ(target.residencySnapshot().state, ResidencyState::Device);
  EXPECT_VIOLATION(source.hostBytes(), ViolationKind::UseOfMovedFrom);
  EXPECT_VIOLATION((void)transferToDeviceSync(d, source),
                   ViolationKind::UseOfMovedFrom);
  Tensor &self = target;
  target = std::move(self);
  EXPECT_EQ(d.usedMemory(), 16u) << "self-move must not release";
  EXPECT_EQ(target.residencySnapshot().state, ResidencyState::Device);
  Tensor moved(std::move(target));
  EXPECT_EQ(moved.residencySnapshot().state, ResidencyState::Device);
  ASSERT_OK(transferFromDeviceSync(d, moved));
  EXPECT_EQ(values(moved)[0], 7.0f);
}

TEST_P(Behaviour, OutOfMemoryPastTheBudgetNamesTheSizes) {
  DeviceManager &d = device(0, /*budget=*/256);
  if (!caps().residentTensors || !caps().memoryBudget)
    GTEST_SKIP() << "backend declares no memory budget";
  EXPECT_EQ(d.maximumMemory(), 256u);
  Tensor a = floats(48, "a"); // 192 bytes
  Tensor b = floats(32, "b"); // 128 bytes
  ASSERT_OK(transferToDeviceSync(d, a));
  Error e = transferToDeviceSync(d, b);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory) << e.toString();
  EXPECT_NE(e.message().find("128"), std::string::npos) << e.message();
  EXPECT_EQ(b.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(d.usedMemory(), 192u);
  EXPECT_EQ(d.availableMemory(), 64u);
  ASSERT_OK(d.releaseDeviceTensor(a));
  ASSERT_OK(transferToDeviceSync(d, b));
}

TEST_P(Behaviour, CallbackRunsOnceAfterTheRecordIsUpdated) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(8, "t");
  std::atomic<int> calls{0};
  std::atomic<int> stateSeen{-1};
  std::mutex m;
  std::condition_variable cv;
  d.transferToDevice(t, std::nullopt, [&](Error e) {
    EXPECT_FALSE(e) << e.toString();
    stateSeen = int(t.residencySnapshot().state);
    // Notified under the lock: once the waiter sees the call it may leave
    // the test, destroying the condition variable.
    std::lock_guard<std::mutex> lock(m);
    ++calls;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return calls > 0; });
  }
  t.residency().waitUntilIdle();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(stateSeen, int(ResidencyState::Device));
  // An error path calls back exactly once as well.
  Tensor part = t.getUnowned({2});
  int errorCalls = 0;
  d.transferToDevice(part, std::nullopt, [&](Error e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    ++errorCalls;
  });
  EXPECT_EQ(errorCalls, 1);
}

TEST_P(Behaviour, HostAccessWaitsForAPendingTransfer) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  Tensor t = floats(1024, "t", 3);
  ASSERT_OK(transferToDeviceSync(d, t));
  std::atomic<bool> called{false};
  d.transferFromDevice(t, true, [&](Error e) {
    EXPECT_FALSE(e) << e.toString();
    called = true;
  });
  // Must wait for the read-back and then see Host data, never race with it.
  auto v = t.hostData<float>();
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(v[1023], 3 + 1023 * 0.5f);
  t.residency().waitUntilIdle();
  while (!called)
    std::this_thread::yield();
}

// A host access made while an upload is pending waits for it: in program
// order the tensor is then on the device, so the access is a violation. On
// an asynchronous device the upload is usually still on its way when the
// access comes (a record that is Host and busy), which is the case the
// rounds exercise; on a synchronous one it has finished before the call
// returns.
TEST_P(Behaviour, HostAccessDuringAPendingUploadIsTheViolationOfProgramOrder) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  for (int round = 0; round < 20; ++round) {
    bool write = round % 2 == 1;
    SCOPED_TRACE(std::string(write ? "host write" : "host read") + ", round " +
                 std::to_string(round));
    Tensor t = floats(256, "t", float(round));
    std::atomic<bool> called{false};
    d.transferToDevice(t, std::nullopt, [&](Error e) {
      EXPECT_FALSE(e) << e.toString();
      called = true;
    });
    if (write)
      EXPECT_VIOLATION(t.mutableHostBytes(),
                       ViolationKind::HostAccessWhileOnDevice);
    else
      EXPECT_VIOLATION(t.hostBytes(), ViolationKind::HostAccessWhileOnDevice);
    t.residency().waitUntilIdle();
    while (!called)
      std::this_thread::yield();
    ASSERT_OK(transferFromDeviceSync(d, t, true));
  }
}

TEST_P(Behaviour, RunLeavesOutputsResidentWithNoDeviceCopies) {
  DeviceManager &d = device();
  ASSERT_OK(addNetworkSync(d, addFunction("f", 64)));
  ExecutionContext ctx;
  Tensor a = floats(64, "a", -20), b = floats(64, "b", 1);
  Tensor sum(ElemKind::Float32, {64}, "sum"),
      act(ElemKind::Float32, {64}, "act");
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  ctx.bindings().bind("sum", sum);
  ctx.bindings().bind("act", act);
  ASSERT_OK(runFunctionSync(d, "f", ctx));
  EXPECT_EQ(d.stats().deviceCopies, 0u);
  EXPECT_EQ(a.residencySnapshot().state, ResidencyState::Host)
      << "host inputs are copied in, not moved";
  if (caps().residentTensors) {
    EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Device);
    EXPECT_EQ(act.residencySnapshot().manager, &d);
    EXPECT_EQ(sum.residencySnapshot().state, ResidencyState::Device);
    EXPECT_EQ(d.usedMemory(), 512u) << "two outputs, temporaries freed";
  }
  HostManager hm; // only its ensureOutputsAvailable logic is used here
  for (const std::string &out : d.outputsOf("f"))
    ASSERT_OK(ctx.bindings().get(out)->ensureOnHost());
  for (size_t i = 0; i < 64; ++i) {
    float expect = (-20 + i * 0.5f) + (1 + i * 0.5f);
    EXPECT_EQ(sum.hostData<float>()[i], expect) << i;
    EXPECT_EQ(act.hostData<float>()[i], expect > 0 ? expect : 0.0f) << i;
  }
  ASSERT_OK(evictNetworkSync(d, "f"));
  EXPECT_FALSE(d.hasNetwork("f"));
}

TEST_P(Behaviour, ResidentInputsAreUsedInPlace) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  ASSERT_OK(addNetworkSync(d, addFunction("f", 16)));
  Tensor a = floats(16, "a"), b = floats(16, "b");
  ASSERT_OK(transferToDeviceSync(d, a));
  ASSERT_OK(transferToDeviceSync(d, b));
  ExecutionContext ctx;
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  ctx.bindings().allocate("sum", Type{ElemKind::Float32, {16}});
  ctx.bindings().allocate("act", Type{ElemKind::Float32, {16}});
  DeviceStats before = d.stats();
  ASSERT_OK(runFunctionSync(d, "f", ctx));
  EXPECT_EQ(d.stats().transfersToDevice, before.transfersToDevice)
      << "resident inputs must not be copied again";
  EXPECT_EQ(d.stats().transfersFromDevice, before.transfersFromDevice)
      << "outputs must stay on the device";
  EXPECT_EQ(a.residencySnapshot().state, ResidencyState::Device);
  // A second run writes the resident outputs in place.
  uint64_t allocations = d.stats().allocations;
  ASSERT_OK(runFunctionSync(d, "f", ctx));
  EXPECT_EQ(d.stats().allocations, allocations);
}

TEST_P(Behaviour, ViewInputsOfAResidentTensorAreRead) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d = device();
  ASSERT_OK(addNetworkSync(d, addFunction("f", 4)));
  Tensor big = floats(12, "big");
  ASSERT_OK(transferToDeviceSync(d, big));
  Tensor a = big.getUnowned({4}, 4), b = big.getUnowned({4}, 8);
  ExecutionContext ctx;
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  Tensor &sum = ctx.bindings().allocate("sum", Type{ElemKind::Float32, {4}});
  ctx.bindings().allocate("act", Type{ElemKind::Float32, {4}});
  ASSERT_OK(runFunctionSync(d, "f", ctx));
  ASSERT_OK(sum.ensureOnHost());
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(sum.hostData<float>()[i],
              (1 + (4 + i) * 0.5f) + (1 + (8 + i) * 0.5f));
}

TEST_P(Behaviour, CopyDeviceTensorsToHostBringsOutputsBack) {
  DeviceManager &d = device(0, 0, /*copyToHost=*/true);
  ASSERT_OK(addNetworkSync(d, addFunction("f", 8)));
  ExecutionContext ctx;
  Tensor a = floats(8, "a"), b = floats(8, "b");
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  Tensor &act = ctx.bindings().allocate("act", Type{ElemKind::Float32, {8}});
  Tensor &sum = ctx.bindings().allocate("sum", Type{ElemKind::Float32, {8}});
  ASSERT_OK(runFunctionSync(d, "f", ctx));
  EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(sum.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(act.hostData<float>()[7], 2 * (1 + 7 * 0.5f));
  EXPECT_EQ(d.usedMemory(), 0u);
}

TEST_P(Behaviour, ExecutionEngineRunBringsOutputsHomeUnlessTold) {
  DeviceConfig config;
  config.parameters = GetParam().parameters;
  auto ee = ExecutionEngine::create(GetParam().backend, config);
  ASSERT_TRUE(ee) << ee.takeError().toString();
  ASSERT_OK((*ee)->compile(addFunction("f", 4)));
  ExecutionContext ctx;
  Tensor a = floats(4, "a"), b = floats(4, "b");
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  Tensor &act = ctx.bindings().allocate("act", Type{ElemKind::Float32, {4}});
  ctx.bindings().allocate("sum", Type{ElemKind::Float32, {4}});
  ASSERT_OK((*ee)->run(ctx, "f"));
  EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(act.hostData<float>()[3], 2 * 2.5f);
  DeviceManager &d = (*ee)->hostManager().device(0);
  if (d.capabilities().residentTensors) {
    (*ee)->setKeepOutputsOnDevice(true);
    ASSERT_OK((*ee)->run(ctx, "f"));
    EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Device);
    ASSERT_OK((*ee)->hostManager().ensureOutputsAvailable(ctx));
    EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Host);
  }
  EXPECT_EQ(d.usedMemory(), 0u);
  EXPECT_CODE((*ee)->run(ctx, "nope"), ErrorCode::InvalidArgument);
}

TEST_P(Behaviour, RunArgumentErrorsAreInvalidArgument) {
  DeviceManager &d = device();
  ASSERT_OK(addNetworkSync(d, addFunction("f", 4)));
  EXPECT_CODE(addNetworkSync(d, addFunction("f", 4)),
              ErrorCode::InvalidArgument);
  Function bad("bad");
  EXPECT_CODE(addNetworkSync(d, bad), ErrorCode::InvalidArgument);
  ExecutionContext ctx;
  Tensor a = floats(4, "a"), wrong(ElemKind::Int32, {4}, "wrong");
  ctx.bindings().bind("a", a);
  EXPECT_CODE(runFunctionSync(d, "f", ctx), ErrorCode::InvalidArgument);
  ctx.bindings().bind("b", wrong);
  ctx.bindings().allocate("sum", Type{ElemKind::Float32, {4}});
  ctx.bindings().allocate("act", Type{ElemKind::Float32, {4}});
  EXPECT_CODE(runFunctionSync(d, "f", ctx), ErrorCode::InvalidArgument);
  Tensor b = floats(4, "b");
  ctx.bindings().bind("b", b);
  ctx.bindings().bind("sum", a);
  EXPECT_CODE(runFunctionSync(d, "f", ctx), ErrorCode::InvalidArgument)
      << "an output sharing its storage with an input";
  EXPECT_CODE(runFunctionSync(d, "unknown", ctx), ErrorCode::InvalidArgument);
  EXPECT_CODE(evictNetworkSync(d, "unknown"), ErrorCode::InvalidArgument);
  EXPECT_EQ(a.residencySnapshot().state, ResidencyState::Host);
}

TEST_P(Behaviour, IntegerAndFloatSemanticsAreExact) {
  DeviceManager &d = device();
  Type i32{ElemKind::Int32, {6}};
  Function f("ints");
  f.addPlaceholder("x", i32).addPlaceholder("y", i32);
  f.addPlaceholder("sum", i32).addPlaceholder("prod", i32);
  f.addPlaceholder("scaled", i32).addPlaceholder("relu", i32);
  f.addNode({OpKind::Add, {"x", "y"}, "sum"});
  f.addNode({OpKind::Mul, {"x", "y"}, "prod"});
  f.addNode({OpKind::Scale, {"x"}, "scaled", -3});
  f.addNode({OpKind::Relu, {"x"}, "relu"});
  ASSERT_OK(addNetworkSync(d, f));
  Type f32{ElemKind::Float32, {6}};
  Function g("floats");
  g.addPlaceholder("x", f32).addPlaceholder("y", f32);
  g.addPlaceholder("prod", f32).addPlaceholder("relu", f32);
  g.addPlaceholder("scaled", f32).addPlaceholder("copy", f32);
  g.addNode({OpKind::Mul, {"x", "y"}, "prod"});
  g.addNode({OpKind::Relu, {"x"}, "relu"});
  g.addNode({OpKind::Scale, {"x"}, "scaled", 0.1});
  g.addNode({OpKind::Copy, {"x"}, "copy"});
  ASSERT_OK(addNetworkSync(d, g));

  int32_t xs[6] = {INT32_MAX, INT32_MIN, -5, 0, 7, 123456789};
  int32_t ys[6] = {1, -1, 5, -9, 7, 1000};
  ExecutionContext ci;
  Tensor x(i32, "x"), y(i32, "y");
  ASSERT_OK(x.refillFromHost(std::as_bytes(std::span(xs))));
  ASSERT_OK(y.refillFromHost(std::as_bytes(std::span(ys))));
  ci.bindings().bind("x", x);
  ci.bindings().bind("y", y);
  for (const char *n : {"sum", "prod", "scaled", "relu"})
    ci.bindings().allocate(n, i32);
  ASSERT_OK(runFunctionSync(d, "ints", ci));
  for (const char *n : {"sum", "prod", "scaled", "relu"})
    ASSERT_OK(ci.bindings().get(n)->ensureOnHost());
  for (size_t i = 0; i < 6; ++i) {
    uint32_t ux = uint32_t(xs[i]), uy = uint32_t(ys[i]);
    EXPECT_EQ(ci.bindings().get("sum")->hostData<int32_t>()[i],
              int32_t(ux + uy));
    EXPECT_EQ(ci.bindings().get("prod")->hostData<int32_t>()[i],
              int32_t(ux * uy));
    EXPECT_EQ(ci.bindings().get("scaled")->hostData<int32_t>()[i],
              int32_t(ux * uint32_t(-3)));
    EXPECT_EQ(ci.bindings().get("relu")->hostData<int32_t>()[i],
              xs[i] > 0 ? xs[i] : 0);
  }

  float fx[6] = {std::numeric_limits<float>::quiet_NaN(),
                 -0.0f,
                 1e38f,
                 -2.5f,
                 3.3f,
                 1e-40f};
  float fy[6] = {1, 5, 10, -4, 0.7f, 3};
  ExecutionContext cf;
  Tensor x2(f32, "x"), y2(f32, "y");
  ASSERT_OK(x2.refillFromHost(std::as_bytes(std::span(fx))));
  ASSERT_OK(y2.refillFromHost(std::as_bytes(std::span(fy))));
  cf.bindings().bind("x", x2);
  cf.bindings().bind("y", y2);
  for (const char *n : {"prod", "relu", "scaled", "copy"})
    cf.bindings().allocate(n, f32);
  ASSERT_OK(runFunctionSync(d, "floats", cf));
  auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  for (const char *n : {"prod", "relu", "scaled", "copy"})
    ASSERT_OK(cf.bindings().get(n)->ensureOnHost());
  for (size_t i = 0; i < 6; ++i) {
    volatile float p = fx[i] * fy[i];
    volatile float s = fx[i] * float(0.1);
    float r = fx[i] > 0 ? fx[i] : 0.0f;
    float prod = cf.bindings().get("prod")->hostData<float>()[i];
    // NaN payloads are unspecified (GPUs return their canonical NaN).
    if (std::isnan(p))
      EXPECT_TRUE(std::isnan(prod)) << i;
    else
      EXPECT_EQ(bits(prod), bits(p)) << i;
    float scaled = cf.bindings().get("scaled")->hostData<float>()[i];
    if (std::isnan(s))
      EXPECT_TRUE(std::isnan(scaled)) << i;
    else
      EXPECT_EQ(bits(scaled), bits(s)) << i;
    EXPECT_EQ(bits(cf.bindings().get("relu")->hostData<float>()[i]), bits(r))
        << i;
    EXPECT_EQ(bits(cf.bindings().get("copy")->hostData<float>()[i]),
              bits(fx[i]))
        << i;
  }
}

/// One element of an exactness table: the operands and the expected bits of
/// add(x, y), mul(x, y), relu(x) and scale(x, factor); copy(x) must give x's
/// bits. Computed by hand with exact arithmetic, independently of the
/// backends and of the reference model.
struct ElementCase {
  uint64_t x, y, sum, prod, relu, scaled;
};

/// In a float kind's table, where the contract leaves a NaN's payload open:
/// any NaN of the kind (integer tables use every value as itself).
constexpr uint64_t AnyNaN = ~uint64_t(0);

// f32, f16 and bf16 with factor 0.3 (0x3e99999a in f32, 0x34cd in f16,
// 0x3e9a in bf16): ties to even, overflow, denormals, signed zeros,
// infinities and NaNs.
const ElementCase F32Cases[] = {
    {0x3f800000, 0x33800000, 0x3f800000, 0x33800000, 0x3f800000,
     0x3e99999a}, // 1 + half an ulp ties to 1
    {0x3f800001, 0x33800000, 0x3f800002, 0x33800001, 0x3f800001,
     0x3e99999b}, // (1 + ulp) + half an ulp ties up to even
    {0x3f400000, 0x3f400000, 0x3fc00000, 0x3f100000, 0x3f400000,
     0x3e666667}, // 0.75: 0.75 * 0.3f is 0x3e666667 in f32
    {0x7f7fffff, 0x7f7fffff, 0x7f800000, 0x7f800000, 0x7f7fffff,
     0x7e999999}, // largest finite: overflow to inf
    {0x00000001, 0x007fffff, 0x00800000, 0x00000000, 0x00000001,
     0x00000000}, // denormals add up to the smallest normal
    {0x00400000, 0x40000000, 0x40000000, 0x00800000, 0x00400000,
     0x00133333}, // a denormal times 2 is the smallest normal
    {0x80000000, 0x00000000, 0x00000000, 0x80000000, 0x00000000,
     0x80000000}, // -0 + +0 is +0; relu(-0) is +0
    {0x7f800000, 0xff800000, AnyNaN, 0xff800000, 0x7f800000,
     0x7f800000}, // inf - inf is NaN
    {0x7fc00000, 0x3f800000, AnyNaN, AnyNaN, 0x00000000,
     AnyNaN}, // quiet NaN propagates; relu gives +0
    {0x7f800001, 0x40000000, AnyNaN, AnyNaN, 0x00000000,
     AnyNaN}, // signalling NaN: copy keeps its bits
    {0xc0200000, 0x00000000, 0xc0200000, 0x80000000, 0x00000000,
     0xbf400000}, // -2.5 * 0 is -0
};
const ElementCase F16Cases[] = {
    {0x3c00, 0x1000, 0x3c00, 0x1000, 0x3c00,
     0x34cd}, // 1 + half an ulp ties to 1
    {0x3c01, 0x1000, 0x3c02, 0x1001, 0x3c01,
     0x34ce}, // (1 + ulp) + half an ulp ties up to even
    {0x7bff, 0x4c00, 0x7c00, 0x7c00, 0x7bff,
     0x74cc}, // 65504 + 16 = 65520 ties to inf
    {0x7bff, 0x4b80, 0x7bff, 0x7c00, 0x7bff,
     0x74cc}, // 65504 + 15 rounds back to 65504
    {0x0001, 0x03ff, 0x0400, 0x0000, 0x0001,
     0x0000}, // denormals add up to the smallest normal
    {0x0003, 0x3800, 0x3800, 0x0002, 0x0003,
     0x0001}, // 3 * 2^-24 * 0.5 ties to 2 * 2^-24
    {0x0001, 0x3800, 0x3800, 0x0000, 0x0001, 0x0000}, // 2^-24 * 0.5 ties to 0
    {0x8000, 0x0000, 0x0000, 0x8000, 0x0000,
     0x8000}, // -0 + +0 is +0; relu(-0) is +0
    {0x7c00, 0xfc00, AnyNaN, 0xfc00, 0x7c00, 0x7c00}, // inf - inf is NaN
    {0x7e00, 0x3c00, AnyNaN, AnyNaN, 0x0000,
     AnyNaN}, // quiet NaN propagates; relu gives +0
    {0x7c01, 0x4000, AnyNaN, AnyNaN, 0x0000,
     AnyNaN}, // signalling NaN: copy keeps its bits
    {0x3555, 0x4200, 0x42ab, 0x3c00, 0x3555,
     0x2e66}, // 1/3 rounded times 3 rounds to 1
};
const ElementCase BF16Cases[] = {
    {0x3f80, 0x3b80, 0x3f80, 0x3b80, 0x3f80,
     0x3e9a}, // 1 + half an ulp ties to 1
    {0x3f81, 0x3b80, 0x3f82, 0x3b81, 0x3f81,
     0x3e9b}, // (1 + ulp) + half an ulp ties up to even
    {0x7f7f, 0x7b00, 0x7f80, 0x7f80, 0x7f7f,
     0x7e99}, // largest finite + half its ulp ties to inf
    {0x7f7f, 0x7a80, 0x7f7f, 0x7f80, 0x7f7f,
     0x7e99}, // largest finite + a quarter ulp rounds back
    {0x0001, 0x007f, 0x0080, 0x0000, 0x0001,
     0x0000}, // denormals add up to the smallest normal
    {0x0003, 0x3f00, 0x3f00, 0x0002, 0x0003,
     0x0001}, // 3 * 2^-133 * 0.5 ties to 2 * 2^-133
    {0x0001, 0x3f00, 0x3f00, 0x0000, 0x0001, 0x0000}, // 2^-133 * 0.5 ties to 0
    {0x8000, 0x0000, 0x0000, 0x8000, 0x0000,
     0x8000}, // -0 + +0 is +0; relu(-0) is +0
    {0x7f80, 0xff80, AnyNaN, 0xff80, 0x7f80, 0x7f80}, // inf - inf is NaN
    {0x7fc0, 0x3f80, AnyNaN, AnyNaN, 0x0000,
     AnyNaN}, // quiet NaN propagates; relu gives +0
    {0x7f81, 0x4000, AnyNaN, AnyNaN, 0x0000,
     AnyNaN}, // signalling NaN: copy keeps its bits
    {0x3eab, 0x4040, 0x4055, 0x3f80, 0x3eab,
     0x3dce}, // 1/3 rounded times 3 rounds to 1
};
// i32 with factor -2^31, i64 with factor 3037000500, u8 with factor 255:
// wrap-around at both ends and relu.
const ElementCase I32Cases[] = {
    {0x80000000, 0xffffffff, 0x7fffffff, 0x80000000, 0x0,
     0x0}, // min + -1 wraps to max; min * -1 is min
    {0x7fffffff, 0x1, 0x80000000, 0x7fffffff, 0x7fffffff,
     0x80000000}, // max + 1 wraps to min
    {0xb505, 0xb505, 0x16a0a, 0x80001219, 0xb505, 0x80000000}, // 46341^2 wraps
    {0x3, 0xfffffffd, 0x0, 0xfffffff7, 0x3, 0x80000000},       // 3 + -3 is 0
    {0x0, 0x5, 0x5, 0x0, 0x0, 0x0},                            // relu(0) is 0
};
const ElementCase I64Cases[] = {
    {0x8000000000000000, 0xffffffffffffffff, 0x7fffffffffffffff,
     0x8000000000000000, 0x0, 0x0}, // min + -1 wraps to max
    {0x7fffffffffffffff, 0x1, 0x8000000000000000, 0x7fffffffffffffff,
     0x7fffffffffffffff, 0xffffffff4afb0ccc}, // max + 1 wraps to min
    {0xb504f334, 0xb504f334, 0x16a09e668, 0x8000000008abc290, 0xb504f334,
     0x8000000008abc290}, // 3037000500^2 wraps
    {0xffffffff, 0x100000001, 0x200000000, 0xffffffffffffffff, 0xffffffff,
     0xb504f3334afb0ccc},           // (2^32 - 1)(2^32 + 1) = 2^64 - 1
    {0x0, 0x7, 0x7, 0x0, 0x0, 0x0}, // relu(0) is 0
};
const ElementCase U8Cases[] = {
    {0xff, 0x1, 0x0, 0xff, 0xff, 0x1},   // 255 + 1 wraps to 0
    {0x0, 0xff, 0xff, 0x0, 0x0, 0x0},    // relu(0) is 0
    {0x10, 0x10, 0x20, 0x0, 0x10, 0xf0}, // 16 * 16 wraps to 0
    {0x80, 0x2, 0x82, 0x0, 0x80, 0x80},  // no u8 is negative: relu(128) is 128
    {0x11, 0xf, 0x20, 0xff, 0x11, 0xef}, // 17 * 15 = 255
};

bool isNaNBits(ElemKind kind, uint64_t bits) {
  switch (kind) {
  case ElemKind::Float32:
    return (bits & 0x7fffffff) > 0x7f800000;
  case ElemKind::Float16:
    return (bits & 0x7fff) > 0x7c00;
  case ElemKind::BFloat16:
    return (bits & 0x7fff) > 0x7f80;
  default:
    return false;
  }
}

/// Element bits as uint64_t, stored in elemSize(kind) bytes in host order.
void storeElement(ElemKind kind, uint64_t bits, std::byte *to) {
  uint8_t u8 = uint8_t(bits);
  uint16_t u16 = uint16_t(bits);
  uint32_t u32 = uint32_t(bits);
  switch (elemSize(kind)) {
  case 1:
    std::memcpy(to, &u8, 1);
    break;
  case 2:
    std::memcpy(to, &u16, 2);
    break;
  case 4:
    std::memcpy(to, &u32, 4);
    break;
  default:
    std::memcpy(to, &bits, 8);
    break;
  }
}

uint64_t loadElement(ElemKind kind, const std::byte *from) {
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (elemSize(kind)) {
  case 1:
    std::memcpy(&u8, from, 1);
    return u8;
  case 2:
    std::memcpy(&u16, from, 2);
    return u16;
  case 4:
    std::memcpy(&u32, from, 4);
    return u32;
  default:
    std::memcpy(&u64, from, 8);
    return u64;
  }
}

TEST_P(Behaviour, EveryOpIsExactOnEveryElementKind) {
  struct KindTable {
    ElemKind kind;
    double factor;
    std::span<const ElementCase> cases;
  };
  const KindTable tables[] = {
      {ElemKind::Float32, 0.3, F32Cases},
      {ElemKind::Float16, 0.3, F16Cases},
      {ElemKind::BFloat16, 0.3, BF16Cases},
      {ElemKind::Int32, -2147483648.0, I32Cases},
      {ElemKind::Int64, 3037000500.0, I64Cases},
      {ElemKind::UInt8, 255, U8Cases},
  };
  DeviceManager &d = device();
  for (const KindTable &table : tables) {
    SCOPED_TRACE(std::string(elemKindName(table.kind)));
    size_t n = table.cases.size();
    Type type{table.kind, {n}};
    std::string name = "exact_" + std::string(elemKindName(table.kind));
    Function f(name);
    f.addPlaceholder("x", type).addPlaceholder("y", type);
    for (const char *out : {"sum", "prod", "act", "scaled", "copied"})
      f.addPlaceholder(out, type);
    f.addNode({OpKind::Add, {"x", "y"}, "sum"});
    f.addNode({OpKind::Mul, {"x", "y"}, "prod"});
    f.addNode({OpKind::Relu, {"x"}, "act"});
    f.addNode({OpKind::Scale, {"x"}, "scaled", table.factor});
    f.addNode({OpKind::Copy, {"x"}, "copied"});
    ASSERT_OK(addNetworkSync(d, f));

    std::vector<uint64_t> xs, ys;
    for (const ElementCase &c : table.cases) {
      xs.push_back(c.x);
      ys.push_back(c.y);
    }
    Tensor x(type, "x"), y(type, "y");
    size_t size = elemSize(table.kind);
    for (size_t i = 0; i < n; ++i) {
      storeElement(table.kind, xs[i], x.mutableHostBytes().data() + i * size);
      storeElement(table.kind, ys[i], y.mutableHostBytes().data() + i * size);
    }
    ExecutionContext ctx;
    ctx.bindings().bind("x", x);
    ctx.bindings().bind("y", y);
    for (const char *out : {"sum", "prod", "act", "scaled", "copied"})
      ctx.bindings().allocate(out, type);
    ASSERT_OK(runFunctionSync(d, name, ctx));
    for (const char *out : {"sum", "prod", "act", "scaled", "copied"})
      ASSERT_OK(ctx.bindings().get(out)->ensureOnHost());

    auto check = [&](const char *out, size_t i, uint64_t expected) {
      uint64_t got = loadElement(
          table.kind, ctx.bindings().get(out)->hostBytes().data() + i * size);
      if (isFloatingPoint(table.kind) && expected == AnyNaN)
        EXPECT_TRUE(isNaNBits(table.kind, got))
            << out << "[" << i << "] = 0x" << std::hex << got
            << ", expected a NaN";
      else
        EXPECT_EQ(got, expected) << out << "[" << i << "] of x = 0x" << std::hex
                                 << xs[i] << ", y = 0x" << ys[i];
    };
    for (size_t i = 0; i < n; ++i) {
      const ElementCase &c = table.cases[i];
      check("sum", i, c.sum);
      check("prod", i, c.prod);
      check("act", i, c.relu);
      check("scaled", i, c.scaled);
      check("copied", i, c.x);
    }
    ASSERT_OK(evictNetworkSync(d, name));
  }
}

TEST_P(Behaviour, TensorsMoveBetweenDevicesThroughTheHost) {
  if (!caps().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  DeviceManager &d0 = device(0);
  DeviceManager &d1 = device(1);
  Tensor t = floats(32, "t", 11);
  std::vector<float> before = values(t);
  ASSERT_OK(transferToDeviceSync(d0, t));
  ASSERT_OK(transferToDeviceSync(d1, t));
  EXPECT_EQ(t.residencySnapshot().manager, &d1);
  EXPECT_EQ(d0.usedMemory(), 0u);
  EXPECT_EQ(d1.usedMemory(), 128u);
  EXPECT_CODE(transferFromDeviceSync(d0, t), ErrorCode::InvalidArgument);
  EXPECT_CODE(d0.releaseDeviceTensor(t), ErrorCode::InvalidArgument);
  // Mirrored on d1, then to d0: d1's copy is dropped.
  ASSERT_OK(transferFromDeviceSync(d1, t, false));
  ASSERT_OK(transferToDeviceSync(d0, t));
  EXPECT_EQ(d1.usedMemory(), 0u);
  ASSERT_OK(transferFromDeviceSync(d0, t));
  EXPECT_EQ(values(t), before);
}

TEST_P(Behaviour, RunMovesAnInputFromAnotherDevice) {
  DeviceManager &d0 = device(0);
  DeviceManager &d1 = device(1);
  if (!d0.capabilities().residentTensors)
    GTEST_SKIP() << "backend declares no resident tensors";
  ASSERT_OK(addNetworkSync(d1, addFunction("f", 8)));
  Tensor a = floats(8, "a"), b = floats(8, "b");
  ASSERT_OK(transferToDeviceSync(d0, a));
  ExecutionContext ctx;
  ctx.bindings().bind("a", a);
  ctx.bindings().bind("b", b);
  Tensor &act = ctx.bindings().allocate("act", Type{ElemKind::Float32, {8}});
  ctx.bindings().allocate("sum", Type{ElemKind::Float32, {8}});
  ASSERT_OK(runFunctionSync(d1, "f", ctx));
  EXPECT_EQ(a.residencySnapshot().manager, &d1) << "the input was moved";
  EXPECT_EQ(d0.usedMemory(), 0u);
  ASSERT_OK(act.ensureOnHost());
  EXPECT_EQ(act.hostData<float>()[1], 3.0f);
}

TEST_P(Behaviour, ShutdownLosesDeviceTensorsAndKeepsMirroredOnes) {
  if (!caps().residentTensors || !caps().deviceLoss)
    GTEST_SKIP() << "backend declares no device loss";
  DeviceManager &d = device();
  Tensor dev = floats(4, "dev"), mir = floats(4, "mir", 5);
  ASSERT_OK(transferToDeviceSync(d, dev));
  ASSERT_OK(transferToDeviceSync(d, mir));
  ASSERT_OK(transferFromDeviceSync(d, mir, false));
  d.shutdown();
  EXPECT_TRUE(d.isShutDown());
  EXPECT_EQ(dev.residencySnapshot().state, ResidencyState::Lost);
  EXPECT_EQ(mir.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(values(mir)[0], 5.0f);
  EXPECT_VIOLATION(dev.hostBytes(), ViolationKind::HostAccessWhileLost);
  EXPECT_VIOLATION(dev.mutableHostBytes(), ViolationKind::HostAccessWhileLost);
  EXPECT_CODE(transferToDeviceSync(d, mir), ErrorCode::DeviceLost);
  EXPECT_CODE(dev.ensureOnHost(), ErrorCode::DeviceLost);
  EXPECT_CODE(dev.getUnowned({2}).refillFromHost(
                  std::as_bytes(std::span(values(mir).data(), 2))),
              ErrorCode::InvalidArgument);
  std::vector<float> fresh = {1, 2, 3, 4};
  ASSERT_OK(dev.refillFromHost(std::as_bytes(std::span(fresh))));
  EXPECT_EQ(dev.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(values(dev), fresh);
  d.shutdown(); // idempotent
}

TEST_P(Behaviour, ShutdownCompletesInFlightOperationsOnceWithDeviceLost) {
  if (!caps().residentTensors || !caps().deviceLoss)
    GTEST_SKIP() << "backend declares no device loss";
  DeviceManager &d = device();
  std::vector<Tensor> ts;
  for (int i = 0; i < 8; ++i)
    ts.push_back(floats(4096, "t" + std::to_string(i)));
  std::atomic<int> calls{0}, lost{0}, ok{0};
  for (Tensor &t : ts)
    d.transferToDevice(t, std::nullopt, [&](Error e) {
      ++calls;
      if (e.code() == ErrorCode::DeviceLost)
        ++lost;
      else if (!e)
        ++ok;
    });
  d.shutdown();
  for (Tensor &t : ts)
    t.residency().waitUntilIdle();
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(lost + ok, 8);
  EXPECT_EQ(d.operationsInFlight(), 0u);
  for (Tensor &t : ts) {
    ResidencyState s = t.residencySnapshot().state;
    EXPECT_TRUE(s == ResidencyState::Lost || s == ResidencyState::Host)
        << residencyStateName(s);
  }
  if (caps().asynchronousCompletion)
    RecordProperty("lost_in_flight", lost.load());
}

TEST_P(Behaviour, ReleaseOfALostTensorMakesItHost) {
  if (!caps().residentTensors || !caps().deviceLoss)
    GTEST_SKIP() << "backend declares no device loss";
  DeviceManager &d = device();
  Tensor t = floats(4, "t");
  ASSERT_OK(transferToDeviceSync(d, t));
  d.shutdown();
  ASSERT_OK(d.releaseDeviceTensor(t));
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
}

TEST_P(Behaviour, InjectedFaultsFailTheirOperationAndLeaveStateConsistent) {
  if (!caps().faultInjection || !caps().residentTensors)
    GTEST_SKIP() << "backend declares no fault injection";
  DeviceManager &d = device();
  Tensor t = floats(8, "t");
  ASSERT_OK(d.injectFault({FaultSite::Allocation, 1, ErrorCode::OutOfMemory}));
  EXPECT_CODE(transferToDeviceSync(d, t), ErrorCode::OutOfMemory);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  ASSERT_OK(
      d.injectFault({FaultSite::TransferToDevice, 1, ErrorCode::DeviceError}));
  EXPECT_CODE(transferToDeviceSync(d, t), ErrorCode::DeviceError);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(d.usedMemory(), 0u) << "the failed transfer's memory is freed";
  ASSERT_OK(transferToDeviceSync(d, t));
  ASSERT_OK(d.injectFault(
      {FaultSite::TransferFromDevice, 1, ErrorCode::DeviceError}));
  EXPECT_CODE(transferFromDeviceSync(d, t), ErrorCode::DeviceError);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Device)
      << "a failed read-back leaves the device copy";
  ASSERT_OK(transferFromDeviceSync(d, t));
  ASSERT_OK(addNetworkSync(d, addFunction("f", 8)));
  ExecutionContext ctx;
  Tensor b = floats(8, "b");
  ctx.bindings().bind("a", t);
  ctx.bindings().bind("b", b);
  Tensor &act = ctx.bindings().allocate("act", Type{ElemKind::Float32, {8}});
  ctx.bindings().allocate("sum", Type{ElemKind::Float32, {8}});
  ASSERT_OK(d.injectFault({FaultSite::Run, 1, ErrorCode::DeviceError}));
  EXPECT_CODE(runFunctionSync(d, "f", ctx), ErrorCode::DeviceError);
  EXPECT_EQ(act.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(d.usedMemory(), 0u) << "a failed run frees what it allocated";
  EXPECT_CODE(d.injectFault({FaultSite::Run, 0, ErrorCode::DeviceError}),
              ErrorCode::InvalidArgument);
}

TEST_P(Behaviour, AnInjectedDeviceLossShutsTheDeviceDown) {
  if (!caps().faultInjection || !caps().residentTensors)
    GTEST_SKIP() << "backend declares no fault injection";
  DeviceManager &d = device();
  Tensor kept = floats(4, "kept"), t = floats(4, "t");
  ASSERT_OK(transferToDeviceSync(d, kept));
  ASSERT_OK(
      d.injectFault({FaultSite::TransferToDevice, 1, ErrorCode::DeviceLost}));
  EXPECT_CODE(transferToDeviceSync(d, t), ErrorCode::DeviceLost);
  EXPECT_TRUE(d.isShutDown());
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  EXPECT_EQ(kept.residencySnapshot().state, ResidencyState::Lost);
}

TEST_P(Behaviour, PinnedStorageOutlivesItsDevice) {
  // §1: pinned storage stays valid while a tensor or view holds it, after
  // the device that handed it out is shut down and destroyed. The device
  // is made here, not by device(), so that the test can destroy it.
  DeviceConfig config;
  config.name = GetParam().backend + "-pinned";
  config.parameters = GetParam().parameters;
  auto made = BackendRegistry::instance().create(GetParam().backend, config);
  ASSERT_TRUE(made.hasValue()) << made.takeError().toString();
  std::unique_ptr<DeviceManager> d = std::move(*made);
  Expected<std::shared_ptr<HostMemory>> memory = d->pinnedHostMemory();
  if (!memory) {
    Error e = memory.takeError();
    if (e.code() == ErrorCode::NotSupported)
      GTEST_SKIP() << "backend hands out no pinned memory";
    FAIL() << "pinnedHostMemory(): " << e.toString();
  }
  // Several pinned blocks, one of them larger than a page, so that memory
  // a device maps or pools for them is really used.
  const size_t n = 3000;
  auto pinned = [&](const std::string &name, float base) {
    Expected<Tensor> t =
        Tensor::create(Type{ElemKind::Float32, {n}}, name, *memory);
    EXPECT_TRUE(t.hasValue()) << name;
    if (!t)
      return Tensor();
    auto data = t->mutableHostData<float>();
    for (size_t i = 0; i < n; ++i)
      data[i] = base + float(i);
    return std::move(*t);
  };
  Tensor lost = pinned("lost", 1), mirrored = pinned("mirrored", 5000),
         host = pinned("host", 9000);
  ASSERT_FALSE(lost.isEmpty() || mirrored.isEmpty() || host.isEmpty());
  Tensor view = mirrored.getUnowned({n / 2}, n / 4);
  Capabilities c = d->capabilities();
  bool resident = c.residentTensors && c.deviceLoss;
  if (resident) {
    ASSERT_OK(transferToDeviceSync(*d, lost));
    ASSERT_OK(transferToDeviceSync(*d, mirrored));
    ASSERT_OK(transferFromDeviceSync(*d, mirrored, /*keep=*/true));
    ASSERT_OK(transferToDeviceSync(*d, host));
    ASSERT_OK(transferFromDeviceSync(*d, host, /*keep=*/false));
  }
  d->shutdown();
  d.reset();

  auto expectValues = [&](const Tensor &t, float base, size_t first,
                          size_t count) {
    auto data = t.hostData<float>();
    ASSERT_EQ(data.size(), count) << t.name();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(data[i], base + float(first + i))
          << t.name() << " element " << i << " after its device was destroyed";
  };
  EXPECT_EQ(mirrored.residencySnapshot().state, ResidencyState::Host);
  expectValues(mirrored, 5000, 0, n);
  expectValues(view, 5000, n / 4, n / 2);
  expectValues(host, 9000, 0, n);
  if (resident)
    EXPECT_EQ(lost.residencySnapshot().state, ResidencyState::Lost);
  else
    expectValues(lost, 1, 0, n);
  // The storage can still be written and read, and a Lost tensor refilled.
  std::vector<float> fresh(n);
  for (size_t i = 0; i < n; ++i)
    fresh[i] = 20000 + float(i);
  ASSERT_OK(lost.refillFromHost(std::as_bytes(std::span(fresh))));
  expectValues(lost, 20000, 0, n);
  auto data = host.mutableHostData<float>();
  for (size_t i = 0; i < n; ++i)
    data[i] = 30000 + float(i);
  expectValues(host, 30000, 0, n);
}

TEST_P(Behaviour, WithoutResidentTensorsTransfersAreNotSupported) {
  if (caps().residentTensors)
    GTEST_SKIP() << "backend keeps tensors resident";
  DeviceManager &d = device();
  Tensor t = floats(4, "t");
  EXPECT_CODE(transferToDeviceSync(d, t), ErrorCode::NotSupported);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
}

// Evaluated when GoogleTest registers the tests, after the program chose
// its backends.
INSTANTIATE_TEST_SUITE_P(
    Backends, Behaviour,
    ::testing::ValuesIn(drt::conformance::behaviourCases()),
    [](const auto &info) { return info.param.label; });

} // namespace
