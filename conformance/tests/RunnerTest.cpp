//===- RunnerTest.cpp - The runner, the model and differential mode -------===//
#include "drt/conformance/Runner.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/fake/FakeDevice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>
#include <thread>
#include <utility>

using namespace drt;
using namespace drt::conformance;

namespace {

Scenario parse(const std::string &text) {
  ParseResult r = parseScenario(text);
  if (auto *e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << e->toString();
    return {};
  }
  return std::get<Scenario>(r);
}

RunResult
run(const std::string &text, const std::string &backend = "fake",
    const std::string &against = "",
    unsigned callbackTimeoutMs = RunOptions().callbackTimeoutMs,
    unsigned linearizabilityBudgetMs = RunOptions().linearizabilityBudgetMs) {
  RunOptions options;
  options.backend = backend;
  options.against = against;
  options.callbackTimeoutMs = callbackTimeoutMs;
  options.linearizabilityBudgetMs = linearizabilityBudgetMs;
  return runScenario(parse(text), options);
}

/// Registers, once, a test backend: the fake device as \p Device changes
/// it, under \p name.
template <typename Device> const std::string &testBackend(std::string name) {
  static const std::string registered = [&] {
    BackendInfo info = fake::fakeBackendInfo();
    info.name = std::move(name);
    info.factory =
        [](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
      return std::make_unique<Device>(config);
    };
    info.testOnly = true;
    BackendRegistry::instance().add(info);
    return info.name;
  }();
  return registered;
}

/// A device whose pinned memory cannot be made (a driver failure, not the
/// absence of pinned memory).
class PinnedMemoryFails final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~PinnedMemoryFails() override { shutdown(); }
  Expected<std::shared_ptr<HostMemory>> pinnedHostMemory() override {
    return makeError(ErrorCode::DeviceError,
                     "pinnedHostMemory: the driver refused the mapping");
  }
};

/// A device that shuts itself down once its second upload has completed:
/// every record on it changes in a step that names one tensor.
class ShutsDownAfterTheSecondUpload final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ShutsDownAfterTheSecondUpload() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    bool second = ++uploads_ == 2;
    FakeDevice::copyToDevice(dst, src, bytes, [this, second, done](Error e) {
      done(std::move(e));
      if (second)
        shutdown();
    });
  }

private:
  int uploads_ = 0;
};

/// A device whose reads from the device also land in the previous read's
/// destination (a stale destination kept for the next copy).
class ReadBackAlsoWritesTheLastDestination final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackAlsoWritesTheLastDestination() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    std::byte *last = std::exchange(last_, dst);
    FakeDevice::copyFromDevice(src, dst, bytes,
                               [last, dst, bytes, done](Error e) {
                                 if (last && e.isSuccess())
                                   std::memcpy(last, dst, bytes);
                                 done(std::move(e));
                               });
  }

private:
  std::byte *last_ = nullptr;
};

/// A device whose read-back also writes the byte \p Offset away from the
/// destination's start (negative: before it; past the end otherwise).
template <std::ptrdiff_t Offset>
class ReadBackWritesOutside final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackWritesOutside() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, [dst, done](Error e) {
      dst[Offset] = std::byte{0};
      done(std::move(e));
    });
  }
};

/// A device whose uploads and read-backs both leave out the last 4 bytes:
/// a read-back alone would show bytes the upload never sent, but the two
/// together round-trip every byte the host storage still holds.
class TransfersDropTheTail final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~TransfersDropTheTail() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes > 4 ? bytes - 4 : bytes,
                             std::move(done));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes > 4 ? bytes - 4 : bytes,
                               std::move(done));
  }
};

/// A device whose second allocation hands out the first one's location
/// again while it is still in use (the second block is taken, and counted,
/// but never used).
class SecondAllocationReusesTheFirst final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~SecondAllocationReusesTheFirst() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> loc = FakeDevice::allocate(bytes);
    if (!loc)
      return loc;
    if (++allocations_ == 1)
      first_ = *loc;
    return allocations_ == 2 ? first_ : *loc;
  }

private:
  int allocations_ = 0;
  DeviceLocation first_;
};

/// A device whose copies from the device complete twice.
class ReadBackCompletesTwice final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackCompletesTwice() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, [done](Error e) {
      done(e);
      done(std::move(e));
    });
  }
};

TEST(Runner, ViewsObserveTheOwnersResidency) {
  RunResult r = run(R"(device d0
create a f32 [8] fill=1
view v a [4] at=4
to-device v d0 -> error InvalidArgument
to-device a d0
read v -> violation host-access-while-device
from-device a d0 keep
read v
write v 3
read a
)");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.steps, 9u);
  EXPECT_EQ(r.transitions["Host -to-device-> Device"], 1);
  EXPECT_EQ(r.transitions["Device -from-device-> Mirrored"], 1);
  EXPECT_EQ(r.transitions["Mirrored -write-> Host"], 1);
}

// Labels are counted by the strings they are built from and reported by
// their text; transitions are found for every record of a sweep, those the
// step names and those it does not, and a record freed while resident ends
// in "freed".
TEST(Runner, CountsLabelsByTextAndTheTransitionsOfEveryRecord) {
  RunResult r = run(R"(device d0
create a f32 [4]
create b f32 [4]
create c f32 [4]
to-device b d0
to-device a d0
to-device c d0
to-device a d0
from-device c d0 keep
move-construct m b
to-device b d0 -> violation use-of-moved-from
release b d0 -> violation use-of-moved-from
destroy m
shutdown d0
)");
  ASSERT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["to-device"], 5);
  EXPECT_EQ(r.labels["to-device@Host"], 3);
  EXPECT_EQ(r.labels["to-device@Device"], 1);
  EXPECT_EQ(r.labels["to-device@empty"], 1);
  EXPECT_EQ(r.labels["to-device-already-Device"], 1);
  EXPECT_EQ(r.labels["outcome-violation use-of-moved-from"], 2);
  EXPECT_EQ(r.labels["last-reference-releases-Device"], 1);
  EXPECT_EQ(r.transitions["Host -to-device-> Device"], 3);
  EXPECT_EQ(r.transitions["Device -from-device-> Mirrored"], 1);
  EXPECT_EQ(r.transitions["Device -destroy-> freed"], 1);
  EXPECT_EQ(r.transitions["Device -shutdown-> Lost"], 1);
  EXPECT_EQ(r.transitions["Mirrored -shutdown-> Host"], 1);
  EXPECT_EQ(r.transitions.size(), 5u);
}

/// A device that reports three paths: a shared one it takes on every
/// upload, a shared one it never takes, and one of its own uploads take
/// with another inside it (as a path of two threads would be).
class ReportsPaths final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReportsPaths() override { shutdown(); }
  std::vector<PathUse> pathUses() const override {
    return {upload_.read(), idle_.read(), nested_.read()};
  }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    PathCounter::Scope use = upload_.enter();
    {
      PathCounter::Scope outer = nested_.enter();
      PathCounter::Scope inner = nested_.enter();
    }
    FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
  }

private:
  PathCounter upload_{"upload", true}, idle_{"idle", true},
      nested_{"nested", false};
};

