//===- drt/conformance/Runner.h - Scenarios against backends ----*- C++ -*-===//
//
// The one runner: it executes a scenario on a registered backend (or on two
// in lockstep), applies every command to the reference model too, and after
// EVERY step compares the residency state of every tensor and view, host
// contents where readable, device memory in use, live allocations, the
// outcome and the completion callbacks. After the last command it reads back
// every record left in Device state through a tensor covering it whole, then
// tears down and checks that memory is back to its baseline. The first
// divergence names the step, what was expected and what was observed.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_RUNNER_H
#define DRT_CONFORMANCE_RUNNER_H

#include "drt/conformance/Scenario.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace drt::conformance {

/// The first point where a backend and the model (or two backends) differ.
struct Divergence {
  /// 1-based step number; 0 for device setup; past commands.size() for the
  /// final read-back of records left on a device, then teardown.
  size_t step = 0;
  /// The command in text form ("teardown" or "setup" for the pseudo steps).
  std::string command;
  /// The backend that diverged ("" when the suite itself failed).
  std::string backend;
  /// What was compared ("outcome", "state of tensor 'a'", ...).
  std::string what;
  std::string expected;
  std::string observed;

  /// A GoogleTest-like multi-line message.
  std::string toString() const;
};

/// A step the process cannot come back from. Either the scenario stopped
/// making progress: a call into a backend that never returns (a deadlock on
/// the thread that made it, a wait or a loop that never ends), which no
/// shutdown of the devices ends, holding the thread that runs the scenario
/// for good; or a fatal signal struck (a crash inside the backend), where
/// reportCrashesOfScenarios() is in force. The runner reports it, and the
/// process ends.
struct AbortedStep {
  /// The scenario being run (it lives while the report is made).
  const Scenario *scenario = nullptr;
  /// 1-based step number the scenario was at (as in Divergence::step).
  size_t step = 0;
  /// What that step was doing ("ensure-outputs n0", "teardown", ...).
  std::string command;
  /// The backend the step was running on, when known.
  std::string backend;
  /// How long no step made progress, in milliseconds (when stuck).
  unsigned stuckMs = 0;
  /// The fatal signal that struck during the step; 0: it got stuck.
  int signal = 0;

  /// A readable multi-line report.
  std::string toString() const;
  /// "STUCK" or "CRASHED (signal 11, Segmentation fault)".
  std::string verdict() const;
  /// The scenario's commands up to and including the stuck step (all of
  /// them when it was stuck in the parallel block or after the commands).
  Scenario prefix() const;
};

/// How to run a scenario.
struct RunOptions {
  /// The backend under test.
  std::string backend = "fake";
  /// A second backend to run in lockstep (differential mode); "" for none.
  std::string against;
  /// Called with one line per step (observations) when set.
  std::function<void(const std::string &)> trace;
  /// How long to wait for a completion callback, in milliseconds.
  unsigned callbackTimeoutMs = 10000;
  /// How long the linearizability search of a parallel block may take, in
  /// milliseconds, before its verdict is Unknown.
  unsigned linearizabilityBudgetMs = 2000;
  /// Compare each sequential command's written expectation (Command::expect)
  /// with the reference model's outcome, a divergence of "scenario" when
  /// they differ. Off for a scenario whose expectations are not written:
  /// a generated case, whose expectations would be the same model's
  /// outcomes, is annotated only once it fails. Every step is still held
  /// to the model.
  bool checkWrittenExpectations = true;
  /// The first completion callback of each kind of operation (to-device,
  /// from-device, run) on each device asks that device for its accounting
  /// from another thread, and waits up to 200 ms for the answer: a device
  /// that cannot answer while its callback runs holds a lock of its own
  /// across the callback, so a program that calls into it from there
  /// deadlocks (a divergence at the step). Off by default: the question
  /// costs a thread's round trip, a large share of a short case.
  bool askDevicesFromCallbacks = false;
  /// How long a scenario may go without a step's progress before it is
  /// reported stuck (AbortedStep), in milliseconds; 0: twice the callback
  /// timeout, plus the linearizability budget, plus 10 s: longer than any
  /// step waits on a backend that returns from its calls.
  unsigned stuckAfterMs = 0;
  /// Called when a step cannot come back (AbortedStep): on the runner's own
  /// thread when the scenario is stuck, after which the process ends with
  /// status 1 (a handler may end it otherwise first, as a fuzzer that
  /// keeps the input aborts); in the signal handler of a crash, after
  /// which the signal ends the process as it would have (a handler may
  /// replace the process first: drt-conformance turns into its shrinker,
  /// PropertyOptions::shrinkInPlace). When unset, the
  /// report and the scenario up to the step go to standard error. It must
  /// not wait for the stuck thread or the backend.
  std::function<void(const AbortedStep &)> reportAborted;
};

