//===- DriverFaultTest.cpp - Every OpenCL call fails, once ----------------===//
//
// A workload over the public API (transfers both ways, a run, raw device
// memory, releases) is run once to count the OpenCL calls it makes of each
// kind, through the backend's driver seam. Then, for every kind of call it
// makes, for each of its calls (the first 16 and the last of a kind made
// more often), and for each status a driver
// returns there, a fresh device is created with that call failing
// (`driver-faults`, counted from the first call init() makes) and the
// workload runs again. Whatever fails must fail with a documented Error
// (OutOfMemory or DeviceError naming the OpenCL call, or init's error),
// every callback must come exactly once, every record must be in a
// documented state, contents that come back must be right, and once
// everything is destroyed the device's accounting must be back to zero with
// nothing in flight. The table of what was injected and what it caused is
// printed (docs/reliability.md).
//
//===----------------------------------------------------------------------===//
#include "OpenCLTestSupport.h"

#include "drt/ExecutionContext.h"
#include "drt/Function.h"

#include <CL/cl.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <set>

namespace drt::opencl::testing {
namespace {

constexpr size_t N = 64;

/// What one run of the workload saw.
struct WorkloadResult {
  /// "init" or the operation that failed first, with its Error; empty when
  /// nothing failed.
  std::string firstFailure;
  /// Failures of every operation, in order.
  std::vector<std::string> failures;
  /// Broken promises: a message per violated expectation.
  std::vector<std::string> problems;
  std::vector<uint64_t> calls;
};

/// Waits for one asynchronous operation's callback, which must come exactly
/// once; a callback that never comes is a problem, and the device is shut
/// down to end the operation.
class Completion {
public:
  CompletionCallback callback() {
    return [state = state_](Error e) {
      if (state->calls.fetch_add(1) == 0)
        state->promise.set_value(std::move(e));
    };
  }
  Error wait(DeviceManager &d, std::vector<std::string> &problems,
             const std::string &what) {
    std::future<Error> f = state_->promise.get_future();
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      problems.push_back(what + ": no callback within 20 s");
      d.shutdown();
    }
    return f.get();
  }
  int calls() const { return state_->calls.load(); }

private:
  struct State {
    std::promise<Error> promise;
    std::atomic<int> calls{0};
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

/// OutOfMemory or DeviceError, or InvalidArgument for a buffer size the
/// driver refuses (the backend's documented status mapping).
bool documented(const Error &e) {
  return e.code() == ErrorCode::OutOfMemory ||
         e.code() == ErrorCode::DeviceError ||
         (e.code() == ErrorCode::InvalidArgument &&
          e.message().find("CL_INVALID_BUFFER_SIZE") != std::string::npos);
}

WorkloadResult runWorkload(const ParameterMap &parameters) {
  WorkloadResult out;
  auto device =
      std::make_unique<OpenCLDeviceManager>(configNamed("faulty", parameters));
  if (Error e = device->init()) {
    out.firstFailure = "init: " + e.toString();
    out.failures.push_back(out.firstFailure);
    if (e.code() != ErrorCode::DeviceError &&
        e.code() != ErrorCode::OutOfMemory &&
        e.code() != ErrorCode::InvalidArgument)
      out.problems.push_back("init failed with " + e.toString());
    out.calls = device->driverCalls();
    return out;
  }
  DeviceManager &d = *device;
  std::vector<Completion> completions;
  auto failed = [&](const std::string &op, const Error &e) {
    std::string line = op + ": " + e.toString();
    if (out.firstFailure.empty())
      out.firstFailure = line;
    out.failures.push_back(line);
    if (!documented(e) && e.code() != ErrorCode::DeviceLost)
      out.problems.push_back(op + " failed with an undocumented " +
                             e.toString());
  };
  auto state = [](const Tensor &t) { return t.residencySnapshot().state; };

  Tensor a(ElemKind::Float32, {N}, "a"), b(ElemKind::Float32, {N}, "b"),
      o(ElemKind::Float32, {N}, "o");
  std::vector<float> av(N), bv(N);
  for (size_t i = 0; i < N; ++i) {
    av[i] = float(i);
    bv[i] = float(2 * i + 1);
  }
  fill(a, av);
  fill(b, bv);

  // Upload: Device on success, Host (contents intact) on failure.
  completions.emplace_back();
  d.transferToDevice(a, std::nullopt, completions.back().callback());
  if (Error e = completions.back().wait(d, out.problems, "to-device a")) {
    failed("to-device a", e);
    if (state(a) != ResidencyState::Host)
      out.problems.push_back("a failed upload left a not Host");
    else if (contents<float>(a) != av)
      out.problems.push_back("a failed upload changed a's host contents");
  } else if (state(a) != ResidencyState::Device) {
    out.problems.push_back("a successful upload left a not Device");
  }
  // Read back, keeping the device copy: Mirrored with the right contents,
  // or still Device.
  if (state(a) == ResidencyState::Device) {
    completions.emplace_back();
    d.transferFromDevice(a, false, completions.back().callback());
    if (Error e = completions.back().wait(d, out.problems, "from-device a")) {
      failed("from-device a", e);
      if (state(a) != ResidencyState::Device && !d.isShutDown())
        out.problems.push_back("a failed read-back left a not Device");
    } else if (state(a) != ResidencyState::Mirrored ||
               contents<float>(a) != av) {
      out.problems.push_back("a read-back left a not Mirrored with its "
                             "contents");
    }
  }
  // A run o = a + b; o's contents checked when it comes home.
  Function f("sum");
  Type type{ElemKind::Float32, {N}};
  f.addPlaceholder("x", type).addPlaceholder("y", type).addPlaceholder("o",
                                                                       type);
  f.addNode({OpKind::Add, {"x", "y"}, "o"});
  completions.emplace_back();
  d.addNetwork(f, completions.back().callback());
  bool added = true;
  if (Error e = completions.back().wait(d, out.problems, "add-network")) {
    failed("add-network", e);
    added = false;
  }
  bool ran = false;
  if (added) {
    ExecutionContext ctx;
    ctx.bindings().bind("x", a);
    ctx.bindings().bind("y", b);
    ctx.bindings().bind("o", o);
    completions.emplace_back();
    d.runFunction("sum", ctx, completions.back().callback());
    if (Error e = completions.back().wait(d, out.problems, "run"))
      failed("run", e);
    else
      ran = true;
  }
  if (state(o) == ResidencyState::Device) {
    completions.emplace_back();
    d.transferFromDevice(o, true, completions.back().callback());
    if (Error e = completions.back().wait(d, out.problems, "from-device o")) {
      failed("from-device o", e);
    } else if (ran) {
      std::vector<float> sum = contents<float>(o);
      for (size_t i = 0; i < N; ++i)
        if (sum[i] != av[i] + bv[i]) {
          out.problems.push_back("o[" + std::to_string(i) + "] is " +
                                 std::to_string(sum[i]));
          break;
        }
    }
  }
  // Raw device memory, and a release without read-back.
  if (Expected<DeviceLocation> loc = d.allocateDeviceMemory(256); !loc)
    failed("allocate", loc.takeError());
  else if (Error e = d.releaseDeviceMemory(*loc))
    failed("free", e);
  completions.emplace_back();
  d.transferToDevice(b, std::nullopt, completions.back().callback());
  if (Error e = completions.back().wait(d, out.problems, "to-device b"))
    failed("to-device b", e);
  if (Error e = d.releaseDeviceTensor(b))
    failed("release b", e);
  if (Error e = d.releaseDeviceTensor(a))
    failed("release a", e);
  if (Error e = d.releaseDeviceTensor(o))
    failed("release o", e);
  for (const Error &e : d.takeBackgroundErrors())
    failed("background", e);
  a = Tensor();
  b = Tensor();
  o = Tensor();

  for (size_t i = 0; i < completions.size(); ++i)
    if (completions[i].calls() != 1)
      out.problems.push_back("callback " + std::to_string(i) + " called " +
                             std::to_string(completions[i].calls()) + " times");
  if (d.operationsInFlight() != 0)
    out.problems.push_back(std::to_string(d.operationsInFlight()) +
                           " operation(s) still in flight");
  if (!d.isShutDown() && (d.usedMemory() != 0 || d.liveAllocations() != 0))
    out.problems.push_back(
        "accounting not back to zero: " + std::to_string(d.usedMemory()) +
        " bytes, " + std::to_string(d.liveAllocations()) + " allocation(s)");
  // Shutting down releases the kernels, program, queue and context: those
  // calls fail too, and nothing may be left in flight or in use.
  d.shutdown();
  if (d.operationsInFlight() != 0 || d.usedMemory() != 0)
    out.problems.push_back("shutdown left work in flight or memory in use");
  out.calls = device->driverCalls();
  return out;
}

/// The statuses a driver returns at a call of kind \p call.
std::vector<int32_t> statusesFor(OpenCLCall call) {
  switch (call) {
  case OpenCLCall::CreateBuffer:
    return {CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES,
            CL_INVALID_BUFFER_SIZE};
  case OpenCLCall::EnqueueWriteBuffer:
  case OpenCLCall::EnqueueReadBuffer:
  case OpenCLCall::EnqueueCopyBuffer:
  case OpenCLCall::EnqueueMapBuffer:
  case OpenCLCall::EnqueueNDRangeKernel:
    return {CL_OUT_OF_RESOURCES, CL_MEM_OBJECT_ALLOCATION_FAILURE,
            CL_INVALID_VALUE};
  case OpenCLCall::CommandExecutionStatus:
    return {CL_OUT_OF_RESOURCES, CL_DEVICE_NOT_AVAILABLE};
  default:
    return {CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY, CL_INVALID_VALUE};
  }
}

/// How the devices of a run are configured: transfers direct or through
/// pinned staging, each device with its own context and program (built from
/// source, or from the kept binary); or sharing the process's context and
/// program (the cache's retain calls).
enum class Mode { Direct, Pinned, Shared };

class DriverFaults : public ::testing::TestWithParam<Mode> {};

TEST_P(DriverFaults, EveryCallFailsWithADocumentedErrorAndLeavesNothing) {
  // Pinned: every transfer staged, the workload's small ones included.
  ParameterMap base;
  base["pinned-staging"] = GetParam() == Mode::Pinned ? "1" : "0";
  if (GetParam() == Mode::Pinned)
    base["staging-min-bytes"] = "0";
  // Direct and pinned: each device creates its own context and program,
  // direct from source, pinned from the binary the process kept of an
  // earlier build (program-binaries). Shared: every device finds the
  // context and program an earlier device of the process kept. The first
  // run below makes sure that the binary or the shared program is there,
  // so init's calls are the same for every device of the test either way.
  if (GetParam() != Mode::Shared)
    base["shared-context"] = "0";
  if (GetParam() == Mode::Direct)
    base["program-binaries"] = "0";
  else
    ASSERT_TRUE(runWorkload(base).failures.empty());
  WorkloadResult clean = runWorkload(base);
  ASSERT_TRUE(clean.failures.empty()) << clean.firstFailure;
  ASSERT_TRUE(clean.problems.empty()) << clean.problems.front();
  size_t injected = 0;
  std::set<OpenCLCall> struck;
  for (size_t k = 0; k < NumOpenCLCalls; ++k) {
    OpenCLCall call = OpenCLCall(k);
    uint64_t made = clean.calls[k];
    if (made == 0)
      continue;
    // Every call of the kind (every call site the workload reaches), or the
    // first 16 and the last of a kind made more often.
    std::set<uint64_t> nths = {made};
    for (uint64_t nth = 1; nth <= std::min<uint64_t>(made, 16); ++nth)
      nths.insert(nth);
    for (uint64_t nth : nths) {
      for (int32_t status : statusesFor(call)) {
        ParameterMap p = base;
        std::string plan = std::string(openCLCallName(call)) + ":" +
                           std::to_string(nth) + ":" + std::to_string(status);
        p["driver-faults"] = plan;
        WorkloadResult r = runWorkload(p);
        ++injected;
        // The workload must have made the call it planned to fail.
        if (r.calls.size() == NumOpenCLCalls && r.calls[k] >= nth)
          struck.insert(call);
        for (const std::string &problem : r.problems)
          ADD_FAILURE() << plan << ": " << problem;
        std::printf("driver-fault %s%s -> %s\n", plan.c_str(),
                    GetParam() == Mode::Pinned   ? " (pinned staging)"
                    : GetParam() == Mode::Shared ? " (shared context)"
                                                 : "",
                    r.firstFailure.empty() ? "no visible failure"
                                           : r.firstFailure.c_str());
      }
    }
  }
  // Every kind of call the workload makes was made to fail at least once.
  for (size_t k = 0; k < NumOpenCLCalls; ++k) {
    if (clean.calls[k] > 0) {
      EXPECT_TRUE(struck.count(OpenCLCall(k)))
          << openCLCallName(OpenCLCall(k)) << " never struck";
    }
  }
  std::printf("driver faults injected: %zu, over %zu kinds of call\n", injected,
              struck.size());
}

INSTANTIATE_TEST_SUITE_P(Devices, DriverFaults,
                         ::testing::Values(Mode::Direct, Mode::Pinned,
                                           Mode::Shared),
                         [](const ::testing::TestParamInfo<Mode> &info) {
                           return info.param == Mode::Direct   ? "direct"
                                  : info.param == Mode::Pinned ? "pinned"
                                                               : "shared";
                         });

TEST(DriverFaults, PlansAreCheckedAndNamed) {
  auto parsed = parseDriverFaults(
      "clCreateBuffer:2:CL_OUT_OF_RESOURCES,command-execution-status:1:-14");
  ASSERT_TRUE(parsed) << parsed.takeError().toString();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].call, OpenCLCall::CreateBuffer);
  EXPECT_EQ((*parsed)[0].nth, 2u);
  EXPECT_EQ((*parsed)[0].status, CL_OUT_OF_RESOURCES);
  EXPECT_EQ((*parsed)[1].call, OpenCLCall::CommandExecutionStatus);
  EXPECT_EQ((*parsed)[1].status, -14);
  for (const char *bad : {"clNoSuchCall:1:-5", "clCreateBuffer:0:-5",
                          "clCreateBuffer:1:0", "clCreateBuffer:1",
                          "clCreateBuffer:x:-5", "clCreateBuffer:1:CL_NOPE"}) {
    auto r = parseDriverFaults(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.takeError().code(), ErrorCode::InvalidArgument) << bad;
  }
  // A device refuses a bad plan before it calls OpenCL.
  auto device = std::make_unique<OpenCLDeviceManager>(
      configNamed("bad-plan", {{"driver-faults", "clCreateBuffer:0:-5"}}));
  Error e = device->init();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("driver-faults"), std::string::npos)
      << e.toString();
  // A failed build whose log cannot be read either: init still says which
  // call failed (the one call site the workload cannot reach).
  auto unbuilt = std::make_unique<OpenCLDeviceManager>(configNamed(
      "unbuilt", {{"shared-context", "0"},
                  {"driver-faults", "clBuildProgram:1:CL_BUILD_PROGRAM_FAILURE,"
                                    "clGetProgramBuildInfo:1:-5"}}));
  Error build = unbuilt->init();
  EXPECT_EQ(build.code(), ErrorCode::DeviceError) << build.toString();
  EXPECT_NE(build.message().find("clBuildProgram failed with "
                                 "CL_BUILD_PROGRAM_FAILURE"),
            std::string::npos)
      << build.toString();
  EXPECT_EQ(unbuilt->driverCalls()[size_t(OpenCLCall::GetProgramBuildInfo)],
            1u);
  // And at run time: nth 0 and a success status are refused.
  auto live = openDevice(configNamed("live"));
  ASSERT_TRUE(live);
  EXPECT_EQ(live->injectDriverFault({OpenCLCall::CreateBuffer, 0, -5}).code(),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(live->injectDriverFault({OpenCLCall::CreateBuffer, 1, 0}).code(),
            ErrorCode::InvalidArgument);
  ASSERT_FALSE(live->injectDriverFault(
      {OpenCLCall::CreateBuffer, 1, CL_MEM_OBJECT_ALLOCATION_FAILURE}));
  Expected<DeviceLocation> loc = live->allocateDeviceMemory(64);
  ASSERT_FALSE(loc);
  Error refused = loc.takeError();
  EXPECT_EQ(refused.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(refused.message().find("clCreateBuffer failed with "
                                   "CL_MEM_OBJECT_ALLOCATION_FAILURE"),
            std::string::npos)
      << refused.toString();
  EXPECT_EQ(live->usedMemory(), 0u);
  EXPECT_EQ(live->liveAllocations(), 0u);
}

} // namespace
} // namespace drt::opencl::testing