/// A device whose read-backs return to their caller only once their
/// completion has freed what they released (or after 200 ms, for one that
/// keeps its copy), and which frees slowly there: the framework frees a
/// released record's location inside the read-back's completion, before it
/// begins what comes next, so the caller goes on while nothing is in flight
/// and the location is not yet free.
class FreesSlowlyInReadBackCompletions final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~FreesSlowlyInReadBackCompletions() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      freed_ = false;
    }
    FakeDevice::copyFromDevice(src, dst, bytes,
                               [done = std::move(done)](Error e) {
                                 inReadBackCompletion = true;
                                 done(std::move(e));
                                 inReadBackCompletion = false;
                               });
    std::unique_lock<std::mutex> lock(mutex_);
    freeing_.wait_for(lock, std::chrono::milliseconds(200),
                      [this] { return freed_; });
  }
  Error free(DeviceLocation location) override {
    if (inReadBackCompletion) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        freed_ = true;
      }
      freeing_.notify_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return FakeDevice::free(location);
  }

private:
  static thread_local bool inReadBackCompletion;
  std::mutex mutex_;
  std::condition_variable freeing_;
  bool freed_ = false;
};
thread_local bool FreesSlowlyInReadBackCompletions::inReadBackCompletion =
    false;

TEST(Runner, TheHostManagerChoosesOnlyOnceEveryUnwaitedCommandIsWaitedFor) {
  // The move of t1's record to d0 reads it back from d1, frees it there and
  // then uploads it to d0: while the free takes its time nothing is in
  // flight, yet d1 still holds the bytes, so the host manager would choose
  // d0 where the model, with every command done, says d1. (Found on an
  // NVIDIA GPU, where a completion thread delivers every callback.)
  const std::string &backend = testBackend<FreesSlowlyInReadBackCompletions>(
      "frees-slowly-in-read-back-completions");
  RunResult r = run(R"(device d0 async=1 max-delay-us=0
device d1 async=1 max-delay-us=0
create t0 f32 [1]
view t1 t0 [1]
to-device t0 d1
to-device t1 d0 &
add-network n0 d1 f32 [1] o0=scale(x,2)
)",
                    backend);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
}

TEST(Runner, BackendPathsBecomeLabelsOnceAScenario) {
  const std::string &backend = testBackend<ReportsPaths>("reports-paths");
  RunResult r = run(R"(device d0
device d1
create a f32 [4]
create b f32 [4]
to-device a d0
to-device b d1
to-device a d1
)",
                    backend);
  ASSERT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  // Taken on both devices, counted once; never taken, no label.
  EXPECT_EQ(r.labels["path:upload"], 1);
  EXPECT_EQ(r.labels.count("path-overlapped:upload"), 0u);
  EXPECT_EQ(r.labels.count("path:idle"), 0u);
  EXPECT_EQ(r.labels["path:nested"], 1);
  EXPECT_EQ(r.labels["path-overlapped:nested"], 1);
  // The shared paths, taken or not; the one of its own is not.
  EXPECT_EQ(r.concurrentPaths, (std::set<std::string>{"idle", "upload"}));
  // A backend that reports none gets no path label.
  RunResult plain = run("device d0\ncreate a f32 [4]\nto-device a d0\n");
  for (const auto &[label, n] : plain.labels)
    EXPECT_NE(label.rfind("path", 0), 0u) << label;
  EXPECT_TRUE(plain.concurrentPaths.empty());
}

TEST(Runner, AWrongExpectationIsReportedAgainstTheModel) {
  RunResult r = run("device d0\ncreate a f32 [4]\nrelease a d0 -> error "
                    "InvalidArgument\n");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 2u);
  EXPECT_EQ(r.divergence->backend, "scenario");
  EXPECT_EQ(r.divergence->expected, "the model's ok");
}

TEST(Runner, UnwrittenExpectationsLeaveEveryStepToTheModel) {
  // A generated case runs before its expectations are written: the ones a
  // command carries are not compared, while every step is still held to
  // the model (the violation the model predicts for 'read a' is checked).
  RunOptions options;
  options.checkWrittenExpectations = false;
  RunResult r = runScenario(parse("device d0\ncreate a f32 [4]\n"
                                  "release a d0 -> error InvalidArgument\n"
                                  "to-device a d0\nread a\n"),
                            options);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString() : "");
  EXPECT_EQ(r.labels["outcome-violation host-access-while-device"], 1);
}

TEST(Runner, AnAbortedStepIsReportedWithTheScenarioUpToIt) {
  Scenario s = parse("device d0\ncreate a f32 [4]\nto-device a d0\n"
                     "view b a [4]\n|1 read a\n|2 from-device b d0 keep\n");
  AbortedStep stuck;
  stuck.scenario = &s;
  stuck.step = 2;
  stuck.command = "to-device a d0";
  stuck.backend = "fake";
  stuck.stuckMs = 31000;
  Scenario prefix = stuck.prefix();
  ASSERT_EQ(prefix.commands.size(), 2u);
  EXPECT_EQ(printCommand(prefix.commands.back()), "to-device a d0");
  EXPECT_EQ(prefix.devices, s.devices);
  std::string report = stuck.toString();
  EXPECT_EQ(report.rfind("step 2: to-device a d0\n", 0), 0u) << report;
  EXPECT_NE(report.find("backend:  fake"), std::string::npos) << report;
  EXPECT_NE(report.find("no progress for 31 s"), std::string::npos) << report;
  EXPECT_EQ(stuck.verdict(), "STUCK");
  // A fatal signal at the same step: named with its number and meaning.
  stuck.signal = SIGSEGV;
  EXPECT_EQ(stuck.verdict().rfind("CRASHED (signal 11, ", 0), 0u)
      << stuck.verdict();
  report = stuck.toString();
  EXPECT_NE(report.find(stuck.verdict() + " during the step"),
            std::string::npos)
      << report;
  EXPECT_EQ(stuck.prefix().commands.size(), 2u);
  // In the parallel block, or after the commands (read-back, teardown):
  // every command, branches included.
  for (size_t step : {4u, 5u, 9u}) {
    stuck.step = step;
    EXPECT_EQ(stuck.prefix().commands.size(), s.commands.size()) << step;
  }
}

TEST(Runner, UnknownBackendIsASetupError) {
  RunResult r = run("device d0\ncreate a f32 [4]\n", "no-such-backend");
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.setupError.find("no-such-backend"), std::string::npos);
}

TEST(Runner, RunsComputeExactResultsAndStayResident) {
  RunResult r = run(R"(device d0
create x i32 [4] fill=3
create y i32 [4] fill=4
create o i32 [4]
add-network n d0 i32 [4] o=mul(x,y)
run n x=x y=y o=o
read o -> violation host-access-while-device
ensure-outputs n
read o
)");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString() : "");
  EXPECT_GE(r.labels["run-leaves-outputs-resident"], 1);
  EXPECT_GE(r.labels["ensure-outputs-brings-back"], 1);
}

TEST(Runner, DifferentialFakeAgainstAsyncFake) {
  RunResult r = run(R"(device d0 async=1 seed=5
device d1 async=1 seed=9
create a f32 [4] fill=2
to-device a d0
to-device a d1
from-device a d1 keep
to-device a d0
shutdown d0
read a -> violation host-access-while-lost
refill a 3
read a
)",
                    "fake", "fake");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString() : "");
}

TEST(Runner, TraceShowsEveryStep) {
  RunOptions options;
  std::vector<std::string> lines;
  options.trace = [&](const std::string &l) { lines.push_back(l); };
  RunResult r = runScenario(parse("device d0\ncreate a f32 [4]\nto-device a "
                                  "d0\n"),
                            options);
  EXPECT_TRUE(r.passed());
  // Two commands and the final read-back of the record left on d0.
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[1].find("tensor a: Device on d0"), std::string::npos);
  EXPECT_NE(lines[1].find("[1 callback]"), std::string::npos);
  EXPECT_NE(lines[2].find("final read-back: from-device a d0 keep"),
            std::string::npos)
      << lines[2];
  EXPECT_NE(lines[2].find("tensor a: Mirrored on d0"), std::string::npos);
}

