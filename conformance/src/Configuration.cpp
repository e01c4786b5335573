//===- Configuration.cpp - Backend configurations -------------------------===//
#include "drt/conformance/Configuration.h"

#include <mutex>

namespace drt::conformance {

std::string configurationName(const ParameterMap &parameters) {
  std::string out;
  for (const auto &[key, value] : parameters)
    out += (out.empty() ? "" : " ") + key + "=" + value;
  return out.empty() ? "default" : out;
}

std::string parameterOptions(const ParameterMap &parameters) {
  std::string out;
  for (const auto &[key, value] : parameters)
    out += " --param " + key + "=" + value;
  return out;
}

bool parseParameterOption(const std::string &text, std::string &key,
                          std::string &value) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return false;
  key = text.substr(0, eq);
  value = text.substr(eq + 1);
  return true;
}

Scenario configureScenario(const Scenario &scenario, const std::string &backend,
                           const ParameterMap &parameters) {
  Scenario out = scenario;
  for (DeviceSpec &d : out.devices)
    for (const auto &[key, value] : parameters)
      if (d.backend.empty())
        d.parameters[backend + ":" + key] = value;
  return out;
}

DeviceConfig deviceConfigOf(const DeviceSpec &spec) {
  DeviceConfig config;
  config.name = spec.name;
  config.memoryBudget = spec.budget;
  config.copyDeviceTensorsToHost = spec.copyToHost;
  config.parameters = spec.parameters;
  return config;
}

namespace {

/// What creating a device of one configuration showed.
struct DeviceProbe {
  DeviceTraits traits;
  /// The message of a NotSupported refusal to start ("" otherwise).
  std::string notSupported;
};

/// Creates (and destroys) a device of \p backend as \p spec says, once per
/// backend and spec (the device name aside) for devices that start or
/// refuse the spec with NotSupported; another failure may be the host's,
/// and is tried again next time. A device that does not start has the
/// capabilities its backend declares for the spec (the default ones if
/// those are bad) and no budget.
DeviceProbe probeDevice(const std::string &backend, const DeviceSpec &spec) {
  static std::mutex mutex;
  static std::map<std::string, DeviceProbe> known;
  std::string key = backend + "\n" + std::to_string(spec.budget) + "\n" +
                    (spec.copyToHost ? "copy-to-host" : "") + "\n" +
                    configurationName(spec.parameters);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  DeviceProbe probe;
  auto device =
      BackendRegistry::instance().create(backend, deviceConfigOf(spec));
  if (device) {
    probe.traits = {(*device)->capabilities(), (*device)->maximumMemory()};
    (*device)->shutdown();
    known[key] = probe;
    return probe;
  }
  Error failure = device.takeError();
  auto declared =
      BackendRegistry::instance().capabilitiesFor(backend, spec.parameters);
  if (!declared)
    declared = BackendRegistry::instance().capabilitiesFor(backend, {});
  if (declared)
    probe.traits.capabilities = *declared;
  if (failure.code() == ErrorCode::NotSupported) {
    probe.notSupported = failure.message();
    known[key] = probe;
  }
  return probe;
}

} // namespace

DeviceTraits probedDeviceTraits(const std::string &scenarioBackend,
                                const DeviceSpec &spec) {
  return probeDevice(deviceBackend(spec, scenarioBackend), spec).traits;
}

std::string unsupportedConfiguration(const std::string &backend,
                                     const ParameterMap &parameters) {
  DeviceSpec spec;
  spec.parameters = parameters;
  return probeDevice(backend, spec).notSupported;
}

} // namespace drt::conformance
