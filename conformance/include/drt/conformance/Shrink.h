//===- drt/conformance/Shrink.h - Minimal failing scenarios -----*- C++ -*-===//
//
// The one shrinker: it takes any failing scenario (generated, decoded from
// fuzzer bytes, or written by hand) and a predicate that runs it, and returns
// a scenario that still fails and is shorter and simpler. It removes runs of
// commands (the commands a removal leaves dangling go with it), then
// simplifies what remains: moves that only rename a tensor go (its later
// commands name the move's source), sizes towards the small end of the input
// space, values towards zeros and small exact ones, networks towards fewer
// nodes and runs towards fewer bindings, offsets towards zero, faults towards
// the first operation, devices towards fewer and plainer ones.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_SHRINK_H
#define DRT_CONFORMANCE_SHRINK_H

#include "drt/conformance/Scenario.h"

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
/// passes (and the `--repeat` its replay command asks for).
inline constexpr int TimingReplayRuns = 100;

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