TEST(Runner, FinalReadBackChecksResultsLeftOnTheDevice) {
  // The output of a run on a view at an offset stays on the device; only the
  // read-back after the last command shows that the backend ignored the
  // offset.
  const char *text = R"(device d0
create a f32 [8] fill=1
view v a [4] at=4
to-device a d0
add-network n d0 f32 [4] o=scale(x,2)
create o f32 [4]
run n x=v o=o
)";
  EXPECT_TRUE(run(text).passed());
  RunResult r = run(text, "mutant:ignores-view-offsets");
  ASSERT_TRUE(r.divergence);
  // Step 7 reads back a, step 8 o.
  EXPECT_EQ(r.divergence->step, 8u);
  EXPECT_EQ(r.divergence->command.rfind("final read-back: from-device o", 0),
            0u)
      << r.divergence->toString();
  EXPECT_NE(r.divergence->what.find("host contents of tensor 'o'"),
            std::string::npos)
      << r.divergence->toString();
}

TEST(Runner, ABackendThatCompletesTwiceIsADivergence) {
  // The framework calls the caller back once and keeps the backend's second
  // completion as a background error, which the runner reports.
  RunResult r = run("device d0\ncreate a f32 [4]\nto-device a d0\n",
                    "mutant:callback-twice");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 2u);
  EXPECT_EQ(r.divergence->what, "takeBackgroundErrors() of device 'd0'");
  EXPECT_NE(r.divergence->observed.find("more than once"), std::string::npos)
      << r.divergence->toString();
}

TEST(Runner, MissingCallbackIsReportedAtOnce) {
  // The mutant drops the callback of a failing copy. A synchronous device
  // must call back before the call returns, so the runner does not wait.
  const unsigned timeoutMs = 60000;
  auto started = std::chrono::steady_clock::now();
  RunResult r = run(R"(device d0
create a f32 [4]
inject-fault d0 to-device nth=1 DeviceError
to-device a d0 -> error DeviceError
)",
                    "mutant:callback-never-on-error", "", timeoutMs);
  auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 3u);
  EXPECT_EQ(r.divergence->what, "completion callbacks");
  EXPECT_EQ(r.divergence->expected, "1 call(s)");
  EXPECT_EQ(r.divergence->observed, "0 call(s)");
  EXPECT_LT(waited, std::chrono::milliseconds(timeoutMs));
}

TEST(Runner, AStagingCopyThatNeverCompletesFailsTheRunInsteadOfHanging) {
  // The run's input copy never completes on a synchronous device: the
  // framework fails the run rather than block, and the operation left in
  // flight is the divergence.
  RunResult r = run(R"(device d0
create x f32 [4] fill=1
create o f32 [4]
add-network n d0 f32 [4] o=scale(x,3)
inject-fault d0 to-device nth=1 DeviceError
run n x=x o=o -> error DeviceError
)",
                    "mutant:callback-never-on-error");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 5u);
  EXPECT_EQ(r.divergence->what, "operationsInFlight() of device 'd0' between "
                                "steps")
      << r.divergence->toString();
}

TEST(Runner, ACommandThatBlocksForEverIsEndedAndReported) {
  // A run on an asynchronous device stages its input (a move from d1); the
  // copy's completion is dropped, so runFunction would wait for ever. The
  // runner's watchdog shuts the devices down, which ends the wait.
  RunResult r = run(R"(device d0 async=1 seed=3
device d1 async=1 seed=4
create x f32 [4] fill=1
create o f32 [4]
to-device x d1
add-network n d0 f32 [4] o=scale(x,3)
inject-fault d0 to-device nth=1 DeviceError
run n x=x o=o -> error DeviceError
)",
                    "mutant:callback-never-on-error", "", 200);
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 6u);
  EXPECT_EQ(r.divergence->what, "the command's return")
      << r.divergence->toString();
}

TEST(Runner, ASynchronousHelperOnADroppedCompletionFailsInsteadOfBlocking) {
  // ensureOutputsAvailable reads back through transferFromDeviceSync; the
  // synchronous device drops the failing read's completion, and the helper
  // reports that instead of waiting for ever.
  RunResult r = run(R"(device d0
create x f32 [4] fill=1
create o f32 [4]
add-network n d0 f32 [4] o=scale(x,3)
to-device x d0
run n x=x o=o
inject-fault d0 from-device nth=1 DeviceError
ensure-outputs n -> error DeviceError
)",
                    "mutant:callback-never-on-error");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 7u);
  EXPECT_NE(r.divergence->observed.find("never completed"), std::string::npos)
      << r.divergence->toString();
}

TEST(Runner, CommandsIssuedFromCallbacksHaveTheOutcomesOfProgramOrder) {
  const std::string text = R"(device d0
device d1
create a f32 [64] fill=3
create b f32 [16] fill=5
to-device a d0
from-device a d0 release in-callback
to-device b d0
from-device b d0 release
to-device b d0 in-callback
to-device a d1
release a d1 in-callback
from-device b d0 keep
to-device b d1 in-callback
to-device a d1
shutdown d1 in-callback
read a -> violation host-access-while-lost
)";
  for (const char *async : {"", "async=1"}) {
    std::string devices =
        std::string(async).empty()
            ? text
            : std::regex_replace(text, std::regex("(device d[01])"),
                                 "$1 async=1 max-delay-us=2000");
    RunResult r = run(devices);
    EXPECT_TRUE(r.passed()) << async << ": " << r.divergence->toString();
    EXPECT_EQ(r.labels["issued-in-callback"], 4) << async;
    EXPECT_EQ(r.labels["shutdown-in-callback"], 1) << async;
  }
  // A device that loses an upload issued from inside one of its own
  // completions fails at the upload's step, and only there.
  RunResult r = run(text, "mutant:drops-uploads-issued-from-callbacks");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 7u);
  EXPECT_EQ(r.divergence->what, "completion callbacks");
  EXPECT_EQ(r.divergence->observed, "0 call(s)");
  std::string plain = std::regex_replace(text, std::regex(" in-callback"), "");
  EXPECT_TRUE(
      run(plain, "mutant:drops-uploads-issued-from-callbacks").passed());
}

TEST(Runner, AccountingIsComparedWhileUploadsAreInFlight) {
  // The release comes while the upload of b, issued without waiting, is
  // still on its way (delays of up to 200 ms): the bytes it frees count
  // at once, so the runner compares accounting before it waits for b.
  std::string text = R"(device d0 async=1 max-delay-us=200000
create a f32 [256] fill=1
to-device a d0
create b f32 [64] fill=2
to-device b d0 &
release a d0
)";
  EXPECT_TRUE(run(text).passed());
  RunResult r = run(text, "test:counts-frees-behind-pending-work");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 5u);
  EXPECT_EQ(r.divergence->what, "usedMemory() of device 'd0' while step 4, "
                                "issued without waiting, is pending");
  EXPECT_EQ(r.divergence->expected, "256 bytes");
  EXPECT_EQ(r.divergence->observed, "1280 bytes");
  // Once it has waited, the device has reclaimed the bytes: the same
  // release after the upload completes passes on the mutant.
  std::string waited = std::regex_replace(text, std::regex(" &"), "");
  EXPECT_TRUE(run(waited, "test:counts-frees-behind-pending-work").passed());
}

