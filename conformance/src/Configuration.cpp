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

DeviceTraits probedDeviceTraits(const std::string &scenarioBackend,
                                const DeviceSpec &spec) {
  const std::string &backend = deviceBackend(spec, scenarioBackend);
  static std::mutex mutex;
  static std::map<std::string, DeviceTraits> known;
  std::string key = backend + "\n" + std::to_string(spec.budget) + "\n" +
                    (spec.copyToHost ? "copy-to-host" : "") + "\n" +
                    configurationName(spec.parameters);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  DeviceConfig config = deviceConfigOf(spec);
  DeviceTraits traits;
  auto device = BackendRegistry::instance().create(backend, config);
  if (device) {
    traits = {(*device)->capabilities(), (*device)->maximumMemory()};
  } else {
    auto declared =
        BackendRegistry::instance().capabilitiesFor(backend, spec.parameters);
    if (!declared)
      declared = BackendRegistry::instance().capabilitiesFor(backend, {});
    if (declared)
      traits.capabilities = *declared;
    // Not remembered: the failure may be the host's, not the spec's.
    return traits;
  }
  known[key] = traits;
  return traits;
}

std::string unsupportedConfiguration(const std::string &backend,
                                     const ParameterMap &parameters) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::string key = backend + "\n" + configurationName(parameters);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end())
    return it->second;
  DeviceConfig config;
  config.name = "configuration-probe";
  config.parameters = parameters;
  std::string why;
  if (auto device = BackendRegistry::instance().create(backend, config))
    (*device)->shutdown();
  else if (Error e = device.takeError(); e.code() == ErrorCode::NotSupported)
    why = e.message();
  known[key] = why;
  return why;
}

} // namespace drt::conformance
