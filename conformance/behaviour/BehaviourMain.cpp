//===- BehaviourMain.cpp - Choosing the backends of the Behaviour tests ---===//
#include "drt/conformance/Behaviour.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Plugins.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <iostream>

namespace drt::conformance {

namespace {

std::vector<BehaviourCase> &cases() {
  static std::vector<BehaviourCase> all;
  return all;
}

/// \p text with every character that a gtest name cannot hold made '_'.
std::string testName(const std::string &text) {
  std::string out = text;
  for (char &c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return out;
}

const char *Usage =
    "usage: %s --backend NAME [--param KEY=VALUE]... [--no-sweep]\n"
    "       [--plugin LIBRARY]... [gtest options]\n"
    "Runs the Behaviour tests (one per rule of docs/semantics.md) on each\n"
    "--backend, in every configuration its parameters declare worth testing\n"
    "with the --param settings fixed, or only in the configuration --param\n"
    "gives with --no-sweep. --plugin LIBRARY (and DRT_PLUGINS, paths\n"
    "separated by ':') loads a shared library that registers backends.\n";

} // namespace

Error addBehaviourBackend(const std::string &backend, const ParameterMap &fixed,
                          bool sweep) {
  BackendRegistry &registry = BackendRegistry::instance();
  std::vector<ParameterMap> configurations;
  if (sweep) {
    auto all = registry.configurationsToTest(backend, fixed);
    if (!all)
      return all.takeError();
    configurations = std::move(*all);
  } else {
    if (auto caps = registry.capabilitiesFor(backend, fixed); !caps)
      return caps.takeError();
    configurations = {BackendRegistry::parametersFor(backend, fixed)};
  }
  for (const ParameterMap &c : configurations)
    cases().push_back(
        {testName(backend + "_" + configurationName(c)), backend, c});
  return Error::success();
}

const std::vector<BehaviourCase> &behaviourCases() { return cases(); }

int behaviourTestsMain(int argc, char **argv,
                       const std::vector<std::string> &builtIn) {
  std::vector<std::string> plugins = pluginsFromEnvironment(), backends;
  ParameterMap parameters;
  bool sweep = true;
  // What GoogleTest sees: the program and every argument not ours.
  std::vector<char *> rest = {argv[0]};
  std::vector<std::string> arguments = builtIn;
  arguments.insert(arguments.end(), argv + 1, argv + argc);
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string &arg = arguments[i];
    bool hasValue = i + 1 < arguments.size();
    if ((arg == "--backend" || arg == "--plugin" || arg == "--param") &&
        !hasValue) {
      std::cerr << argv[0] << ": " << arg << " needs a value\n";
      return 2;
    }
    if (arg == "--backend") {
      backends.push_back(arguments[++i]);
    } else if (arg == "--plugin") {
      plugins.push_back(arguments[++i]);
    } else if (arg == "--param") {
      std::string key, value;
      if (!parseParameterOption(arguments[++i], key, value)) {
        std::cerr << argv[0] << ": --param expects KEY=VALUE, got '"
                  << arguments[i] << "'\n";
        return 2;
      }
      parameters[key] = value;
    } else if (arg == "--no-sweep") {
      sweep = false;
    } else if (arg == "--help" || arg == "-h") {
      std::printf(Usage, argv[0]);
      return 0;
    } else {
      rest.push_back(const_cast<char *>(arg.c_str()));
    }
  }
  if (auto loaded = loadBackendPlugins(plugins); !loaded) {
    std::cerr << argv[0] << ": " << loaded.takeError().message() << "\n";
    return 2;
  }
  if (backends.empty()) {
    std::cerr << argv[0] << ": no --backend given\n";
    std::fprintf(stderr, Usage, argv[0]);
    return 2;
  }
  for (const std::string &backend : backends)
    if (Error e = addBehaviourBackend(backend, parameters, sweep)) {
      std::cerr << argv[0] << ": " << e.message() << "\n";
      return 2;
    }
  int count = int(rest.size());
  rest.push_back(nullptr);
  ::testing::InitGoogleTest(&count, rest.data());
  return RUN_ALL_TESTS();
}

} // namespace drt::conformance
