//===- drt/BackendRegistry.h - Backends by name -----------------*- C++ -*-===//
//
// Backends register a name, a factory, their capabilities and the
// DeviceConfig parameters they read, so programs (the conformance suite above
// all) create DeviceManagers by name, learn what a configuration declares and
// which configurations are worth testing, and never depend on a concrete
// backend. DRT_REGISTER_BACKEND registers from a static initializer; link
// backend libraries whole (their CMake targets do) so the initializer is
// kept.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_BACKENDREGISTRY_H
#define DRT_BACKENDREGISTRY_H

#include "drt/DeviceConfig.h"
#include "drt/DeviceManager.h"
#include "drt/Error.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace drt {

/// Backend parameters as DeviceConfig::parameters holds them: key to value.
using ParameterMap = std::map<std::string, std::string>;

/// One DeviceConfig parameter a backend reads: what it means, what it
/// accepts and which of its values a conformance run should test.
struct BackendParameter {
  /// What kind of value it takes.
  enum class Kind {
    /// "1"/"0", "true"/"false", "on"/"off".
    Boolean,
    /// An unsigned integer in [minimum, maximum], a power of two if asked.
    Unsigned,
    /// Any text.
    Text,
    /// One of a fixed list of words ("auto", "1", "0").
    Choice,
  };

  /// The key ("async", "pinned-staging").
  std::string name;
  Kind kind = Kind::Text;
  /// The value the backend uses when the parameter is absent, as text; empty
  /// for a Text parameter whose absence means something of its own.
  std::string defaultValue;
  /// One line: what the parameter does.
  std::string meaning;
  /// The values a conformance run tests, the default first; a parameter with
  /// one value is not swept.
  std::vector<std::string> testValues;
  /// Other parameters set alongside each non-default test value, for a
  /// parameter that matters only with them (a staging chunk size is tested
  /// with staging on): key to value.
  ParameterMap testedWith;
  /// Unsigned: the smallest and largest value accepted.
  uint64_t minimum = 0;
  uint64_t maximum = std::numeric_limits<uint64_t>::max();
  /// Unsigned: only powers of two are accepted.
  bool powerOfTwo = false;
  /// Choice: the values accepted, exactly as written.
  std::vector<std::string> choices;
  /// The parameter seeds the backend's own random choices: the conformance
  /// suite sets it from the run's seed, so that --seed varies them too.
  bool seedsRandomness = false;
  /// A value of the parameter that widens the windows in which the
  /// backend's threads can race (each driver call delayed a random moment,
  /// say), for testing; empty for none. The conformance suite's concurrency
  /// families set it on the devices of half their cases, in every
  /// configuration that leaves the parameter unset, so that a race is
  /// looked for with the windows wide on every path the configurations
  /// sweep, not only in a configuration of its own.
  std::string widensRacesWith;
  /// A value of the parameter that keeps the device's operations in flight
  /// for a while before they complete, however fast the device (each held
  /// a moment before it may start, say), for testing; empty for none. The
  /// conformance suite's families whose commands must meet an operation
  /// still in flight (a fault planned behind a read-back) set it on the
  /// devices of some of their cases, in every configuration that leaves
  /// the parameter unset.
  std::string holdsOperationsWith;
  /// Why a Boolean, Unsigned or Choice parameter is tested at its default
  /// only (it selects hardware rather than changing how the backend works,
  /// say); empty for one a conformance run sweeps. A value no run tests is
  /// code no run reaches, so drt-conformance names every parameter that has
  /// neither (untestedParameters).
  std::string untestedBecause;

  /// The scenarios in which a value other than the default changes what the
  /// backend does.
  enum class Scope {
    /// Any scenario.
    EveryScenario,
    /// Only scenarios that move tensors between devices of the backend
    /// working side by side (how its managers share a context, a pool, a
    /// driver).
    BetweenDevices,
  };
  /// A conformance run tests a configuration that sets this parameter only
  /// in the property families whose scenarios are in its scope, so that a
  /// parameter costly to test (a context of its own per manager) costs only
  /// where it can matter.
  Scope scope = Scope::EveryScenario;

  /// A Boolean parameter tested with both values (the default first).
  static BackendParameter boolean(std::string name, bool defaultValue,
                                  std::string meaning);
  /// An Unsigned parameter in [minimum, maximum], tested with \p testValues
  /// (empty: the default only).
  static BackendParameter
  unsignedInRange(std::string name, uint64_t defaultValue, uint64_t minimum,
                  uint64_t maximum, std::string meaning,
                  std::vector<uint64_t> testValues = {});
  /// A Text parameter, not swept.
  static BackendParameter text(std::string name, std::string meaning);
  /// A Choice parameter taking one of \p choices (which hold \p
  /// defaultValue), tested with \p testValues (empty: the default only).
  static BackendParameter choice(std::string name, std::string defaultValue,
                                 std::vector<std::string> choices,
                                 std::string meaning,
                                 std::vector<std::string> testValues = {});

  /// "0 or 1 (also true/false, on/off)", "an integer from 0 to 1000000", "a
  /// power of two from 1 to 2097152", "any text", "one of auto, 1, 0": the
  /// values it accepts.
  std::string allowedValues() const;
  /// Success when \p value is one of allowedValues(), else InvalidArgument
  /// naming \p where (the device), the parameter, the value and what is
  /// allowed.
  Error check(const std::string &value, const std::string &where) const;
};

/// Checks \p config's parameters against the \p declared ones: a key not
/// declared is InvalidArgument naming it and every declared key, a value
/// outside its parameter's allowed values is InvalidArgument naming the
/// allowed values. \p who names the device in messages ("fake device 'd0'").
Error checkParameters(const DeviceConfig &config,
                      const std::vector<BackendParameter> &declared,
                      const std::string &who);

