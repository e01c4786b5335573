//===- drt/conformance/Behaviour.h - The per-rule tests of any backend -*- C++
//-*-===//
//
// The Behaviour tests check each rule of docs/semantics.md on real
// DeviceManagers created through the registry, one gtest per rule. The
// drt::behaviour_tests library holds them, instantiated for the backends
// chosen at run time, and behaviourTestsMain, which chooses them from the
// command line (drt::behaviour_main and drt-behaviour are that main()):
//
//   BEHAVIOUR-PROGRAM --backend NAME [--param KEY=VALUE]... [--no-sweep]
//                     [--plugin LIBRARY]... [gtest options]
//
// so any registered backend, compiled in, linked or loaded as a plugin, runs
// them by name.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_BEHAVIOUR_H
#define DRT_CONFORMANCE_BEHAVIOUR_H

#include "drt/BackendRegistry.h"

#include <string>
#include <vector>

namespace drt::conformance {

/// One configuration of a backend the Behaviour tests run on.
struct BehaviourCase {
  /// The test name's suffix: the backend and its configuration
  /// ("fake_async_1", "opencl_default"), letters, digits and '_' only.
  std::string label;
  std::string backend;
  /// Set on every device the tests create.
  ParameterMap parameters;
};

/// Adds the configurations of backend \p backend that a conformance run tests
/// (BackendRegistry::configurationsToTest with \p fixed), or with \p sweep
/// false the one configuration \p fixed; call before the tests are
/// registered (before testing::InitGoogleTest). An unknown backend or a bad
/// parameter is InvalidArgument naming it.
Error addBehaviourBackend(const std::string &backend,
                          const ParameterMap &fixed = {}, bool sweep = true);

/// The configurations added so far, in order.
const std::vector<BehaviourCase> &behaviourCases();

/// The main() of drt::behaviour_tests: loads the plugins of --plugin and
/// DRT_PLUGINS, adds each --backend with the --param settings (every
/// configuration the registry tests, or only the given one with
/// --no-sweep), passes the remaining arguments to GoogleTest and runs the
/// tests. \p builtIn are options read before the command line's: a program
/// built for one backend passes "--backend", NAME there, so that listing its
/// tests (--gtest_list_tests, as ctest's discovery runs it) needs no other
/// argument. Returns 2 for bad usage (no --backend, an unknown backend, a
/// bad parameter, a plugin that does not load), else GoogleTest's result.
int behaviourTestsMain(int argc, char **argv,
                       const std::vector<std::string> &builtIn = {});

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_BEHAVIOUR_H
