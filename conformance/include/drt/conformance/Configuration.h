//===- drt/conformance/Configuration.h - Backend configurations -*- C++ -*-===//
//
// A backend configuration is a set of the DeviceConfig parameters the backend
// declares (drt/BackendRegistry.h). The suite runs the backend under test in
// the configurations the registry chooses, or the one --param fixes; it
// writes them into a scenario's devices for that backend only, so a
// differential partner keeps its own default configuration; and it tells the
// model what each created device declares and which budget it enforces.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_CONFIGURATION_H
#define DRT_CONFORMANCE_CONFIGURATION_H

#include "drt/BackendRegistry.h"
#include "drt/DeviceConfig.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/Scenario.h"

#include <string>

namespace drt::conformance {

/// "async=1 resident=0" (keys in order), or "default" when \p parameters is
/// empty.
std::string configurationName(const ParameterMap &parameters);

/// \p parameters as options of drt-replay and drt-conformance:
/// " --param async=1 --param seed=7", or "" when empty.
std::string parameterOptions(const ParameterMap &parameters);

/// Parses "KEY=VALUE" as given to --param; false when there is no '=' or the
/// key is empty.
bool parseParameterOption(const std::string &text, std::string &key,
                          std::string &value);

/// \p scenario with \p parameters (plain keys) set on every device of the
/// backend under test \p backend (those that name no backend of their own)
/// for that backend only: each key is written "BACKEND:KEY", which
/// BackendRegistry::parametersFor passes to that backend and drops for any
/// other, and which wins over the scenario's own value for KEY.
Scenario configureScenario(const Scenario &scenario, const std::string &backend,
                           const ParameterMap &parameters);

/// The backend that creates device \p spec of a scenario run on \p backend:
/// the one the spec names, or \p backend.
inline const std::string &deviceBackend(const DeviceSpec &spec,
                                        const std::string &backend) {
  return spec.backend.empty() ? backend : spec.backend;
}

/// The configuration a backend's manager is created with for device \p spec
/// of a scenario: its name, budget, copy-to-host flag and parameters.
DeviceConfig deviceConfigOf(const DeviceSpec &spec);

/// What device \p spec of a scenario run on \p backend (deviceBackend)
/// declares and the
/// budget it enforces (maximumMemory()), read from a device the registry
/// creates and destroys at once. Remembered per backend and spec (the device
/// name aside), so each distinct configuration is created once per process.
/// When the device cannot be created, the registry's capabilitiesFor the
/// spec's parameters (the default capabilities if those are bad) and no
/// budget: running the scenario reports that failure itself.
DeviceTraits probedDeviceTraits(const std::string &backend,
                                const DeviceSpec &spec);

/// Why \p backend's device cannot run in configuration \p parameters on this
/// host: the message of the NotSupported error that creating it returned (a
/// parameter the platform cannot honour), or "" where it can be created or
/// fails otherwise (running a scenario reports such a failure itself).
/// The device is the one probedDeviceTraits creates for a spec with these
/// parameters, and remembered with it.
std::string unsupportedConfiguration(const std::string &backend,
                                     const ParameterMap &parameters);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CONFIGURATION_H
