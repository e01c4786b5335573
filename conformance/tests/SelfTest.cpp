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
  for (const BackendInfo &b : BackendRegistry::instance().list())
    if (b.testOnly)
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

} // namespace
