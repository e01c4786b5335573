//===- PropertiesTest.cpp - Every family on the reference device ----------===//
#include "drt/conformance/Properties.h"
#include "drt/BackendRegistry.h"

#include <gtest/gtest.h>

using namespace drt;
using namespace drt::conformance;

namespace {

class FamilyOnFake : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyOnFake, Passes) {
  for (const PropertyFamily &f : propertyFamilies()) {
    if (f.name != GetParam())
      continue;
    PropertyOptions options;
    options.backend = "fake";
    options.cases = 25;
    PropertyResult r = runProperty(f, options);
    EXPECT_EQ(r.status, PropertyResult::Status::Passed)
        << r.reason << r.minimalScenario;
    EXPECT_EQ(r.cases, 25);
    EXPECT_GT(r.steps, 100u);
    return;
  }
  FAIL() << "no family " << GetParam();
}

std::vector<std::string> familyNames() {
  std::vector<std::string> names;
  for (const PropertyFamily &f : propertyFamilies())
    names.push_back(f.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyOnFake,
                         ::testing::ValuesIn(familyNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string name = info.param;
                           for (char &c : name)
                             if (c == '-')
                               c = '_';
                           return name;
                         });

TEST(Properties, AKeyStateNeverReachedFailsInsteadOfPassingVacuously) {
  PropertyFamily f = propertyFamilies().front();
  f.name = "unreachable";
  f.keyLabels = {"a-state-no-command-reaches"};
  PropertyOptions options;
  options.cases = 5;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Failed);
  EXPECT_NE(r.reason.find("never reached the key state "
                          "'a-state-no-command-reaches'"),
            std::string::npos)
      << r.reason;
}

TEST(Properties, AMissingKeyStateRunsMoreBatchesBeforeFailing) {
  // Coverage must not hinge on one seed: the first batch of 5 cases is
  // followed by 3 more under derived seeds before the property fails.
  PropertyFamily f = propertyFamilies().front();
  f.name = "unreachable";
  f.keyLabels = {"a-state-no-command-reaches"};
  PropertyOptions options;
  options.cases = 5;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Failed);
  EXPECT_EQ(r.cases, 20);
  // A key state the first batch reaches ends the run after it.
  f.keyLabels = {"create"};
  r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Passed) << r.reason;
  EXPECT_EQ(r.cases, 5);
}

TEST(Properties, TooFewAllocationsOnOneDeviceRunMoreBatchesBeforeFailing) {
  // Like a missing key state: on a slow machine the first cases may be all
  // that a time budget allows, so the property runs on before it fails.
  PropertyFamily f = propertyFamilies().front();
  f.name = "allocating";
  f.keyLabels.clear();
  f.minAllocationsOnOneDevice = 1000000;
  PropertyOptions options;
  options.cases = 5;
  options.maxSteps = 10;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Failed);
  EXPECT_EQ(r.cases, 20);
  EXPECT_NE(r.reason.find("never made 1000000 allocations on one device"),
            std::string::npos)
      << r.reason;
  // A target the first batch meets ends the run after it.
  f.minAllocationsOnOneDevice = 1;
  r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Passed) << r.reason;
  EXPECT_EQ(r.cases, 5);
}

TEST(Properties, SkipsCarryTheirReason) {
  PropertyFamily f = propertyFamilies().front();
  f.skipReason = [](const Capabilities &) {
    return std::string("the backend declares no resident tensors");
  };
  PropertyResult r = runProperty(f, PropertyOptions{});
  EXPECT_EQ(r.status, PropertyResult::Status::Skipped);
  EXPECT_EQ(r.reason, "the backend declares no resident tensors");
}

TEST(Properties, ShardsSplitTheCasesDisjointly) {
  // The shards together run exactly the cases of one unsharded run: the
  // same number of cases and, case for case, the same steps. (No key
  // states, so that the unsharded run does not add coverage rounds.)
  PropertyFamily f = propertyFamilies().front();
  f.keyLabels.clear();
  PropertyOptions whole;
  whole.cases = 10;
  whole.maxSteps = 10;
  PropertyResult all = runProperty(f, whole);
  int total = 0;
  size_t steps = 0;
  for (int shard = 0; shard < 3; ++shard) {
    PropertyOptions options = whole;
    options.shardIndex = shard;
    options.shardCount = 3;
    PropertyResult r = runProperty(f, options);
    EXPECT_EQ(r.cases, shard == 0 ? 4 : 3);
    EXPECT_EQ(r.seed, all.seed);
    total += r.cases;
    steps += r.steps;
  }
  EXPECT_EQ(total, 10);
  EXPECT_EQ(steps, all.steps);
}

} // namespace