TEST(Runner, AccountingIsComparedWhileRunsAreInFlight) {
  // The run, issued without waiting, binds only tensors resident on its
  // device: it allocates and frees nothing, so the release beside it
  // counts at once whether it has run yet or not (delays of up to 200 ms).
  std::string text = R"(device d0 async=1 max-delay-us=200000
add-network n d0 f32 [16] y=scale(x,2)
create x f32 [16] fill=1
create y f32 [16] fill=0
create a f32 [256] fill=2
to-device x d0
to-device y d0
to-device a d0
run n x=x y=y &
release a d0
)";
  EXPECT_TRUE(run(text).passed());
  RunResult r = run(text, "test:counts-frees-behind-pending-runs");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 9u);
  EXPECT_EQ(r.divergence->what, "usedMemory() of device 'd0' while step 8, "
                                "issued without waiting, is pending");
  EXPECT_EQ(r.divergence->expected, "128 bytes");
  EXPECT_EQ(r.divergence->observed, "1152 bytes");
  std::string waited = std::regex_replace(text, std::regex(" &"), "");
  EXPECT_TRUE(run(waited, "test:counts-frees-behind-pending-runs").passed());
}

TEST(Runner, ACommandAfterAViolationIsIssuedByTheScenario) {
  // The step before has no callback to issue it from: the program goes on.
  RunResult r = run(R"(device d0
create a f32 [4] fill=1
move-construct b a
to-device a d0 -> violation use-of-moved-from
to-device b d0 in-callback
from-device b d0 keep
)");
  EXPECT_TRUE(r.passed()) << r.divergence->toString();
}

/// Uploads issued from inside one of the device's completions, on the thread
/// delivering it, take half a second before they start.
class SlowUploadsFromCallbacks final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~SlowUploadsFromCallbacks() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (delivering == this)
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    FakeDevice::copyToDevice(dst, src, bytes, delivered(std::move(done)));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, delivered(std::move(done)));
  }

private:
  static thread_local const SlowUploadsFromCallbacks *delivering;
  CompletionCallback delivered(CompletionCallback done) {
    return [this, done = std::move(done)](Error e) {
      const SlowUploadsFromCallbacks *outer = std::exchange(delivering, this);
      done(std::move(e));
      delivering = outer;
    };
  }
};
thread_local const SlowUploadsFromCallbacks
    *SlowUploadsFromCallbacks::delivering = nullptr;

TEST(Runner, ACallFromACallbackThatDoesNotReturnIsReportedAtItsStep) {
  const std::string &backend =
      testBackend<SlowUploadsFromCallbacks>("test:slow-uploads-from-callbacks");
  RunResult r = run(R"(device d0 async=1
create a f32 [4] fill=1
to-device a d0
from-device a d0 release
to-device a d0 in-callback
)",
                    backend, "", 200);
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 4u);
  EXPECT_NE(r.divergence->what.find("made from inside the completion callback"),
            std::string::npos)
      << r.divergence->toString();
  EXPECT_EQ(r.divergence->observed, "still running after 200 ms");
}

TEST(Runner, AnOperationThatNeverCompletesIsReportedAfterTheTimeout) {
  // On an asynchronous device the dropped completion leaves the operation
  // in flight: only the callback timeout ends the wait.
  RunResult r = run(R"(device d0 async=1 seed=3
create a f32 [4]
inject-fault d0 to-device nth=1 DeviceError
to-device a d0 -> error DeviceError
)",
                    "mutant:callback-never-on-error", "", 200);
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 3u);
  EXPECT_EQ(r.divergence->what, "completion callbacks");
  EXPECT_EQ(r.divergence->observed, "0 call(s)");
}

TEST(Runner, EachDeviceIsHeldToItsOwnCapabilities) {
  // d0 keeps nothing resident, d1 does: the model must not apply d0's
  // capabilities to d1 (or the other way round).
  RunResult r = run(R"(device d0 resident=0
device d1
create a f32 [4] fill=1
to-device a d0 -> error NotSupported
alloc l d0 16 -> error NotSupported
to-device a d1
create o f32 [4]
add-network n d0 f32 [4] o=scale(x,2)
run n x=a o=o
read o
read a
alloc m d1 16
free m d1
)");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  // The run on d0 brought its input home from d1 and left its output on
  // host.
  EXPECT_GE(r.labels["run-copies-outputs-to-host"], 1);
  EXPECT_GE(r.labels["run-input-moved"], 1);
}

