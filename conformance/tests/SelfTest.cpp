//===- SelfTest.cpp - The mutant backends are registered and hidden -------===//
//
// The self-test itself is the ctest label `selftest` (CheckMutant.sh runs the
// suite against each mutant); these tests keep its inventory honest: every
// registered mutant backend has a selftest entry, and none leaks into
// "--backend all".
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace drt;

namespace {

TEST(SelfTestRegistry, MutantsAreHiddenFromAll) {
  for (const std::string &name : BackendRegistry::instance().productionNames())
    EXPECT_EQ(name.rfind("mutant:", 0), std::string::npos) << name;
}

TEST(SelfTestRegistry, EveryMutantBackendHasASelftest) {
  std::set<std::string> listed;
  std::stringstream names(DRT_SELFTEST_BACKEND_MUTANTS);
  for (std::string name; std::getline(names, name, ',');)
    listed.insert("mutant:" + name);
  std::set<std::string> registered;
  // Other tests of this program register test backends of their own (not
  // mutants) when they run: only the mutants count.
  for (const BackendInfo &b : BackendRegistry::instance().list())
    if (b.testOnly && b.name.rfind("mutant:", 0) == 0)
      registered.insert(b.name);
  for (const std::string &name : registered)
    EXPECT_TRUE(listed.count(name))
        << name << " is registered but not in DRT_BACKEND_MUTANTS "
        << "(conformance/CMakeLists.txt), so no selftest runs it";
  for (const std::string &name : listed)
    EXPECT_TRUE(registered.count(name))
        << name << " is in DRT_BACKEND_MUTANTS but not registered";
  EXPECT_GE(registered.size(), 11u);
}

TEST(BackendParameters, EveryProductionParameterIsTestedOrSaysWhyNot) {
  for (const std::string &name :
       BackendRegistry::instance().productionNames()) {
    const BackendInfo *info = BackendRegistry::instance().find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(untestedParameters(info->parameters), std::vector<std::string>{})
        << "backend '" << name << "' declares parameters that no "
        << "configuration tests beyond their default, and no reason";
  }
}

TEST(BackendParameters, AParameterTestedAtItsDefaultOnlyIsNamed) {
  BackendParameter swept = BackendParameter::boolean("swept", false, "");
  BackendParameter unswept =
      BackendParameter::unsignedInRange("unswept", 1, 1, 8, "");
  BackendParameter chooser =
      BackendParameter::unsignedInRange("chooser", 0, 0, 8, "");
  chooser.untestedBecause = "it chooses the device";
  BackendParameter seed =
      BackendParameter::unsignedInRange("seed", 1, 0, 9, "");
  seed.seedsRandomness = true;
  BackendParameter words =
      BackendParameter::choice("words", "a", {"a", "b"}, "");
  EXPECT_EQ(untestedParameters({swept, unswept, chooser, seed, words,
                                BackendParameter::text("free", "")}),
            (std::vector<std::string>{"unswept", "words"}));
}

} // namespace