/// The outcome of running one scenario.
struct RunResult {
  /// Why a scenario could not start.
  enum class SetupFailure {
    None,
    /// The scenario itself is not well formed (validateScenario refused it).
    MalformedScenario,
    /// A device could not be created (unknown backend, failing init, a
    /// parameter the backend refuses).
    Device,
  };
  /// Set when the scenario could not start, with setupError.
  SetupFailure setupFailure = SetupFailure::None;
  /// Set when the scenario could not start (unknown backend, failing init).
  std::string setupError;
  /// The first divergence, if any.
  std::optional<Divergence> divergence;
  /// Steps executed (including the failing one).
  size_t steps = 0;
  /// Coverage labels reached and how often. Besides the model's and the
  /// parallel block's, "path:NAME" and "path-overlapped:NAME" for each
  /// internal path the backend under test's devices reported taken, and
  /// entered while another use was inside (DeviceManager::pathUses).
  std::map<std::string, int> labels;
  /// The paths those devices reported as shared between threads
  /// (PathUse::concurrent), taken or not: the overlaps worth steering to.
  std::set<std::string> concurrentPaths;
  /// Residency transitions exercised, "Host -to-device-> Device" to count.
  std::map<std::string, int> transitions;
  /// What the run could not compare, and why: after a parallel block whose
  /// linearizability search gave up (verdict Unknown), the model holds no
  /// state the backend can be held to, so the final read-back and final
  /// check of that backend are left out (teardown is still checked). A run
  /// that passes with entries here passed only what it compared.
  std::vector<std::string> notCompared;
  /// Allocations each device made, as the model counts them.
  std::map<std::string, uint64_t> allocations;
  /// Allocations each device made beyond the most it held at once: each of
  /// them reused memory that an earlier allocation had freed.
  std::map<std::string, uint64_t> slotReuses;

  bool passed() const { return setupError.empty() && !divergence; }
};

/// Installs handlers of the fatal signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
/// SIGABRT) that, when one strikes while runScenario runs in this process,
/// report the step it struck at (an AbortedStep with the signal) through
/// the running scenario's RunOptions::reportAborted, then let the signal end
/// the process as it would have. A report that cannot finish (a crash
/// inside the allocator) is ended after 10 s. Handlers that a backend's
/// libraries install over these later are displaced again each time
/// runScenario starts, has set its devices up, and shuts them down. For
/// programs that run scenarios (drt-conformance, drt-replay); a fuzz target
/// leaves crashes to libFuzzer and the sanitizers, which keep the input.
void reportCrashesOfScenarios();

/// Sets what the handlers of reportCrashesOfScenarios call first, before
/// the report allocates anything: \p prepare makes the process's
/// allocations safe after a crash that struck inside the allocator
/// (serveCrashReportsFromArena, CrashArena.h). Null: none.
void setBeforeCrashReport(void (*prepare)());

/// Runs \p scenario. The expectations the scenario carries are checked
/// against the model first (a disagreement is a divergence of the scenario
/// itself, backend "scenario").
RunResult runScenario(const Scenario &scenario, const RunOptions &options);

/// Returns \p scenario with every step's expectation set to what the model
/// predicts for \p backend's capabilities (used before printing a generated
/// or shrunk scenario).
Scenario annotateExpectations(const Scenario &scenario,
                              const std::string &backend);

/// Returns \p scenario without the commands that name objects which do not
/// exist at that point (what removing a command leaves dangling), with every
/// expectation set to what the model predicts for \p backend: the form the
/// shrinker runs.
Scenario wellFormedScenario(const Scenario &scenario,
                            const std::string &backend);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_RUNNER_H