TEST(Runner, TheModelsOwnFailureNamesTheCommandAndTheModel) {
  DeviceSpec d0;
  d0.name = "d0";
  Model model({d0}, Capabilities{});
  ParseResult p = parseScenario("device d0\ncreate a f32 [4]\n");
  ASSERT_TRUE(std::holds_alternative<Scenario>(p));
  model.apply(std::get<Scenario>(p).commands.back());
  // A device the model was not made with: the scenario's validation keeps
  // such a command from the runner, so only a defect of the model's own
  // bookkeeping reaches it there. Whatever it throws comes out as
  // ModelFailure, naming the command, for the runner to blame the suite.
  Command c;
  c.kind = CommandKind::ToDevice;
  c.target = "a";
  c.device = "d9";
  try {
    model.apply(c);
    ADD_FAILURE() << "the model applied a to-device to an unknown device";
  } catch (const ModelFailure &e) {
    EXPECT_NE(std::string(e.what()).find("drt's reference model failed on "
                                         "'to-device a d9'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Runner, TheModelTakesEachDevicesTraits) {
  DeviceSpec d0, d1;
  d0.name = "d0";
  d1.name = "d1";
  Model model({d0, d1}, [](const DeviceSpec &spec) {
    DeviceTraits t;
    t.capabilities.residentTensors = spec.name == "d1";
    t.capabilities.faultInjection = spec.name == "d0";
    t.maximumMemory = spec.name == "d0" ? 0 : 32;
    return t;
  });
  auto step = [&](const std::string &line) {
    ParseResult p = parseScenario("device d0\ndevice d1\n" + line);
    EXPECT_TRUE(std::holds_alternative<Scenario>(p)) << line;
    return model.apply(std::get<Scenario>(p).commands.back()).outcome;
  };
  EXPECT_EQ(step("create a f32 [4]\n"), Outcome::ok());
  EXPECT_EQ(step("create a f32 [4]\nto-device a d0\n"),
            Outcome::error(ErrorCode::NotSupported));
  EXPECT_EQ(step("create a f32 [4]\nto-device a d1\n"), Outcome::ok());
  EXPECT_EQ(step("inject-fault d1 run nth=1 DeviceError\n"),
            Outcome::error(ErrorCode::NotSupported));
  EXPECT_EQ(step("inject-fault d0 run nth=1 DeviceError\n"), Outcome::ok());
  // d1 enforces the 32 bytes it reported; 16 are in use.
  EXPECT_EQ(step("alloc l d1 17\n"), Outcome::error(ErrorCode::OutOfMemory));
  EXPECT_EQ(step("alloc l2 d1 16\n"), Outcome::ok());
}

TEST(Runner, ADeviceWithoutABudgetHasItsBackendsDefault) {
  // The fake device's default budget is 1 GiB: one byte more is
  // OutOfMemory, and the expectations the model writes say so.
  const char *text = "device d0\nalloc l d0 1073741825 -> error OutOfMemory\n";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  Scenario unannotated = parse("device d0\nalloc l d0 1073741825\n");
  Scenario annotated = annotateExpectations(unannotated, "fake");
  EXPECT_EQ(annotated.commands[0].expect,
            Outcome::error(ErrorCode::OutOfMemory));
  // A budget given in the scenario is the one enforced.
  annotated = annotateExpectations(
      parse("device d0 budget=2147483648\nalloc l d0 1073741825\n"), "fake");
  EXPECT_EQ(annotated.commands[0].expect, Outcome::ok());
}

TEST(Runner, TheConfigurationOfTheBackendUnderTestDoesNotReachThePartner) {
  if (!BackendRegistry::instance().find("opencl"))
    GTEST_SKIP() << "the OpenCL backend is not built";
  // "async" is the fake device's alone: the OpenCL partner would refuse it.
  Scenario s = configureScenario(parse(R"(device d0
device d1
create a f32 [4] fill=2
to-device a d0
to-device a d1
read a -> violation host-access-while-device
)"),
                                 "fake", {{"async", "1"}, {"seed", "4"}});
  EXPECT_EQ(s.devices[0].parameters.at("fake:async"), "1");
  RunOptions options;
  options.backend = "fake";
  options.against = "opencl";
  RunResult r = runScenario(s, options);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  // Given to OpenCL itself, it is refused with the parameters it knows.
  options.backend = "opencl";
  options.against = "";
  r = runScenario(configureScenario(s, "opencl", {{"async", "1"}}), options);
  EXPECT_NE(r.setupError.find("unknown parameter 'async'"), std::string::npos)
      << r.setupError;
}

} // namespace

TEST(Runner, ADeviceOfAnotherBackendSitsBesideTheBackendUnderTest) {
  // d0 keeps nothing resident (the configuration of the backend under test);
  // ref is a fake device whatever the scenario runs on, and the
  // configuration does not reach it: the run on d0 brings its input home
  // from ref.
  Scenario s = configureScenario(parse(R"(device d0
device ref backend=fake
create a f32 [4] fill=1
to-device a d0 -> error NotSupported
to-device a ref
create o f32 [4]
add-network n d0 f32 [4] o=scale(x,2)
run n x=a o=o
read o
read a
)"),
                                 "fake", {{"resident", "0"}});
  EXPECT_EQ(s.devices[0].parameters.at("fake:resident"), "0");
  EXPECT_TRUE(s.devices[1].parameters.empty());
  EXPECT_NE(printScenario(s).find("device ref backend=fake\n"),
            std::string::npos)
      << printScenario(s);
  RunOptions options;
  RunResult r = runScenario(s, options);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_GE(r.labels["run-input-moved-across-backends"], 1);
  EXPECT_GE(r.labels["run-copies-outputs-to-host"], 1);

  // A device naming a backend that is not registered is a setup error that
  // names both.
  r = run("device d0\ndevice x backend=no-such-backend\n");
  EXPECT_NE(r.setupError.find("device 'x' of backend 'no-such-backend'"),
            std::string::npos)
      << r.setupError;
}

TEST(Runner, APartnerWithOtherCapabilitiesIsHeldToItsOwn) {
  if (!BackendRegistry::instance().find("opencl"))
    GTEST_SKIP() << "the OpenCL backend is not built";
  // The fake device without resident tensors, in lockstep with OpenCL,
  // which keeps them: the same scenario, each side checked against what it
  // must do (its own model), none of it a false failure.
  Scenario s = configureScenario(parse(R"(device d0
create a f32 [4] fill=3
to-device a d0 -> error NotSupported
read a
create o f32 [4]
add-network n d0 f32 [4] o=scale(x,2)
run n x=a o=o
read o
)"),
                                 "fake", {{"resident", "0"}});
  RunOptions options;
  options.backend = "fake";
  options.against = "opencl";
  std::vector<std::string> trace;
  options.trace = [&](const std::string &line) { trace.push_back(line); };
  RunResult r = runScenario(s, options);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  // OpenCL placed the tensor on its device, where the fake device refused;
  // the final read-back brought OpenCL's run output home.
  auto saw = [&](const std::string &prefix, const std::string &part) {
    return std::any_of(trace.begin(), trace.end(), [&](const std::string &l) {
      return l.rfind(prefix, 0) == 0 && l.find(part) != std::string::npos;
    });
  };
  EXPECT_TRUE(saw("[fake]", "to-device a d0"))
      << ::testing::PrintToString(trace);
  EXPECT_TRUE(saw("[opencl]", "final read-back"))
      << ::testing::PrintToString(trace);
}

TEST(Runner, AParallelBlockNoOrderExplainsIsADivergence) {
  // Branch commands carry no written outcome: only the linearizability
  // check compares them with the model. A 64-byte upload to a 32-byte
  // budget is OutOfMemory in every order; the mutant lets it through.
  const char *text = R"(device d0 budget=32
create a f32 [16]
create b f32 [4]
view a1 a [16]
view b2 b [4]
|1 to-device a1 d0
|2 read b2
)";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["parallel-block"], 1);
  EXPECT_EQ(r.labels["linearized"], 1);
  r = run(text, "mutant:ignores-budget");
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->what, "linearizability of the parallel branches");
  EXPECT_NE(r.divergence->observed.find("to-device a1 d0 => ok"),
            std::string::npos)
      << r.divergence->toString();
}

/// A device whose runs take 300 ms before they compute, holding the memory
/// the framework allocated for them, and whose allocations of 8 KiB (the
/// upload beside the run) wait 50 ms first: that upload always meets the
/// run under way. With \p RefusesBesideARun, it refuses them with
/// OutOfMemory while a run is under way, whatever its budget allows.
template <bool RefusesBesideARun>
class RunHoldsItsMemory final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunHoldsItsMemory() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    if (bytes == 8192) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (RefusesBesideARun && running_)
        return makeError(ErrorCode::OutOfMemory,
                         "allocate: refused while a run is under way");
    }
    return FakeDevice::allocate(bytes);
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    running_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    running_ = false;
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  std::atomic<bool> running_{false};
};

TEST(Runner, AnUploadRefusedForTheMemoryARunHoldsBesideItIsExplained) {
  // The run holds its input copy and its output (8 KiB) while it runs; the
  // upload of 8 KiB beside it does not fit 13 KiB then, though it does
  // after the run (which leaves its 4 KiB output), and the run does not
  // fit after it: no order of the two explains "both ok but the upload
  // refused", except that a run holds memory while it runs (semantics §5).
  const std::string blockOn = R"(add-network n d0 f32 [1024] o=copy(x)
create x f32 [1024] fill=1
create o f32 [1024]
create u f32 [2048] fill=2
|1 run n x=x o=o
|2 to-device u d0
)";
  RunResult r = run("device d0 budget=13312\n" + blockOn,
                    testBackend<RunHoldsItsMemory<false>>("test:run-holds"));
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["linearized"], 1);
  // Where the budget fits both at once, the run's memory cannot be what
  // was missing: a refusal beside it is a divergence.
  r = run("device d0 budget=65536\n" + blockOn,
          testBackend<RunHoldsItsMemory<true>>("test:refuses-beside-a-run"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->what, "linearizability of the parallel branches");
  EXPECT_NE(r.divergence->observed.find("to-device u d0 => error OutOfMemory"),
            std::string::npos)
      << r.divergence->toString();
}

TEST(Runner, BranchesRunNetworksOfTheirOwnAtTheSameTime) {
  // Each branch runs a network over tensors of its own. On a device whose
  // runs share one set of kernel arguments without a lock, a run that
  // starts while the other sleeps computes over the other's buffers: no
  // order explains the outcomes.
  const char *text = R"(device d0
add-network n0 d0 f32 [16] o0=scale(x,2)
add-network n1 d0 f32 [16] o0=relu(x)
create a f32 [16] fill=1
create b f32 [16]
create c f32 [16] fill=2
create d f32 [16]
|1 run n0 x=a o0=b
|1 from-device b d0 keep
|2 run n1 x=c o0=d
|2 from-device d d0 keep
)";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["linearized"], 1);
  // The two runs overlap when both branches reach them together: the
  // threads start at once, but the machine decides.
  std::optional<Divergence> found;
  for (int attempt = 0; attempt < 50 && !found; ++attempt)
    found = run(text, "mutant:run-shares-kernel-arguments").divergence;
  ASSERT_TRUE(found);
  EXPECT_EQ(found->what, "linearizability of the parallel branches")
      << found->toString();
}

