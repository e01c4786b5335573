//===- drt/conformance/Properties.h - Property families ---------*- C++ -*-===//
//
// A property family is a generator profile (devices, weighted commands), the
// capabilities it needs and the coverage labels its runs must reach. Running
// a family checks, for every generated scenario, that the backend matches the
// reference model at every step; a failure is shrunk by rapidcheck and
// printed as a replayable scenario.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROPERTIES_H
#define DRT_CONFORMANCE_PROPERTIES_H

#include "drt/conformance/Census.h"
#include "drt/conformance/Generators.h"
#include "drt/conformance/Scenario.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace drt::conformance {

/// One family of properties.
struct PropertyFamily {
  /// "view-sharing", "move-semantics", ...
  std::string name;
  /// One line for listings.
  std::string description;
  /// The reason the family cannot run on a backend with these
  /// capabilities, or "" when it can.
  std::function<std::string(const Capabilities &)> skipReason;
  /// Builds the generator profile for one backend (device parameters may
  /// depend on the backend, e.g. the fake device's "async").
  std::function<GeneratorProfile(const std::string &backend, uint64_t seed)>
      profile;
  /// Coverage label prefixes the family's runs must all reach; a family that
  /// never reaches one fails instead of passing vacuously.
  std::vector<std::string> keyLabels;
  /// Steps of each case (0: the run's --max-steps), and the fewest cases a
  /// time-budgeted run makes (0: the run's minCases).
  size_t steps = 0;
  int minCases = 0;
  /// Allocations one device must see within one case at least once (0: no
  /// such requirement); a family about long-lived devices fails below it.
  uint64_t minAllocationsOnOneDevice = 0;
};

/// The built-in families, in listing order.
const std::vector<PropertyFamily> &propertyFamilies();

/// How to run a family.
struct PropertyOptions {
  std::string backend = "fake";
  /// Differential partner ("" for none).
  std::string against;
  uint64_t seed = 1;
  /// Cases to run; 0 runs cases until timeBudget is spent instead.
  int cases = 0;
  /// Seconds a property spends generating and checking cases when cases is
  /// 0 (shrinking a failure comes on top).
  double timeBudget = 0.5;
  /// Cases a time-budgeted property runs however slow the backend is.
  int minCases = 10;
  int maxSteps = 40;
  /// gtest-style sharding of the cases: this shard's index and the count.
  int shardIndex = 0;
  int shardCount = 1;
  /// Where failing minimal scenarios are written ("" for the current
  /// directory); the file is named after the property and seed.
  std::string failureDirectory;
};

/// The outcome of one family on one backend.
struct PropertyResult {
  enum class Status { Passed, Failed, Skipped };
  std::string name;
  std::string backend;
  Status status = Status::Passed;
  /// Why it was skipped, or why it failed (divergence or missing coverage).
  std::string reason;
  int cases = 0;
  size_t steps = 0;
  double seconds = 0;
  uint64_t seed = 0;
  std::map<std::string, int> labels;
  std::map<std::string, int> transitions;
  /// What the property's scenarios drew on and reached.
  Census census;
  /// For a failure: the minimal scenario (text form), its length, the file
  /// it was written to and the command that replays it.
  std::string minimalScenario;
  size_t minimalLength = 0;
  std::string scenarioFile;
  std::string replayCommand;
  /// Shrink attempts rapidcheck made and how many of them still failed.
  int shrinksTried = 0;
  int shrinksAccepted = 0;

  /// "passed", "FAILED", "skipped".
  std::string statusText() const;
};

/// Runs \p family with \p options.
PropertyResult runProperty(const PropertyFamily &family,
                           const PropertyOptions &options);

/// The seed a family uses: independent of the order families run in.
uint64_t familySeed(uint64_t seed, const std::string &family, int shard);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_PROPERTIES_H