/// The parameters of \p parameters that a conformance run tests at their
/// default only without saying why (BackendParameter::untestedBecause): a
/// Boolean, Unsigned or Choice parameter with fewer than two test values
/// that does not seed the backend's randomness.
std::vector<std::string>
untestedParameters(const std::vector<BackendParameter> &parameters);

/// Creates an uninitialised DeviceManager from a config.
using BackendFactory =
    std::function<std::unique_ptr<DeviceManager>(const DeviceConfig &)>;

/// One registered backend. The fields after testOnly are optional, so a
/// registration written as {name, description, capabilities, factory} or
/// {..., factory, testOnly} still declares a backend without parameters.
struct BackendInfo {
  /// The backend's name ("fake", "opencl", "mutant:double-free").
  std::string name;
  /// One line for listings.
  std::string description;
  /// What its managers declare in the default configuration (no parameters).
  Capabilities capabilities;
  BackendFactory factory;
  /// Test-only backends (mutants) are hidden from "all".
  bool testOnly = false;
  /// The DeviceConfig parameters its managers read; any other key is
  /// rejected by their init().
  std::vector<BackendParameter> parameters = {};
  /// What a manager configured with these (already checked) parameters
  /// declares; unset when the capabilities do not depend on them.
  std::function<Capabilities(const DeviceConfig &)> capabilitiesFor = nullptr;
};

/// The process-wide table of backends.
class BackendRegistry {
public:
  /// The registry.
  static BackendRegistry &instance();

  /// Adds \p info; false (and nothing changes) when the name is taken.
  bool add(BackendInfo info);
  /// The backend named \p name, or nullptr.
  const BackendInfo *find(const std::string &name) const;
  /// Every backend, sorted by name.
  std::vector<BackendInfo> list() const;
  /// Names of every backend that is not test-only, sorted.
  std::vector<std::string> productionNames() const;

  /// The parameters meant for backend \p backend: a key written
  /// "BACKEND:KEY" applies to backend BACKEND only (it is passed on as KEY
  /// and wins over a plain KEY), and is dropped for every other backend; a
  /// plain key applies to every backend. So one scenario or configuration
  /// can carry settings for several backends, and a differential partner
  /// keeps its defaults while the backend under test is configured. The
  /// backend name is what precedes the last ':' ("mutant:double-free:async").
  static ParameterMap parametersFor(const std::string &backend,
                                    const ParameterMap &parameters);

  /// What a manager of backend \p name configured with \p parameters
  /// (resolved with parametersFor) declares, without creating one. An
  /// unknown backend, an undeclared parameter or a bad value is
  /// InvalidArgument naming it and what is allowed.
  Expected<Capabilities> capabilitiesFor(const std::string &name,
                                         const ParameterMap &parameters) const;

  /// The configurations of backend \p name a conformance run tests, each as
  /// the parameters that differ from the defaults. \p fixed (resolved with
  /// parametersFor, checked as capabilitiesFor does) is part of every
  /// configuration and its keys are not swept; the swept parameters are the
  /// other declared ones with more than one test value. One factor at a
  /// time: first the default configuration (just \p fixed), then for each
  /// swept parameter, in declaration order, one configuration per
  /// non-default test value with every other parameter at its default. So
  /// every test value of every parameter appears, a failure points at one
  /// parameter, and the count grows with the sum of the test values rather
  /// than their product. A parameter's testedWith settings join each of
  /// its non-default values' configurations; a value whose testedWith a
  /// \p fixed parameter contradicts would test nothing and is left out.
  /// Then combined configurations, one per round r up to the most
  /// non-default test values any such parameter has: each sets every
  /// swept parameter of Scope::EveryScenario to its r-th non-default value
  /// (cycling) where its testedWith agrees with the values already set and
  /// it takes no capability away, kept when it sets two or more and is
  /// not listed already; so code that two non-default values reach only
  /// together runs too. Rounds pair values of the same rank, so last come
  /// configurations for the pairs of non-default values of two such
  /// parameters that no configuration sets together (each from the first
  /// such pair, every other parameter set to the value that brings the most
  /// of the others together), until every pair that can be set together
  /// is. A testedWith that names an undeclared parameter or a bad value is
  /// InvalidArgument naming both parameters.
  Expected<std::vector<ParameterMap>>
  configurationsToTest(const std::string &name,
                       const ParameterMap &fixed = {}) const;

  /// Creates and initialises a manager of backend \p name with \p config,
  /// whose parameters are first resolved with parametersFor. An unknown
  /// name is InvalidArgument listing the registered backends; a failing init
  /// (an undeclared parameter, a bad value) is returned as is; a factory or
  /// init that throws is DeviceError with what it threw.
  Expected<std::unique_ptr<DeviceManager>> create(const std::string &name,
                                                  const DeviceConfig &config);

private:
  Error unknownBackend(const std::string &name) const;

  mutable std::mutex mutex_;
  std::vector<BackendInfo> backends_;
};

/// Registers a backend at static-initialisation time.
struct BackendRegistration {
  explicit BackendRegistration(BackendInfo info);
};

} // namespace drt

#define DRT_CONCAT_IMPL(a, b) a##b
#define DRT_CONCAT(a, b) DRT_CONCAT_IMPL(a, b)

/// Registers a backend from a BackendInfo expression, e.g.
/// DRT_REGISTER_BACKEND(drt::BackendInfo{"fake", "...", caps, factory});
#define DRT_REGISTER_BACKEND(...)                                              \
  static ::drt::BackendRegistration DRT_CONCAT(drtBackendRegistration_,        \
                                               __LINE__)(__VA_ARGS__)

#endif // DRT_BACKENDREGISTRY_H