TEST(Runner, ARunInABranchUsesNetworksAndTensorsOfThatBranchOnly) {
  auto problem = [](const char *text) {
    ParseResult r = parseScenario(text);
    const ParseError *e = std::get_if<ParseError>(&r);
    return e ? e->toString() : std::string("parsed");
  };
  EXPECT_EQ(problem(R"(device d0
add-network n0 d0 f32 [4] o0=relu(x)
create a f32 [4]
create b f32 [4]
create c f32 [4]
create d f32 [4]
|1 run n0 x=a o0=b
|2 run n0 x=c o0=d
)"),
            "8:1: expected a well-formed scenario: step 7 (run): network "
            "'n0' is used by branches 1 and 2: a network's context belongs "
            "to one branch");
  EXPECT_EQ(problem(R"(device d0
add-network n0 d0 f32 [4] o0=relu(x)
create a f32 [4]
create b f32 [4]
|1 read a
|2 run n0 x=a o0=b
)"),
            "6:1: expected a well-formed scenario: step 5 (run): tensor 'a' "
            "is used by branches 1 and 2: a tensor belongs to one branch "
            "(give each branch a view)");
}

TEST(Runner, ABranchDestroysItsTensorsWhileOthersRun) {
  // Branch 1 destroys the tensor it uploaded, which a view of branch 2
  // shares a record with, and a tensor of its own: the record stays on the
  // device for the view, read back with the block's end, and the names go.
  const char *text = R"(device d0
create a f32 [16] fill=1
create b f32 [16] fill=2
create c f32 [4] fill=3
view a2 a [16]
|1 to-device a d0
|1 destroy a
|1 destroy c
|2 to-device b d0
|2 from-device a2 d0 keep
|2 read b
)";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["linearized"], 1);
  // A name a branch destroyed is named by no later command of the block.
  ParseResult parsed = parseScenario(R"(device d0
create a f32 [4]
create b f32 [4]
|1 destroy a
|1 read a
|2 read b
)");
  const ParseError *e = std::get_if<ParseError>(&parsed);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->toString(), "5:1: expected a well-formed scenario: step 4 "
                           "(read): unknown tensor 'a'");
}

TEST(Runner, OnlyAFaultThatKeepsTheDeviceMayFollowALoneReadBackInFlight) {
  auto problem = [](const std::string &pending, const std::string &next) {
    ParseResult r = parseScenario("device d0\ncreate a f32 [4]\n"
                                  "create b f32 [4]\nto-device a d0\n" +
                                  pending + "\n" + next + "\n");
    const ParseError *e = std::get_if<ParseError>(&r);
    return e ? e->toString() : std::string("parsed");
  };
  const std::string fault = "inject-fault d0 from-device nth=1 DeviceError";
  EXPECT_EQ(problem("from-device a d0 keep &", fault), "parsed");
  // A device loss, a shutdown, or a fault behind another pending command
  // would act on work whose timing decides the outcome.
  for (const auto &[pending, next] :
       std::vector<std::pair<std::string, std::string>>{
           {"from-device a d0 keep &",
            "inject-fault d0 from-device nth=1 DeviceLost"},
           {"from-device a d0 keep &", "shutdown d0"},
           {"to-device b d0 &", fault}})
    EXPECT_NE(problem(pending, next).find("is still pending"),
              std::string::npos)
        << pending << " / " << next << ": " << problem(pending, next);
  // Two commands pending: the read-back is not alone.
  ParseResult two = parseScenario(
      "device d0\ncreate a f32 [4]\ncreate b f32 [4]\nto-device a d0\n"
      "from-device a d0 keep &\nto-device b d0 &\n" +
      fault + "\n");
  EXPECT_TRUE(std::holds_alternative<ParseError>(two));
}

TEST(Runner, ATransferIssuedWithoutWaitingIsCheckedAtItsOwnStep) {
  // Its outcome is known only after the next command that waits, and is
  // reported at the step that issued it.
  const char *text = R"(device d0 budget=32
create a f32 [16]
create b f32 [4]
to-device a d0 & -> error OutOfMemory
read b
)";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["issued-without-waiting"], 1);
  r = run(text, "mutant:ignores-budget");
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 3u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what, "outcome") << r.divergence->toString();
}

/// Two branches that each leave a record on d0.
const char *const TwoUploads = R"(device d0
create a f32 [4] fill=1
create b f32 [4] fill=2
view a1 a [4]
view b2 b [4]
|1 to-device a1 d0
|2 to-device b2 d0
)";

TEST(Runner, AParallelBlockTheSearchCannotJudgeLeavesItsStateUncompared) {
  // With no time for the search the verdict is Unknown: the model is where
  // the block began (a and b on the host) while the device holds both, so
  // comparing the final state would report a divergence that no order of
  // the block explains or refutes. The run says what it left out.
  RunResult r = run(TwoUploads, "fake", "", RunOptions().callbackTimeoutMs, 0);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["linearizability-unknown"], 1);
  EXPECT_EQ(r.labels["linearized"], 0);
  ASSERT_EQ(r.notCompared.size(), 1u);
  EXPECT_NE(r.notCompared[0].find("the linearizability search gave up"),
            std::string::npos)
      << r.notCompared[0];
  // With time, the same run is judged and compared whole.
  r = run(TwoUploads);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["linearized"], 1);
  EXPECT_TRUE(r.notCompared.empty());
}

TEST(Runner, AnUnjudgedParallelBlockStillHasItsTeardownChecked) {
  // What no order of the block changes is still compared: the mutant keeps
  // freed bytes in usedMemory(), which teardown shows.
  RunResult r = run(TwoUploads, "mutant:accounting-drift", "",
                    RunOptions().callbackTimeoutMs, 0);
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.labels["linearizability-unknown"], 1);
  EXPECT_EQ(r.divergence->what, "usedMemory() of device 'd0'")
      << r.divergence->toString();
  EXPECT_NE(r.divergence->command.find("teardown"), std::string::npos)
      << r.divergence->toString();
}

TEST(Runner, ABranchCommandThatBlocksForEverIsEndedAndReported) {
  // Branch 1's upload fails and its completion is dropped, so the record
  // stays busy and the read-back after it would wait for ever; the branch's
  // watchdog shuts the devices down, which ends the wait.
  RunResult r = run(R"(device d0 async=1 seed=3
create a f32 [4]
create b f32 [4]
view a1 a [4]
view b2 b [4]
inject-fault d0 to-device nth=1 DeviceError
|1 to-device a1 d0
|1 from-device a1 d0 keep
|2 read b2
)",
                    "mutant:callback-never-on-error", "", 200);
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->command, "the parallel block");
  EXPECT_EQ(r.divergence->what, "the return of '|1 from-device a1 d0 keep'")
      << r.divergence->toString();
  EXPECT_EQ(r.divergence->observed,
            "it blocked; the devices were shut down to end it");
}

TEST(Runner, ASweepReadsARecordTheStepDidNotNameOnceItChanged) {
  // Tensor a is on the device, unchanged since the last sweep read it; the
  // upload of b then changes a's record too. The sweep (in name order)
  // must read a again rather than reuse its last reading, and so report a
  // before b and before the device's own state.
  const char *text = R"(device d0
create a f32 [4]
create b f32 [4]
to-device a d0
to-device b d0
)";
  RunResult r = run(text, testBackend<ShutsDownAfterTheSecondUpload>(
                              "test:shuts-down-after-the-second-upload"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 4u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what, "residency of tensor 'a'")
      << r.divergence->toString();
}

