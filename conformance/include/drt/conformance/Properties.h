//===- drt/conformance/Properties.h - Property families ---------*- C++ -*-===//
//
// A property family is a generator profile (devices, weighted commands), the
// capabilities it needs and the coverage labels its runs must reach. Running
// a family checks, for every generated scenario, that the backend matches the
// reference model at every step; a failure is shrunk (Shrink.h) and printed
// as a replayable scenario.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROPERTIES_H
#define DRT_CONFORMANCE_PROPERTIES_H

#include "drt/BackendRegistry.h"
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
  /// Builds the generator profile: devices, command weights, value ranges.
  /// The devices carry no backend parameters; the configuration a family
  /// runs in is applied to them for the backend under test only.
  std::function<GeneratorProfile()> profile;
  /// Coverage label prefixes the family's runs must all reach; a family that
  /// never reaches one fails instead of passing vacuously.
  std::vector<std::string> keyLabels;
  /// The family is about moving tensors between devices of one backend:
  /// the configurations that set a parameter of scope
  /// BackendParameter::Scope::BetweenDevices run in it, and only in such
  /// families.
  bool aboutMovesBetweenDevices = false;
  /// The family runs branches on threads of their own: while a path the
  /// backend reports as shared between threads (PathUse::concurrent) was
  /// taken by the family's cases ("path:NAME") but never entered by one
  /// thread while another was inside it ("path-overlapped:NAME"), in any
  /// configuration, more rounds run, as for a missing key state. One still
  /// missing then is noted in the result's reason, not failed: whether
  /// threads meet is the machine's timing.
  bool overlapsSharedPaths = false;
  /// The family is about large tensors (the size classes up to several
  /// MiB): a fuzzer that bounds live bytes to keep inputs cheap gives such
  /// a family a larger bound of its own (FuzzSetup::maxLargeLiveBytes).
  bool aboutLargeTensors = false;
  /// The family's cases ask each device, from a completion callback, for
  /// its accounting (RunOptions::askDevicesFromCallbacks); its replay
  /// commands say --ask-devices-from-callbacks.
  bool asksDevicesFromCallbacks = false;
  /// Steps of each case (0: the run's --max-steps), and the fewest cases a
  /// time-budgeted run makes (0: the run's minCases).
  size_t steps = 0;
  int minCases = 0;
  /// Allocations one device must see within one case at least once (0: no
  /// such requirement); a family about long-lived devices fails below it.
  uint64_t minAllocationsOnOneDevice = 0;
  /// The multiple of the run's time budget this family spends (an exact
  /// case count is not scaled). A family whose bugs are races between
  /// threads finds one only in the few cases whose threads meet at the
  /// right instant, spread over every configuration: it gets more.
  double timeShare = 1.0;
};

/// The built-in families, in listing order.
const std::vector<PropertyFamily> &propertyFamilies();

/// The cases (over all configurations of a backend) with which every family
/// reaches its key states (checked on the seeds 1-100). A run asked for
/// fewer that misses a key state passes with its coverage incomplete
/// instead of failing: too few cases prove nothing either way.
inline constexpr int CasesForCoverage = 25;

/// How to run a family.
struct PropertyOptions {
  std::string backend = "fake";
  /// Differential partner ("" for none). It runs in its own default
  /// configuration, whatever the configuration of the backend under test.
  std::string against;
  /// The configuration of the backend under test in runProperty:
  /// parameters set on every device it creates. In
  /// runPropertyInConfigurations: the parameters --param fixed, which every
  /// configuration sets and which are tested in every family.
  ParameterMap parameters;
  uint64_t seed = 1;
  /// Cases to run; 0 runs cases until timeBudget is spent instead.
  int cases = 0;
  /// Seconds a property spends generating and checking cases when cases is
  /// 0 (shrinking a failure comes on top).
  double timeBudget = 1.0;
  /// Cases a time-budgeted property runs however slow the backend is.
  int minCases = 10;
  int maxSteps = 40;
  /// gtest-style sharding of the cases: this shard's index and the count.
  int shardIndex = 0;
  int shardCount = 1;
  /// Where failing minimal scenarios are written ("" for the current
  /// directory); the file is named after the property, configuration and
  /// seed.
  std::string failureDirectory;
  /// Stop at the first configuration that fails; the ones after it are
  /// skipped, with that reason.
  bool failFast = false;
  /// What a failure's replay command starts with: the replay tool and the
  /// options it needs before the file (" --plugin LIBRARY" for a backend
  /// loaded as a plugin), so that the printed command works as it is.
  std::string replayProgram = "drt-replay";
  /// The same for the command that shrinks a case whose step got stuck or
  /// crashed, in child processes, printed when shrinkInPlace is empty
  /// (empty too: none is printed).
  std::string shrinkProgram;
  /// The program, and the options before the case's file, that the process
  /// turns into (execv) after writing a case whose step got stuck or crashed
  /// (the program itself with --shrink-aborted, for drt-conformance): it
  /// shrinks the case in child processes, prints the minimal scenario and
  /// exits with status 1. Empty: the process ends as the runner ends it.
  std::vector<std::string> shrinkInPlace;
  /// RunOptions::stuckAfterMs of every case (0: the runner's default).
  unsigned stuckAfterMs = 0;
};

/// The outcome of one family on one backend in one configuration.
struct PropertyResult {
  /// Incomplete: passed, but too few cases were asked for to reach every
  /// key state (see CasesForCoverage).
  enum class Status { Passed, Incomplete, Failed, Skipped };
  std::string name;
  std::string backend;
  /// The configuration it ran in: configurationName() of the configuration's
  /// parameters ("default", "async=1").
  std::string configuration;
  /// Every parameter its devices were given: the configuration's, and a
  /// seed derived from the run's for each parameter that seeds the
  /// backend's randomness (the replay command passes them all).
  ParameterMap parameters;
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
  /// The runs the replay command asks for (its --repeat, 1 without).
  unsigned replayRuns = 1;
  /// Shrink candidates run and how many of them still failed.
  int shrinksTried = 0;
  int shrinksAccepted = 0;

  /// "passed", "passed, coverage incomplete", "FAILED", "skipped".
  std::string statusText() const;
};

/// Runs \p family with \p options in the configuration
/// options.parameters.
PropertyResult runProperty(const PropertyFamily &family,
                           const PropertyOptions &options);

/// Runs \p family in each of \p configurations of options.backend (each a
/// parameter map as BackendRegistry::configurationsToTest gives them, which
/// includes the fixed options.parameters) and returns one result per
/// configuration, in order. A configuration is skipped, with the reason,
/// when its capabilities do not allow the family; when it sets a parameter
/// (not a fixed one) whose scope is moves between devices and the family
/// is not about them; or, in differential mode, when
/// its capabilities
/// differ from the partner's default configuration in a way that changes
/// outcomes. The options.cases cases are spread evenly over the others, so
/// a sweep costs about what one configuration does, and coverage is judged
/// over all of them together: a key state may be reached in any.
std::vector<PropertyResult>
runPropertyInConfigurations(const PropertyFamily &family,
                            const PropertyOptions &options,
                            const std::vector<ParameterMap> &configurations);

/// The seed a family uses: independent of the order families run in.
uint64_t familySeed(uint64_t seed, const std::string &family, int shard);

/// The seed a family uses in a configuration: familySeed for the default
/// configuration (no parameters), another per configuration otherwise.
uint64_t configurationSeed(uint64_t seed, const std::string &family,
                           const ParameterMap &configuration, int shard);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_PROPERTIES_H
