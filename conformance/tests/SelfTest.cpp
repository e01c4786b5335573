//===- SelfTest.cpp - The suite catches deliberately broken backends ------===//
//
// Each test-only mutant breaks one rule. The suite must find the bug, shrink
// it to a small scenario, write it out, and the written scenario must replay
// the failure on the mutant while passing on the reference device.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace drt;
using namespace drt::conformance;

namespace {

struct Planted {
  std::string backend;
  std::string family;
};

class SelfTest : public ::testing::TestWithParam<Planted> {};

const PropertyFamily &family(const std::string &name) {
  for (const PropertyFamily &f : propertyFamilies())
    if (f.name == name)
      return f;
  throw std::runtime_error("no family " + name);
}

std::vector<size_t> &shrunkLengths() {
  static std::vector<size_t> lengths;
  return lengths;
}

TEST_P(SelfTest, MutantIsCaughtShrunkAndReplayable) {
  const Planted &p = GetParam();
  ASSERT_TRUE(BackendRegistry::instance().find(p.backend));
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "drt-selftest";
  std::filesystem::create_directories(dir);
  PropertyOptions options;
  options.backend = p.backend;
  options.cases = 40;
  options.maxSteps = 30;
  options.failureDirectory = dir.string();
  PropertyResult r = runProperty(family(p.family), options);
  ASSERT_EQ(r.status, PropertyResult::Status::Failed)
      << p.family << " did not catch " << p.backend;
  ASSERT_FALSE(r.minimalScenario.empty()) << r.reason;
  EXPECT_LE(r.minimalLength, 8u) << r.minimalScenario;
  EXPECT_NE(r.replayCommand.find("drt-replay"), std::string::npos);
  EXPECT_NE(r.replayCommand.find("--backend " + p.backend), std::string::npos);
  shrunkLengths().push_back(r.minimalLength);
  std::cout << "[ planted  ] " << p.backend << " caught by " << p.family
            << ", minimal scenario " << r.minimalLength << " steps:\n"
            << r.minimalScenario;

  std::ifstream in(r.scenarioFile);
  ASSERT_TRUE(in) << r.scenarioFile;
  std::stringstream text;
  text << in.rdbuf();
  ParseResult parsed = parseScenario(text.str());
  ASSERT_TRUE(std::holds_alternative<Scenario>(parsed))
      << std::get<ParseError>(parsed).toString();
  RunOptions replay;
  replay.backend = p.backend;
  RunResult onMutant = runScenario(std::get<Scenario>(parsed), replay);
  EXPECT_TRUE(onMutant.divergence) << "the written scenario does not replay";
  replay.backend = "fake";
  RunResult onFake = runScenario(std::get<Scenario>(parsed), replay);
  EXPECT_TRUE(onFake.passed())
      << (onFake.divergence ? onFake.divergence->toString() : "");
}

INSTANTIATE_TEST_SUITE_P(
    Mutants, SelfTest,
    ::testing::Values(Planted{"mutant:accounting-no-subtract", "round-trips"},
                      Planted{"mutant:corrupt-read-back", "round-trips"},
                      Planted{"mutant:double-completion", "round-trips"},
                      Planted{"mutant:ignores-budget", "accounting"}),
    [](const ::testing::TestParamInfo<Planted> &info) {
      std::string name = info.param.backend.substr(7);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(SelfTestRegistry, MutantsAreHiddenFromAll) {
  for (const std::string &name : BackendRegistry::instance().productionNames())
    EXPECT_EQ(name.rfind("mutant:", 0), std::string::npos) << name;
}

/// Prints the median shrunk length after all planted failures ran.
class ShrinkSummary : public ::testing::Environment {
public:
  void TearDown() override {
    if (shrunkLengths().empty())
      return;
    std::vector<size_t> l = shrunkLengths();
    std::sort(l.begin(), l.end());
    std::cout << "[ planted  ] median shrunk length " << l[l.size() / 2]
              << " steps over " << l.size() << " planted failures\n";
  }
};

const auto *const shrinkSummary =
    ::testing::AddGlobalTestEnvironment(new ShrinkSummary);

} // namespace