TEST(Runner, ASweepComparesTheHostContentsOfTensorsTheStepDidNotName) {
  // The read-back of b also lands in a's host bytes, which no step since
  // a's own read-back has named: the step that does it is reported, and a
  // with it.
  RunResult r = run(R"(device d0
create a f32 [4] fill=random:1
create b f32 [4] fill=random:2
to-device a d0
from-device a d0 release
to-device b d0
from-device b d0 keep
)",
                    testBackend<ReadBackAlsoWritesTheLastDestination>(
                        "test:read-back-also-writes-the-last-destination"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 6u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what, "host contents of tensor 'a' at byte 0")
      << r.divergence->toString();
}

TEST(Runner, AReadBackThatLeavesStaleHostBytesIsReportedAtItsStep) {
  // While the runner runs, the host bytes of a record that becomes Device
  // are overwritten (semantics §2): a backend whose upload and read-back
  // both drop the tail is caught at the read-back, though the host storage
  // held the uploaded bytes all along.
  RunResult r =
      run(R"(device d0
create a f32 [4] fill=random:1
to-device a d0
from-device a d0 keep
)",
          testBackend<TransfersDropTheTail>("test:transfers-drop-the-tail"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 3u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what, "host contents of tensor 'a' at byte 12")
      << r.divergence->toString();
  EXPECT_EQ(r.divergence->observed, "cd cd cd cd") << r.divergence->toString();
}

TEST(Runner, AReadBackThatWritesOutsideTheHostBytesIsReportedAtItsStep) {
  // Host storage has guard bytes while the runner runs: a backend that
  // writes past the end of the buffer it reads back into, or before its
  // start, is caught at that step, though the tensor's own bytes are right.
  const char *text = R"(device d0
create a f32 [4] fill=random:1
to-device a d0
from-device a d0 keep
)";
  RunResult past = run(text, testBackend<ReadBackWritesOutside<20>>(
                                 "test:read-back-writes-past-the-end"));
  ASSERT_TRUE(past.divergence) << past.setupError;
  EXPECT_EQ(past.divergence->step, 3u) << past.divergence->toString();
  EXPECT_EQ(past.divergence->what, "takeBackgroundErrors() of device 'd0'");
  EXPECT_NE(past.divergence->observed.find(
                "copyFromDevice of device 'd0' wrote outside the host bytes "
                "of tensor 'a' (16 bytes): the byte at offset 20 (5 past its "
                "end) changed"),
            std::string::npos)
      << past.divergence->toString();

  RunResult before = run(text, testBackend<ReadBackWritesOutside<-3>>(
                                   "test:read-back-writes-before-the-start"));
  ASSERT_TRUE(before.divergence) << before.setupError;
  EXPECT_EQ(before.divergence->step, 3u) << before.divergence->toString();
  EXPECT_NE(
      before.divergence->observed.find("the byte 3 before its start changed"),
      std::string::npos)
      << before.divergence->toString();
}

TEST(Runner, AWriteAnywhereOnTheLastPageOfLargeHostStorageIsReported) {
  // Large host storage ends with a guard that runs to the end of its page
  // (the pages after it fault): a write 1,000 bytes past the end, beyond the
  // 64 guard bytes of small storage, is caught at its step.
  RunResult r = run(R"(device d0
create a f32 [16384] fill=random:1
to-device a d0
from-device a d0 keep
)",
                    testBackend<ReadBackWritesOutside<65536 + 1000>>(
                        "test:read-back-writes-1000-past-the-end"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 3u) << r.divergence->toString();
  EXPECT_NE(r.divergence->observed.find(
                "wrote outside the host bytes of tensor 'a' (65536 bytes): "
                "the byte at offset 66536 (1001 past its end) changed"),
            std::string::npos)
      << r.divergence->toString();
}

/// A device whose read-backs throw (as std::vector::at does past the end)
/// instead of reporting an Error.
class ReadBackThrows final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackThrows() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation, std::byte *, uint64_t bytes,
                      CompletionCallback) override {
    throw std::out_of_range("index " + std::to_string(bytes));
  }
};

TEST(Runner, AnExceptionThatEscapesTheBackendIsADivergenceAtItsStep) {
  const std::string &backend =
      testBackend<ReadBackThrows>("test:read-back-throws");
  RunResult r = run("device d0\ncreate a f32 [4] fill=1\nto-device a d0\n"
                    "from-device a d0 keep\nread a\n",
                    backend);
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 3u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->command, "from-device a d0 keep");
  EXPECT_EQ(r.divergence->backend, backend);
  EXPECT_EQ(r.divergence->observed,
            "an exception escaped: std::out_of_range: index 16");
  // On a branch's thread: the parallel block reports it, naming the
  // command.
  RunResult branch = run("device d0\ncreate a f32 [4] fill=1\n"
                         "create c f32 [4]\nto-device a d0\n"
                         "|1 from-device a d0 keep\n|2 to-device c d0\n",
                         backend);
  ASSERT_TRUE(branch.divergence) << branch.setupError;
  EXPECT_EQ(branch.divergence->command, "the parallel block");
  EXPECT_EQ(branch.divergence->what,
            "the calls of '|1 from-device a d0 keep' into the backend")
      << branch.divergence->toString();
  EXPECT_EQ(branch.divergence->observed,
            "an exception escaped: std::out_of_range: index 16");
  // Once the read-back is left to the runner: its final read-back.
  RunResult last =
      run("device d0\ncreate a f32 [4] fill=1\nto-device a d0\n", backend);
  ASSERT_TRUE(last.divergence) << last.setupError;
  EXPECT_EQ(last.divergence->step, 3u) << last.divergence->toString();
  EXPECT_EQ(last.divergence->command,
            "final read-back of the records left on a device");
}

/// A device whose runs complete while it holds the lock its accounting
/// takes (recursive, so that the completing thread itself goes through).
class RunCallsBackUnderItsLock final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunCallsBackUnderItsLock() override { shutdown(); }
  size_t liveAllocations() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return FakeDevice::liveAllocations();
  }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  mutable std::recursive_mutex mutex_;
};

TEST(Runner, ADeviceThatCallsBackUnderItsOwnLockIsReportedAtTheStep) {
  // Asked to, the first callback of each kind of operation on a device asks
  // the device for its accounting from another thread: a device that cannot
  // answer while its callback runs would deadlock a program that calls into
  // it from there. Uploads call back freely here; the run does not. Not
  // asked to, the runner does not notice.
  const char *text = R"(device d0
create a f32 [4] fill=1
create b f32 [4]
add-network n d0 f32 [4] o=copy(x)
to-device a d0
run n x=a o=b
)";
  const std::string &locked = testBackend<RunCallsBackUnderItsLock>(
      "test:run-calls-back-under-its-lock");
  EXPECT_TRUE(run(text, locked).passed());
  RunOptions options;
  options.askDevicesFromCallbacks = true;
  EXPECT_TRUE(runScenario(parse(text), options).passed());
  options.backend = locked;
  RunResult r = runScenario(parse(text), options);
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 5u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what,
            "the accounting of device 'd0', asked from another thread while "
            "the step's completion callback ran")
      << r.divergence->toString();
}

