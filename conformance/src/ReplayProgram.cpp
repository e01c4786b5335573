//===- ReplayProgram.cpp - drt-replay -------------------------------------===//
//
// drt-replay FILE --backend NAME [--against NAME] [--param KEY=VALUE]...
// [--plugin LIBRARY]... [--trace]: runs one scenario against a backend,
// comparing it with the reference model after every step; --trace prints
// every step with its observations.
//
//===----------------------------------------------------------------------===//
#include "ProgramSupport.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/CrashArena.h"
#include "drt/conformance/HostMemoryRetention.h"
#include "drt/conformance/Plugins.h"
#include "drt/conformance/Programs.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace drt::conformance {

namespace {

// Follows "usage: NAME".
const char *Usage =
    " FILE --backend NAME [--against NAME]\n"
    "                  [--param KEY=VALUE]... [--plugin LIBRARY]... [--trace]\n"
    "                  [--repeat N] [--ask-devices-from-callbacks]\n"
    "                  [--stuck-after SECONDS]\n"
    "Runs the scenario in FILE on backend NAME and compares it with the\n"
    "reference model after every step; exits 0 when it passes, 1 on a\n"
    "divergence, 2 on a usage, plugin, parse or setup error, 3 on an\n"
    "unexpected exception, 77 when the scenario's expectations need a\n"
    "capability a backend does not declare (fault injection, resident\n"
    "tensors): skipped.\n"
    "--against runs a second backend in lockstep, in its default\n"
    "configuration. --param sets a parameter of the backend under test on\n"
    "every device the scenario declares (drt-conformance --list shows each\n"
    "backend's parameters). --plugin LIBRARY (and DRT_PLUGINS, paths\n"
    "separated by ':') loads a shared library that registers backends.\n"
    "--trace prints every step with its observations. --repeat N runs the\n"
    "scenario up to N times (1 to 100000) and stops at the first failure:\n"
    "the interleavings of a parallel block vary from run to run.\n"
    "--ask-devices-from-callbacks has the first callback of each kind of\n"
    "operation on each device ask the device for its accounting from another\n"
    "thread: a device that cannot answer holds a lock across its callback.\n"
    "--stuck-after SECONDS: a step that makes no progress for that long\n"
    "(default: twice the callback timeout, plus the linearizability budget,\n"
    "plus 10) is reported STUCK, and the program exits with 1.\n";

std::string registeredBackends() {
  std::string out;
  for (const BackendInfo &b : BackendRegistry::instance().list())
    out += (out.empty() ? "" : ", ") + b.name;
  return out.empty() ? "none" : out;
}

/// Why \p scenario, as written, needs a capability that backend \p backend
/// does not declare on the device a step uses, or "". Its written
/// expectations say what a capable backend does: a step that expects a
/// fault to be planned, or a tensor or allocation to be placed on the
/// device, on a device that refuses both with NotSupported. A scenario
/// written for such a backend says NotSupported there, and runs.
std::string writtenForOtherCapabilities(const Scenario &scenario,
                                        const std::string &backend) {
  std::map<std::string, std::pair<std::string, Capabilities>> devices;
  for (const DeviceSpec &d : scenario.devices)
    if (auto caps = BackendRegistry::instance().capabilitiesFor(
            deviceBackend(d, backend), d.parameters))
      devices[d.name] = {deviceBackend(d, backend), *caps};
  for (size_t i = 0; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    auto device = devices.find(c.device);
    if (device == devices.end() ||
        c.expect == Outcome::error(ErrorCode::NotSupported))
      continue;
    std::string step = "step " + std::to_string(i + 1) + " (" +
                       std::string(commandKindName(c.kind)) + ") expects ";
    const auto &[deviceBackendName, caps] = device->second;
    if (c.kind == CommandKind::InjectFault && !caps.faultInjection)
      return step + "a planned fault, and backend '" + deviceBackendName +
             "' does not declare fault injection";
    if ((c.kind == CommandKind::ToDevice || c.kind == CommandKind::Alloc) &&
        !caps.residentTensors)
      return step + "device memory, and backend '" + deviceBackendName +
             "' does not declare resident tensors";
  }
  return "";
}

/// True when backend \p backend creates every device \p scenario declares:
/// a scenario whose setup fails is reported as such, never skipped.
bool devicesCanBeCreated(const Scenario &scenario, const std::string &backend) {
  for (const DeviceSpec &d : scenario.devices)
    if (!BackendRegistry::instance().create(backend, deviceConfigOf(d)))
      return false;
  return true;
}

/// The program; replayProgram adds the last-resort catch.
int run(int argc, char **argv, const ProgramSettings &settings) {
  const std::string &program = settings.name;
  std::string usage = "usage: " + program + Usage;
  std::vector<std::string> pluginPaths = pluginsFromEnvironment();
  std::string file, backend, against;
  ParameterMap parameters;
  bool trace = false;
  bool askDevices = false;
  long repeat = 1;
  long stuckAfterSeconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      return 0;
    }
    if ((arg == "--backend" || arg == "--against") && hasValue) {
      (arg == "--backend" ? backend : against) = argv[++i];
    } else if (arg == "--param" && hasValue) {
      std::string key, value;
      if (!parseParameterOption(argv[++i], key, value)) {
        std::cerr << program << ": --param expects KEY=VALUE, got '" << argv[i]
                  << "'\n";
        return 2;
      }
      parameters[key] = value;
    } else if (arg == "--plugin" && hasValue) {
      pluginPaths.push_back(argv[++i]);
    } else if (arg == "--trace") {
      trace = true;
    } else if (arg == "--ask-devices-from-callbacks") {
      askDevices = true;
    } else if (arg == "--repeat" && hasValue) {
      const char *v = argv[++i];
      if (!parseInt(v, repeat) || repeat < 1 || repeat > 100000) {
        std::cerr << program << ": --repeat expects a number from 1 to "
                  << "100000, got '" << v << "'\n";
        return 2;
      }
    } else if (arg == "--stuck-after" && hasValue) {
      const char *v = argv[++i];
      if (!parseInt(v, stuckAfterSeconds) || stuckAfterSeconds < 1 ||
          stuckAfterSeconds > 3600) {
        std::cerr << program << ": --stuck-after expects seconds from 1 to "
                  << "3600, got '" << v << "'\n";
        return 2;
      }
    } else if (arg.rfind("--", 0) != 0 && file.empty()) {
      file = arg;
    } else {
      std::cerr << program << ": unexpected argument '" << arg << "'\n"
                << usage;
      return 2;
    }
  }
  if (auto plugins = loadBackendPlugins(pluginPaths); !plugins) {
    std::cerr << program << ": " << plugins.takeError().message() << "\n";
    return 2;
  }
  if (file.empty()) {
    std::cerr << program << ": no scenario file given\n" << usage;
    return 2;
  }
  if (backend.empty()) {
    std::cerr << program << ": no --backend given; registered backends: "
              << registeredBackends() << "\n";
    return 2;
  }
  for (const std::string &name : {backend, against})
    if (!name.empty() && !BackendRegistry::instance().find(name)) {
      std::cerr << program << ": unknown backend '" << name
                << "'; registered backends: " << registeredBackends() << "\n";
      return 2;
    }
  for (const auto &[key, value] : parameters) {
    size_t colon = key.rfind(':');
    if (colon != std::string::npos && key.substr(0, colon) != backend) {
      std::cerr << program << ": --param " << key << "=" << value
                << " is for backend '" << key.substr(0, colon)
                << "', not the backend under test '" << backend << "'\n";
      return 2;
    }
  }
  ParameterMap given = BackendRegistry::parametersFor(backend, parameters);
  if (auto checked =
          BackendRegistry::instance().capabilitiesFor(backend, given);
      !checked) {
    std::cerr << program << ": --param: " << checked.takeError().message()
              << "\n";
    return 2;
  }
  std::string text;
  if (std::string why = readScenarioFile(file, text); !why.empty()) {
    std::cerr << program << ": cannot read " << file << ": " << why << "\n";
    return 2;
  }
  ParseResult parsed = parseScenario(text);
  if (const auto *error = std::get_if<ParseError>(&parsed)) {
    std::cerr << file << ":" << error->toString() << "\n";
    return 2;
  }
  Scenario scenario =
      configureScenario(std::get<Scenario>(parsed), backend, given);
  std::string where =
      backend + (given.empty() ? "" : " [" + configurationName(given) + "]") +
      (against.empty() ? "" : " against " + against);
  // The written expectations are the backend under test's; a partner is
  // held to its own capabilities, whatever they are.
  if (std::string why = writtenForOtherCapabilities(scenario, backend);
      !why.empty() && devicesCanBeCreated(scenario, backend)) {
    std::cout << file << ": skipped on " << where << ": " << why << "\n";
    return SkippedExitCode;
  }
  RunOptions options;
  options.backend = backend;
  options.against = against;
  options.askDevicesFromCallbacks = askDevices;
  options.stuckAfterMs = unsigned(stuckAfterSeconds * 1000);
  if (trace)
    options.trace = [](const std::string &line) { std::cout << line << "\n"; };
  // The scenario is the file's: the report names the step.
  options.reportAborted = [&](const AbortedStep &stuck) {
    std::cout << std::flush;
    std::cerr << file << ": " << stuck.verdict() << " on " << where << "\n"
              << stuck.toString() << std::flush;
  };
  RunResult result = runScenario(scenario, options);
  long runs = 1;
  // Runs that left something uncompared, and the first thing they did.
  long partial = 0;
  std::string uncompared;
  auto note = [&] {
    if (result.notCompared.empty())
      return;
    if (partial++ == 0)
      uncompared = result.notCompared.front();
  };
  note();
  while (runs < repeat && result.passed()) {
    result = runScenario(scenario, options);
    ++runs;
    note();
  }
  if (!result.setupError.empty()) {
    std::cerr << program << ": " << file << " on " << where << ": "
              << result.setupError << "\n";
    return 2;
  }
  std::string ofRuns = repeat > 1 ? ", run " + std::to_string(runs) + " of " +
                                        std::to_string(repeat)
                                  : "";
  if (result.divergence) {
    std::cout << file << ": FAILED on " << where << ofRuns << "\n"
              << result.divergence->toString();
    return 1;
  }
  std::cout << file << ": passed on " << where << " (" << result.steps
            << " steps"
            << (repeat > 1 ? ", " + std::to_string(runs) + " runs" : "")
            << ")\n";
  if (partial)
    std::cout << "  not compared in " << partial << " of " << runs
              << " run(s): " << uncompared << "\n";
  return 0;
}

} // namespace

int replayProgram(int argc, char **argv, ProgramSettings settings) {
  if (settings.name.empty())
    settings.name = "drt-replay";
  reportCrashesOfScenarios();
  serveCrashReportsFromArena();
  retainFreedHostMemory();
  return runReportingExceptions(settings.name,
                                [&] { return run(argc, argv, settings); });
}

} // namespace drt::conformance
