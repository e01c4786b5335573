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

/// \p scenario with \p parameters (plain keys) set on every device for
/// backend \p backend only: each key is written "BACKEND:KEY", which
/// BackendRegistry::parametersFor passes to that backend and drops for any
/// other, and which wins over the scenario's own value for KEY.
Scenario configureScenario(const Scenario &scenario, const std::string &backend,
                           const ParameterMap &parameters);

/// The configuration a backend's manager is created with for device \p spec
/// of a scenario: its name, budget, copy-to-host flag and parameters.
DeviceConfig deviceConfigOf(const DeviceSpec &spec);

/// What a device of backend \p backend created from \p spec declares and the
/// budget it enforces (maximumMemory()), read from a device the registry
/// creates and destroys at once. Remembered per backend and spec (the device
/// name aside), so each distinct configuration is created once per process.
/// When the device cannot be created, the registry's capabilitiesFor the
/// spec's parameters (the default capabilities if those are bad) and no
/// budget: running the scenario reports that failure itself.
DeviceTraits probedDeviceTraits(const std::string &backend,
                                const DeviceSpec &spec);

/// The capabilities in which \p a and \p b differ that change the outcome of
/// a step (resident tensors, memory budget, fault injection, device loss),
/// named and separated by spaces; "" when none does. Asynchronous completion
/// and peer-to-peer change when and how work completes, not what it
/// returns.
std::string outcomeChangingDifference(const Capabilities &a,
                                      const Capabilities &b);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CONFIGURATION_H