TEST(Runner, ASweepFindsANewLocationThatAnotherRecordHolds) {
  // b's upload is handed a's block, which a still holds: the upload's step
  // is reported, though a record that kept its location (a's) is one of
  // the two.
  RunResult r = run(R"(device d0
create a f32 [4]
create b f32 [4]
to-device a d0
read b
to-device b d0
)",
                    testBackend<SecondAllocationReusesTheFirst>(
                        "test:second-allocation-reuses-the-first"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 5u) << r.divergence->toString();
  EXPECT_EQ(r.divergence->what, "location of tensor 'b'")
      << r.divergence->toString();
  EXPECT_EQ(r.divergence->expected, "distinct from every other record's");
}

TEST(Runner, ABackgroundErrorOfAParallelBlocksReadBackIsReportedAsItself) {
  // The block's read-back completes twice; the framework keeps the second
  // completion as a background error, which names the device (not a failed
  // search for an order of the branches).
  RunResult r = run(TwoUploads, testBackend<ReadBackCompletesTwice>(
                                    "test:read-back-completes-twice"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->command, "the parallel block");
  EXPECT_EQ(r.divergence->what, "takeBackgroundErrors() of device 'd0'")
      << r.divergence->toString();
}

TEST(Runner, AParallelBlockInDifferentialModeIsCountedOnce) {
  // Each backend runs the block in a lane of its own; the coverage is the
  // backend under test's.
  RunResult r = run(TwoUploads, "fake", "fake");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["parallel-block"], 1);
  EXPECT_EQ(r.labels["linearized"], 1);
  EXPECT_EQ(r.labels["linearized-per-record"], 1);
}

TEST(Runner, APinnedStorageRequestTheDeviceFailsIsReported) {
  // A device without pinned memory gives pageable storage; one that fails
  // to make it is not hidden behind pageable storage.
  const char *text = "device d0\ncreate a f32 [4] pinned=d0\nread a\n";
  RunResult r = run(text);
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["create-pinned-fell-back-to-pageable"], 1);
  EXPECT_EQ(r.labels["create-pinned"], 0);
  r = run(text, testBackend<PinnedMemoryFails>("test:pinned-memory-fails"));
  ASSERT_TRUE(r.divergence) << r.setupError;
  EXPECT_EQ(r.divergence->step, 1u);
  EXPECT_EQ(r.divergence->what,
            "pinned storage of tensor 'a' from device 'd0'");
  EXPECT_NE(r.divergence->observed.find("DeviceError"), std::string::npos)
      << r.divergence->toString();
  EXPECT_NE(r.divergence->observed.find("refused the mapping"),
            std::string::npos)
      << r.divergence->toString();
  if (!BackendRegistry::instance().find("opencl"))
    return;
  r = run(text, "opencl");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.labels["create-pinned"], 1);
}

TEST(Runner, SetupFailuresSayWhetherTheScenarioOrADeviceFailed) {
  // The shrinker drops candidates the harness refuses by this kind, not by
  // the wording of the message.
  const char *text = "device d0\ncreate a f32 [4]\n";
  Scenario malformed = parse(text);
  Command read;
  read.kind = CommandKind::Read;
  read.target = "no-such-tensor";
  malformed.commands.push_back(read);
  RunResult r = runScenario(malformed, RunOptions());
  EXPECT_EQ(r.setupFailure, RunResult::SetupFailure::MalformedScenario);
  EXPECT_FALSE(r.setupError.empty());
  r = run(text, "no-such-backend");
  EXPECT_EQ(r.setupFailure, RunResult::SetupFailure::Device);
  r = run(text);
  EXPECT_EQ(r.setupFailure, RunResult::SetupFailure::None);
}

TEST(Model, APinnedCreateFitsOnlyWhereItsDeviceIsDeclared) {
  // A candidate the shrinker made by dropping a device must not keep a
  // create whose pinned storage names it.
  Scenario s = parse("device d0\ncreate a f32 [4] pinned=d0\n");
  Model m(s.devices, Capabilities{});
  Command create = s.commands[0];
  EXPECT_TRUE(commandFitsModel(create, m));
  create.device = "d1";
  EXPECT_FALSE(commandFitsModel(create, m));
  Scenario dropped = wellFormedScenario(
      parse("device d0\ndevice d1\ncreate a f32 [4] pinned=d1\nread a\n"),
      "fake");
  dropped.devices.pop_back();
  EXPECT_TRUE(wellFormedScenario(dropped, "fake").commands.empty());
}

TEST(Model, ACopyKeepsItsOwnBytesWhenEitherIsWritten) {
  // Copies share a record's bytes until one writes them (the
  // linearizability check copies the model for every order it tries).
  Scenario s = parse("device d0\n"
                     "create a i32 [4] fill=1\n"
                     "write a 2\n"
                     "write a 3\n");
  Model m(s.devices, Capabilities{});
  m.apply(s.commands[0]);
  auto bytesOf = [](const Model &model) {
    const ModelRecord *r = model.recordOf("a");
    std::span<const uint8_t> b = r->data.bytes();
    return std::vector<uint8_t>(b.begin(), b.end());
  };
  std::vector<uint8_t> first = bytesOf(m);
  ASSERT_EQ(first, patternBytes(ElemKind::Int32, 1, 0, 4));
  Model copy = m;
  copy.apply(s.commands[1]);
  EXPECT_EQ(bytesOf(m), first) << "the copy's write left the original alone";
  EXPECT_EQ(bytesOf(copy), patternBytes(ElemKind::Int32, 2, 0, 4));
  Model second = m;
  m.apply(s.commands[2]);
  EXPECT_EQ(bytesOf(second), first) << "the original's write left a copy alone";
  EXPECT_EQ(bytesOf(m), patternBytes(ElemKind::Int32, 3, 0, 4));
  EXPECT_EQ(bytesOf(copy), patternBytes(ElemKind::Int32, 2, 0, 4));
}

TEST(Model, TheNamesStampChangesWithTheNamesOnly) {
  Scenario s = parse("device d0\n"
                     "create a f32 [4] fill=1\n"
                     "to-device a d0\n"
                     "view v a [2]\n"
                     "destroy v\n");
  Model m(s.devices, Capabilities{});
  std::vector<uint64_t> stamps = {m.tensorNamesStamp()};
  std::vector<uint64_t> recordStamps = {m.recordsStamp()};
  for (const Command &c : s.commands) {
    m.apply(c);
    stamps.push_back(m.tensorNamesStamp());
    recordStamps.push_back(m.recordsStamp());
  }
  EXPECT_NE(stamps[1], stamps[0]) << "create adds a name";
  EXPECT_EQ(stamps[2], stamps[1]) << "to-device changes no name";
  EXPECT_NE(stamps[3], stamps[2]) << "view adds a name";
  EXPECT_NE(stamps[4], stamps[3]) << "destroy removes one";
  EXPECT_NE(recordStamps[1], recordStamps[0]) << "create adds a record";
  EXPECT_EQ(recordStamps[4], recordStamps[1])
      << "to-device, a view and its destruction add or remove no record";
  Command destroy;
  destroy.kind = CommandKind::Destroy;
  destroy.target = "a";
  m.apply(destroy);
  EXPECT_NE(m.recordsStamp(), recordStamps[4])
      << "destroying the last tensor of a record removes it";
  Model copy = m;
  EXPECT_NE(copy.tensorNamesStamp(), m.tensorNamesStamp())
      << "a copy's entries are elsewhere: its stamp is its own";
  Model assigned;
  assigned = m;
  EXPECT_NE(assigned.tensorNamesStamp(), m.tensorNamesStamp());
  EXPECT_NE(assigned.tensorNamesStamp(), copy.tensorNamesStamp());
  EXPECT_NE(copy.recordsStamp(), m.recordsStamp());
}
