//===- drt/conformance/Census.h - What a run reached ------------*- C++ -*-===//
//
// The census counts what the scenarios of a run exercised, in the terms of
// the input space (InputSpace.h): size classes and boundaries, element kinds,
// value classes, view offsets, network shapes, pairs of consecutive commands,
// command and residency-state pairs, faults struck, allocations on one
// device and slots reused. A reader sees the input space a verdict covers;
// the run fails when a key class is never reached.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_CENSUS_H
#define DRT_CONFORMANCE_CENSUS_H

#include "drt/conformance/InputSpace.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/Scenario.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace drt::conformance {

/// Counts of what scenarios exercised, by dimension of the input space.
struct Census {
  /// Dimension ("size class", "element kind", ...) to class to count.
  std::map<std::string, std::map<std::string, uint64_t>> counts;
  /// The most allocations one device saw in one scenario.
  uint64_t mostAllocationsOnOneDevice = 0;
  /// The most times one device reused a location in one scenario.
  uint64_t mostSlotReusesOnOneDevice = 0;
  /// The largest tensor created, in bytes.
  uint64_t largestTensorBytes = 0;

  /// Counts what \p scenario's commands draw on.
  void addScenario(const Scenario &scenario, const InputSpace &space);
  /// Counts what running a scenario reached (\p run's labels and counters).
  void addRun(const RunResult &run);
  /// Adds another census's counts.
  void merge(const Census &other);

  /// The key classes of \p space never reached: every size class, element
  /// kind and value class ("size class: huge (1 MiB to 4 MiB)", ...).
  std::vector<std::string> missingKeyClasses(const InputSpace &space) const;

  /// A readable table, one dimension after the other.
  std::string toString() const;
  /// The census as a JSON object.
  std::string toJson() const;
};

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CENSUS_H
