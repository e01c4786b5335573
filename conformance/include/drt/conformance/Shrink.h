//===- drt/conformance/Shrink.h - Minimal failing scenarios -----*- C++ -*-===//
//
// The one shrinker: it takes any failing scenario (generated, decoded from
// fuzzer bytes, or written by hand) and a predicate that runs it, and returns
// a scenario that still fails and is shorter and simpler. It removes runs of
// commands (the commands a removal leaves dangling go with it), then
// simplifies what remains: moves that only rename a tensor go (its later
// commands name the move's source), shapes together (every tensor, view and
// network of one shape at once, so that a run's tensors keep its network's
// shape and two networks can come to share one) and element kinds together
// towards f32, sizes towards the small end of the input space, values towards
// zeros and small exact ones, networks towards fewer nodes and runs towards
// fewer networks and bindings, offsets towards zero, faults towards the first
// operation, devices towards fewer and plainer ones.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_SHRINK_H
#define DRT_CONFORMANCE_SHRINK_H

#include "drt/conformance/Scenario.h"

#include <chrono>
#include <cstddef>
#include <functional>

namespace drt::conformance {

/// Limits of one shrink.
struct ShrinkOptions {
  /// Most candidate scenarios to run.
  size_t maxAttempts = 3000;
  /// Most seconds to spend; the best scenario so far is kept.
  double maxSeconds = 30;
};

/// What a shrink produced.
struct ShrinkResult {
  Scenario scenario;
  /// Candidates run, and how many of them still failed (and were kept).
  size_t attempts = 0;
  size_t accepted = 0;
};

/// True when \p s has a parallel block or a command issued without waiting:
/// a backend that gets the order of events wrong may fail it on some runs
/// only, so one passing run does not clear it.
bool timingDependent(const Scenario &s);

/// Runs a timing-dependent shrink candidate gets before it counts as
/// passing: a race that shows in a quarter of the runs of a candidate is
/// missed by 25 runs once in a thousand candidates (by 10, once in
/// eighteen).
inline constexpr int TimingShrinkRuns = 25;

/// Runs a timing-dependent scenario gets before a tool judges that it
/// passes (and the least `--repeat` its replay command asks for).
inline constexpr int TimingReplayRuns = 100;

/// Most runs, and most time, a search for a failure that depends on an
/// interleaving spends before it counts the scenario as passing: such a
/// failure may come once in a thousand runs, and only a failing case is
/// searched, once.
inline constexpr unsigned SearchRuns = 100000;
inline constexpr std::chrono::seconds SearchSeconds{20};

/// Most runs a shrink candidate gets (candidateRunsFor).
inline constexpr unsigned MaxCandidateRuns = 2000;

/// Most runs a replay command asks for (replayRunsFor): a scenario that
/// passes them all, on the reference backend, should take seconds.
inline constexpr unsigned MaxReplayRuns = 10000;

/// Calls \p fails (one run of a scenario) until it returns true, at most
/// SearchRuns times and, after the first, for at most SearchSeconds; returns
/// the number of the call that returned true, or 0 when none did.
unsigned runsUntilItFails(const std::function<bool()> &fails);

/// The runs a timing-dependent shrink candidate gets when the failure took
/// \p runsToFail runs to come (0: it did not come): three times as many,
/// at least TimingShrinkRuns and at most MaxCandidateRuns, so that a
/// failure that comes once in hundreds of runs is not taken for a pass in
/// every candidate.
unsigned candidateRunsFor(unsigned runsToFail);

/// The limits of a shrink whose candidates get \p candidateRuns runs each:
/// the default, or 120 s instead of 30 when that is more than
/// TimingShrinkRuns (every candidate that passes costs as many runs).
ShrinkOptions shrinkLimitsFor(unsigned candidateRuns);

/// The `--repeat` a timing-dependent minimal scenario's replay command asks
/// for when its failure took \p runsToFail runs to come: ten times as many,
/// at least TimingReplayRuns and at most MaxReplayRuns, so that the replay
/// fails nearly every time it is run.
unsigned replayRunsFor(unsigned runsToFail);

/// Shrinks \p failing, for which \p fails returns true. Every candidate is
/// first made well formed by \p normalize (which drops commands naming
/// objects that no longer exist and sets every expectation to what the
/// reference model predicts); \p fails is only asked about candidates that
/// are well formed.
ShrinkResult
shrinkScenario(const Scenario &failing,
               const std::function<Scenario(const Scenario &)> &normalize,
               const std::function<bool(const Scenario &)> &fails,
               const ShrinkOptions &options = {});

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_SHRINK_H
