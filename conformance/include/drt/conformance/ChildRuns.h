//===- drt/conformance/ChildRuns.h - Child runs of scenarios -*- C++ -*-===//
//
// A scenario whose step crashes the process or never returns cannot be run
// again in that process, nor can its shrink candidates: each runs in a child
// process instead, this very program started again with --run-scenario, and
// tells how it ended by its exit status. drt-fuzz-to-scenario shrinks its
// crashing inputs this way, and drt-conformance (any program built on
// conformanceProgram, a backend linked in included) the cases it reports
// STUCK or CRASHED.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_CHILDRUNS_H
#define DRT_CONFORMANCE_CHILDRUNS_H

#include "drt/conformance/Scenario.h"
#include "drt/conformance/Shrink.h"

#include <string>
#include <vector>

namespace drt::conformance {

/// The option that starts a program as the child of a child run: the
/// program answers "--run-scenario FILE --backend B [--against A]
/// [--stuck-after-ms MS] [--repeat N] [--plugin LIBRARY]..." with
/// runScenarioAsChild.
inline constexpr const char *RunScenarioOption = "--run-scenario";

/// The child's side: runs the scenario in \p file on \p backend (in lockstep
/// with \p against when not empty) up to \p runs times (for at most 20 s),
/// until a run does not pass, and returns the exit status that tells the
/// parent how the last run ended. A step that gets no progress for \p
/// stuckAfterMs (0: the runner's default) is reported on standard error and
/// ends the process at once; a crash ends it by its signal.
int runScenarioAsChild(const std::string &file, const std::string &backend,
                       const std::string &against, unsigned stuckAfterMs,
                       unsigned runs = 1);

/// How a scenario run in a child process ended.
struct ChildRun {
  enum class Kind { Passed, Diverged, NotRun, Crashed, Hung, Stuck };
  Kind kind = Kind::NotRun;
  /// For a crash: the signal or exit status, and the sanitizer's summary
  /// line when there is one; for a stuck step: the runner's report; for a
  /// run that did not start: why.
  std::string detail;
  /// Runs the child started: of one that did not pass, the number of the
  /// run that failed (what a failure that comes once in many runs costs).
  unsigned runs = 0;
};

/// Where and how children run.
struct ChildRunner {
  std::string backend;
  std::string against;
  /// Plugins the child loads (DRT_PLUGINS reaches it by its environment).
  std::vector<std::string> plugins;
  /// Where a child's standard output and error go (overwritten each run).
  std::string log;
  /// Most seconds a child may take before it is killed and counted Hung.
  int timeoutSeconds = 60;
};

/// Runs the scenario in \p file in a child process of this program (through
/// /proc/self/exe and RunScenarioOption), which counts a step stuck after
/// \p stuckAfterMs without progress (0: the runner's default) and runs the
/// scenario up to \p runs times, until a run does not pass (an interleaving
/// that fails may come once in many runs: timingDependent).
ChildRun runScenarioInChild(const ChildRunner &runner, const std::string &file,
                            unsigned stuckAfterMs = 0, unsigned runs = 1);

/// How the first runs of a failing scenario in child processes ended.
struct FirstChildRuns {
  /// The last child run.
  ChildRun last;
  /// It failed only after a first run that passed, though nothing in it
  /// marks it timingDependent: an interleaving decides it all the same.
  bool flaky = false;
  /// Runs made in all.
  int runs = 0;

  /// The runs a candidate of a shrink gets before it counts as passing:
  /// one unless \p candidate is timingDependent or the scenario was
  /// flaky; then candidateRunsFor the runs the last child needed to fail.
  unsigned candidateRuns(const Scenario &candidate) const;
};

/// Runs \p scenario, written in \p file, in child processes until a run
/// does not pass: SearchRuns times (for up to SearchSeconds) when it is
/// timingDependent, else once and, when that run passes, as often again
/// (\p stuckAfterMs as for runScenarioInChild).
FirstChildRuns runUntilItFails(const ChildRunner &runner,
                               const std::string &file,
                               const Scenario &scenario,
                               unsigned stuckAfterMs = 0);

/// The `--repeat` a replay of \p minimal needs: replayRunsFor the runs a
/// search in child processes (\p minimal written to \p file) needed to
/// fail; 1 when \p minimal is not timingDependent and \p flaky is
/// false.
unsigned replayRuns(const ChildRunner &runner, const std::string &file,
                    const Scenario &minimal, bool flaky, unsigned stuckAfterMs);

/// How long a shrink candidate of a stuck scenario may go without progress
/// before it counts as stuck too: a step that never returns shows within
/// it, where the scenario's first run must wait as long as the runner does
/// to tell such a step from a slow one.
inline constexpr unsigned CandidateStuckAfterMs = 2000;

/// How long a child run of a scenario whose first child runs ended as \p
/// first may go without progress: CandidateStuckAfterMs where a stuck step
/// fails it (a stuck scenario, or one that diverged instead and fails in
/// any way), else no limit (0).
inline unsigned candidateStuckAfterMs(ChildRun::Kind first) {
  return first == ChildRun::Kind::Stuck || first == ChildRun::Kind::Diverged
             ? CandidateStuckAfterMs
             : 0;
}

/// Shrinks \p scenario, whose runs in children ended as \p first (its last
/// Crashed, Hung, Stuck or Diverged), with every candidate written to \p
/// candidateFile and run in a child process of its own
/// (FirstChildRuns::candidateRuns times): a candidate fails when it ends
/// the same way (a crash or a hang for a crash, a stuck step within
/// CandidateStuckAfterMs for a stuck one), or, for a case that aborted the
/// run that found it but diverged in a child, when it fails in any way. \p
/// failure is set to the detail of the last failing candidate. The candidate
/// file is removed after.
ShrinkResult
shrinkInChildren(const Scenario &scenario, const ChildRunner &runner,
                 const FirstChildRuns &first, const std::string &candidateFile,
                 const ShrinkOptions &limits, std::string &failure);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CHILDRUNS_H
