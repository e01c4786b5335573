//===- PropertiesTest.cpp - Every family on the reference device ----------===//
#include "drt/conformance/Properties.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/Report.h"
#include "drt/fake/FakeDevice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

using namespace drt;
using namespace drt::conformance;

namespace {

class FamilyOnFake : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyOnFake, PassesInEveryConfigurationThatAllowsIt) {
  for (const PropertyFamily &f : propertyFamilies()) {
    if (f.name != GetParam())
      continue;
    PropertyOptions options;
    options.backend = "fake";
    options.cases = CasesForCoverage;
    auto configurations = BackendRegistry::instance().configurationsToTest(
        "fake", options.parameters);
    ASSERT_TRUE(configurations);
    std::vector<PropertyResult> rows =
        runPropertyInConfigurations(f, options, *configurations);
    ASSERT_EQ(rows.size(), configurations->size());
    int cases = 0, passed = 0;
    size_t steps = 0;
    for (const PropertyResult &r : rows) {
      EXPECT_TRUE(r.status == PropertyResult::Status::Passed ||
                  r.status == PropertyResult::Status::Skipped)
          << r.configuration << ": " << r.reason << r.minimalScenario;
      if (r.status == PropertyResult::Status::Skipped) {
        EXPECT_FALSE(r.reason.empty()) << r.configuration;
      }
      passed += r.status == PropertyResult::Status::Passed;
      cases += r.cases;
      steps += r.steps;
    }
    EXPECT_GE(passed, 1);
    EXPECT_GE(cases, CasesForCoverage);
    EXPECT_GT(steps, 100u);
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

const PropertyFamily &family(const std::string &name) {
  for (const PropertyFamily &f : propertyFamilies())
    if (f.name == name)
      return f;
  throw std::runtime_error("no family " + name);
}

TEST(Properties, AKeyStateNeverReachedFailsInsteadOfPassingVacuously) {
  PropertyFamily f = propertyFamilies().front();
  f.name = "unreachable";
  f.keyLabels = {"a-state-no-command-reaches"};
  PropertyOptions options;
  options.cases = CasesForCoverage;
  options.maxSteps = 10;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Failed);
  EXPECT_NE(r.reason.find("never reached the key state "
                          "'a-state-no-command-reaches'"),
            std::string::npos)
      << r.reason;
}

TEST(Properties, AMissingKeyStateRunsMoreBatchesBeforeFailing) {
  // Coverage must not hinge on one seed: the first batch of 25 cases is
  // followed by 3 more under derived seeds before the property fails.
  PropertyFamily f = propertyFamilies().front();
  f.name = "unreachable";
  f.keyLabels = {"a-state-no-command-reaches"};
  PropertyOptions options;
  options.cases = CasesForCoverage;
  options.maxSteps = 10;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Failed);
  EXPECT_EQ(r.cases, 4 * CasesForCoverage);
  // A key state the first batch reaches ends the run after it.
  f.keyLabels = {"create"};
  r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Passed) << r.reason;
  EXPECT_EQ(r.cases, CasesForCoverage);
}

TEST(Properties, FewerCasesThanCoverageNeedsAreNotAFailure) {
  // Too few cases to reach a key state say nothing about the backend, so the
  // property passes and says its coverage is incomplete. (The key state here
  // is one no command reaches, so that no lucky case reaches it.)
  PropertyFamily f = family("view-sharing");
  f.keyLabels.push_back("a-state-no-command-reaches");
  PropertyOptions options;
  options.cases = 1;
  PropertyResult r = runProperty(f, options);
  EXPECT_EQ(r.status, PropertyResult::Status::Incomplete) << r.reason;
  EXPECT_EQ(r.statusText(), "passed, coverage incomplete");
  EXPECT_NE(r.reason.find("not reached in 4 case(s)"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("the 25 coverage needs"), std::string::npos)
      << r.reason;
  RunSummary summary;
  summary.results = {r};
  EXPECT_TRUE(summary.passed());
}

TEST(Properties, CasesAreSpreadOverTheConfigurations) {
  PropertyFamily f = family("view-sharing");
  f.keyLabels = {"create"};
  PropertyOptions options;
  options.cases = 25;
  auto configurations =
      BackendRegistry::instance().configurationsToTest("fake");
  ASSERT_TRUE(configurations);
  std::vector<PropertyResult> rows =
      runPropertyInConfigurations(f, options, *configurations);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].configuration, "default");
  EXPECT_EQ(rows[1].configuration, "async=1");
  EXPECT_EQ(rows[2].configuration, "resident=0");
  EXPECT_EQ(rows[3].configuration, "alignment=4096");
  EXPECT_EQ(rows[4].configuration, "alignment=4096 async=1");
  EXPECT_EQ(rows[0].cases, 7);
  EXPECT_EQ(rows[1].cases, 6);
  EXPECT_EQ(rows[2].status, PropertyResult::Status::Skipped);
  EXPECT_EQ(rows[2].reason, "the backend declares no resident tensors");
  EXPECT_EQ(rows[3].cases, 6);
  EXPECT_EQ(rows[4].cases, 6);
  // Each row's devices get its configuration and a seed of their own.
  EXPECT_EQ(rows[1].parameters.at("async"), "1");
  EXPECT_EQ(rows[1].parameters.count("seed"), 1u);
  EXPECT_NE(rows[0].seed, rows[1].seed);
}

TEST(Properties, AsynchronousCompletionRunsWhereAConfigurationDeclaresIt) {
  // Not a backend named "fake": whatever configuration declares
  // asynchronous completion.
  PropertyOptions options;
  options.cases = 8;
  auto configurations =
      BackendRegistry::instance().configurationsToTest("fake");
  ASSERT_TRUE(configurations);
  std::vector<PropertyResult> rows = runPropertyInConfigurations(
      family("async-completion"), options, *configurations);
  int ran = 0, cases = 0;
  for (const PropertyResult &r : rows) {
    // async=1, alone and combined with alignment=4096.
    if (r.parameters.count("async") && r.parameters.at("async") == "1") {
      EXPECT_EQ(r.status, PropertyResult::Status::Passed) << r.reason;
      cases += r.cases;
      ++ran;
      continue;
    }
    EXPECT_EQ(r.status, PropertyResult::Status::Skipped) << r.configuration;
    EXPECT_NE(r.reason.find("does not declare asynchronous completion"),
              std::string::npos)
        << r.reason;
  }
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(cases, options.cases);
  // --param async=1 makes it the only configuration that counts.
  options.parameters = {{"async", "1"}};
  options.cases = 5;
  PropertyResult fixed = runProperty(family("async-completion"), options);
  EXPECT_NE(fixed.status, PropertyResult::Status::Failed) << fixed.reason;
  EXPECT_EQ(fixed.configuration, "async=1");
}

TEST(Properties, ThePartnerRunsInItsDefaultConfiguration) {
  PropertyOptions options;
  options.against = "fake";
  options.cases = 6;
  // The partner is judged by its default configuration's capabilities: that
  // it does not declare asynchronous completion does not stop the family.
  std::vector<PropertyResult> rows = runPropertyInConfigurations(
      family("async-completion"), options, {{{"async", "1"}}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NE(rows[0].status, PropertyResult::Status::Failed) << rows[0].reason;
  EXPECT_NE(rows[0].status, PropertyResult::Status::Skipped) << rows[0].reason;
}

TEST(Properties, APartnerWithOtherCapabilitiesRunsUnderItsOwn) {
  // The fake device under another name, so that its configuration (written
  // "BACKEND:KEY") does not reach the fake partner.
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "other-fake";
  info.testOnly = true;
  BackendRegistry::instance().add(info);
  PropertyOptions options;
  options.backend = "other-fake";
  options.against = "fake";
  options.cases = 30;
  // Without resident tensors against a partner with them: the family runs,
  // each side held to its own capabilities, and passes.
  for (const char *name : {"copy-outputs-to-host", "resident-elsewhere"}) {
    std::vector<PropertyResult> rows = runPropertyInConfigurations(
        family(name), options, {{{"resident", "0"}}});
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].status, PropertyResult::Status::Passed)
        << name << ": " << rows[0].reason;
    EXPECT_EQ(rows[0].cases, 30) << name;
    EXPECT_GT(rows[0].steps, 0u) << name;
  }
}

TEST(Properties, AParameterOfMovesBetweenDevicesIsTestedWhereTheyMove) {
  // The fake device's alignment, declared here as mattering only where
  // tensors move between devices, to see the sweep honour a parameter's
  // scope.
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "scoped-fake";
  info.testOnly = true;
  for (BackendParameter &p : info.parameters)
    if (p.name == "alignment")
      p.scope = BackendParameter::Scope::BetweenDevices;
  BackendRegistry::instance().add(info);
  // Key states every case reaches, so that no coverage round adds cases.
  PropertyFamily viewSharing = family("view-sharing");
  PropertyFamily crossDevice = family("cross-device");
  viewSharing.keyLabels = crossDevice.keyLabels = {"create"};
  PropertyOptions options;
  options.backend = "scoped-fake";
  options.cases = 4;
  std::vector<ParameterMap> configurations = {{}, {{"alignment", "4096"}}};
  std::vector<PropertyResult> one =
      runPropertyInConfigurations(viewSharing, options, configurations);
  EXPECT_EQ(one[1].status, PropertyResult::Status::Skipped);
  EXPECT_EQ(one[1].reason, "parameter 'alignment' matters only where tensors "
                           "move between devices, which this family is not "
                           "about");
  EXPECT_EQ(one[0].cases, 4);
  std::vector<PropertyResult> two =
      runPropertyInConfigurations(crossDevice, options, configurations);
  EXPECT_NE(two[1].status, PropertyResult::Status::Skipped) << two[1].reason;
  EXPECT_EQ(two[1].cases, 2);
  // Fixed with --param, it holds in every family.
  options.parameters = {{"alignment", "4096"}};
  std::vector<PropertyResult> fixed = runPropertyInConfigurations(
      family("view-sharing"), options, {{{"alignment", "4096"}}});
  EXPECT_NE(fixed[0].status, PropertyResult::Status::Skipped)
      << fixed[0].reason;
}

TEST(Properties, AFailureNamesItsConfigurationAndReplaysWithIt) {
  PropertyOptions options;
  options.backend = "mutant:accounting-drift";
  options.parameters = {{"async", "1"}};
  options.cases = 5;
  options.failureDirectory = ::testing::TempDir();
  PropertyResult r = runProperty(family("view-sharing"), options);
  ASSERT_EQ(r.status, PropertyResult::Status::Failed) << r.reason;
  EXPECT_EQ(r.configuration, "async=1");
  EXPECT_NE(r.scenarioFile.find("view-sharing-mutant_accounting-drift-async=1-"
                                "1.scn"),
            std::string::npos)
      << r.scenarioFile;
  EXPECT_EQ(r.replayCommand, "drt-replay " + r.scenarioFile +
                                 " --backend mutant:accounting-drift --param "
                                 "async=1 --param seed=" +
                                 r.parameters.at("seed"));
  // The printed scenario carries no configuration: it runs on any backend.
  EXPECT_EQ(r.minimalScenario.find("async"), std::string::npos)
      << r.minimalScenario;
  std::ifstream file(r.scenarioFile);
  std::string first, second;
  std::getline(file, first);
  std::getline(file, second);
  EXPECT_NE(first.find("in configuration async=1"), std::string::npos) << first;
  EXPECT_EQ(second, "# replay: " + r.replayCommand);
}

/// A device whose third read-back in the process, and no other, returns a
/// byte changed: a failure that does not come again when its case runs a
/// second time, as one that hangs on an interleaving.
class ThirdReadBackCorrupt final : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ThirdReadBackCorrupt() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    static std::atomic<int> calls{0};
    if (++calls != 3 || bytes == 0)
      return FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
    FakeDevice::copyFromDevice(src, dst, bytes,
                               [dst, done = std::move(done)](Error e) {
                                 if (!e)
                                   dst[0] ^= std::byte{1};
                                 done(std::move(e));
                               });
  }
};

TEST(Properties, AFailureThatDoesNotComeAgainIsShrunkAndReplayedRepeatedly) {
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "test:third-read-back-corrupt";
  info.factory =
      [](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
    return std::make_unique<ThirdReadBackCorrupt>(config);
  };
  info.testOnly = true;
  BackendRegistry::instance().add(info);
  PropertyOptions options;
  options.backend = info.name;
  options.cases = 20;
  options.failureDirectory = ::testing::TempDir();
  PropertyResult r = runProperty(family("view-sharing"), options);
  ASSERT_EQ(r.status, PropertyResult::Status::Failed) << r.reason;
  // A scenario with nothing issued without waiting and no parallel block,
  // whose failure does not come again: every candidate gets 25 runs, none
  // fails, so nothing smaller is kept; and the replay asks for 100 runs.
  EXPECT_EQ(r.shrinksAccepted, 0) << r.minimalScenario;
  EXPECT_GT(r.shrinksTried, 0);
  EXPECT_EQ(r.minimalScenario.find('&'), std::string::npos)
      << r.minimalScenario;
  EXPECT_NE(r.replayCommand.find(" --repeat 100"), std::string::npos)
      << r.replayCommand;
}

TEST(Properties, TheReplayCommandStartsWithTheGivenReplayProgram) {
  // A backend's own replay tool, or drt-replay with the plugins it needs.
  PropertyOptions options;
  options.backend = "mutant:accounting-drift";
  options.cases = 5;
  options.failureDirectory = ::testing::TempDir();
  options.replayProgram = "/opt/mine/mine-replay --plugin /opt/mine/libmine.so";
  PropertyResult r = runProperty(family("view-sharing"), options);
  ASSERT_EQ(r.status, PropertyResult::Status::Failed) << r.reason;
  EXPECT_EQ(r.replayCommand.rfind(options.replayProgram + " " + r.scenarioFile +
                                      " --backend mutant:accounting-drift",
                                  0),
            0u)
      << r.replayCommand;
}

TEST(Properties, FailFastStopsAtTheFirstFailingConfiguration) {
  PropertyOptions options;
  options.backend = "mutant:accounting-drift";
  options.cases = 4;
  options.failureDirectory = ::testing::TempDir();
  options.failFast = true;
  std::vector<PropertyResult> rows = runPropertyInConfigurations(
      family("view-sharing"), options, {{}, {{"async", "1"}}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, PropertyResult::Status::Failed);
  EXPECT_EQ(rows[1].status, PropertyResult::Status::Skipped);
  EXPECT_EQ(rows[1].reason, "not run: --fail-fast stopped at the failure in "
                            "configuration default");
  options.failFast = false;
  rows = runPropertyInConfigurations(family("view-sharing"), options,
                                     {{}, {{"async", "1"}}});
  EXPECT_EQ(rows[1].status, PropertyResult::Status::Failed) << rows[1].reason;
}

TEST(Report, SummaryColumnsStayAlignedForLongNames) {
  RunSummary summary;
  PropertyResult a;
  a.name = "destruction-releases-once";
  a.backend = "mutant:run-leaks-output-copies";
  a.configuration = "pinned-staging=1 shared-context=0";
  a.cases = 12;
  PropertyResult b;
  b.name = "mixed";
  b.backend = "fake";
  b.configuration = "default";
  b.status = PropertyResult::Status::Skipped;
  b.reason = "why";
  summary.results = {a, b};
  std::string table = summaryTable(summary);
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << table;
  // Every column starts where its header does, on every row.
  for (const char *header :
       {"backend", "configuration", "cases", "steps", "result", "coverage"}) {
    size_t column = lines[0].find(header);
    ASSERT_NE(column, std::string::npos) << header;
    for (size_t row : {2u, 3u}) {
      ASSERT_GT(lines[row].size(), column) << table;
      EXPECT_NE(lines[row][column], ' ') << header << " in " << lines[row];
      EXPECT_EQ(lines[row][column - 1], ' ') << header << " in " << lines[row];
    }
  }
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

/// The fake device, refusing to start with NotSupported where its
/// configuration asks for "exotic=1", as a device refuses a parameter its
/// platform cannot honour.
class RefusesExotic : public fake::FakeDevice {
public:
  using FakeDevice::FakeDevice;
  Error init() override {
    if (config().parameter("exotic") == std::optional<std::string>("1"))
      return makeError(ErrorCode::NotSupported,
                       "parameter 'exotic' needs what this host lacks");
    return FakeDevice::init();
  }
};

TEST(Properties, AConfigurationTheDeviceCannotHonourIsSkippedWithTheReason) {
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "refuses-exotic";
  info.testOnly = true;
  info.parameters.push_back(BackendParameter::boolean(
      "exotic", false, "a parameter some hosts cannot honour"));
  info.factory = [](const DeviceConfig &config) {
    return std::unique_ptr<DeviceManager>(new RefusesExotic(config));
  };
  BackendRegistry::instance().add(info);
  PropertyOptions options;
  options.backend = "refuses-exotic";
  options.cases = 10;
  std::vector<PropertyResult> rows = runPropertyInConfigurations(
      family("view-sharing"), options, {{}, {{"exotic", "1"}}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, PropertyResult::Status::Passed) << rows[0].reason;
  EXPECT_EQ(rows[1].status, PropertyResult::Status::Skipped);
  EXPECT_EQ(rows[1].reason,
            "this configuration is not supported here: parameter 'exotic' "
            "needs what this host lacks");
  EXPECT_EQ(rows[1].cases, 0);
}

TEST(Properties, ADeviceThatDeclaresOtherCapabilitiesThanItsBackendFails) {
  // The registry says resident tensors whatever the configuration; the
  // device made with resident=0 says none. The suite would choose the
  // families for the one and run them on the other.
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "misdeclaring-fake";
  info.testOnly = true;
  info.capabilitiesFor = [](const DeviceConfig &) {
    return fake::fakeBackendInfo().capabilities;
  };
  BackendRegistry::instance().add(info);
  PropertyOptions options;
  options.backend = "misdeclaring-fake";
  options.cases = 10;
  std::vector<PropertyResult> rows = runPropertyInConfigurations(
      family("view-sharing"), options, {{}, {{"resident", "0"}}});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, PropertyResult::Status::Passed) << rows[0].reason;
  EXPECT_EQ(rows[1].status, PropertyResult::Status::Failed);
  EXPECT_NE(rows[1].reason.find("backend 'misdeclaring-fake' declares "
                                "capabilities resident-tensors"),
            std::string::npos)
      << rows[1].reason;
  EXPECT_NE(rows[1].reason.find("but the device it creates declares"),
            std::string::npos)
      << rows[1].reason;
}

namespace {
/// The devices a test backend made with its marked parameter value, and
/// without it.
struct DeviceCounts {
  std::atomic<int> marked{0}, plain{0};
};

/// Registers \p name: the fake backend whose max-delay-us declares \p value
/// through \p declare (BackendParameter::widensRacesWith, say) and nothing
/// else, counting in
/// \p counts the devices it makes with that value and without.
void registerMarkingFake(const std::string &name,
                         std::string BackendParameter::*declare,
                         const std::string &value, DeviceCounts &counts) {
  BackendInfo info = fake::fakeBackendInfo();
  info.name = name;
  info.testOnly = true;
  // The parameter declares the one role \p declare names: a value it held
  // for another (the fake device's holding value) would take its place in
  // the blocks that draw that role.
  for (BackendParameter &p : info.parameters)
    if (p.name == "max-delay-us") {
      p.widensRacesWith.clear();
      p.holdsOperationsWith.clear();
      p.*declare = value;
    }
  info.factory = [&counts, value](const DeviceConfig &c) {
    auto it = c.parameters.find("max-delay-us");
    ++(it != c.parameters.end() && it->second == value ? counts.marked
                                                       : counts.plain);
    return fake::fakeBackendInfo().factory(c);
  };
  BackendRegistry::instance().add(info);
}

/// Runs \p family on \p backend in one configuration of \p cases cases;
/// expects it to pass.
void runPassing(const std::string &family, const std::string &backend,
                int cases, const ParameterMap &configuration) {
  PropertyOptions options;
  options.backend = backend;
  options.cases = cases;
  std::vector<PropertyResult> rows =
      runPropertyInConfigurations(::family(family), options, {configuration});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, PropertyResult::Status::Passed) << rows[0].reason;
}
} // namespace

TEST(Properties, ConcurrencyFamiliesWidenRaceWindowsInHalfTheirCases) {
  // A fake device whose max-delay-us declares 7 as its widening value:
  // parallel sets it on the devices of about half its cases, except in a
  // configuration that sets the parameter itself.
  static DeviceCounts counts;
  registerMarkingFake("race-widening-fake", &BackendParameter::widensRacesWith,
                      "7", counts);
  runPassing("parallel", "race-widening-fake", 40, {{"async", "1"}});
  int widened = counts.marked.exchange(0), plain = counts.plain.exchange(0);
  EXPECT_GT(widened, (widened + plain) / 4)
      << widened << " of " << widened + plain;
  EXPECT_LT(widened, (widened + plain) * 3 / 4)
      << widened << " of " << widened + plain;

  runPassing("parallel", "race-widening-fake", 40,
             {{"async", "1"}, {"max-delay-us", "3"}});
  EXPECT_EQ(counts.marked.exchange(0), 0);
  EXPECT_GT(counts.plain.exchange(0), 40);

  // A family about no races leaves it alone.
  runPassing("view-sharing", "race-widening-fake", 40, {{"async", "1"}});
  EXPECT_EQ(counts.marked.exchange(0), 0);
  EXPECT_GE(counts.plain.exchange(0), 40);
}

TEST(Properties, TheFaultsFamilyHoldsOperationsInFlightInAQuarterOfItsCases) {
  // A fake device whose max-delay-us declares 9 as its holding value: the
  // faults family sets it on the devices of about a quarter of its cases,
  // except in a configuration that sets the parameter itself.
  static DeviceCounts counts;
  registerMarkingFake("holding-fake", &BackendParameter::holdsOperationsWith,
                      "9", counts);
  runPassing("faults", "holding-fake", 80, {{"async", "1"}});
  int held = counts.marked.exchange(0), unheld = counts.plain.exchange(0);
  EXPECT_GT(held, (held + unheld) / 10) << held << " of " << held + unheld;
  EXPECT_LT(held, (held + unheld) / 2) << held << " of " << held + unheld;

  runPassing("faults", "holding-fake", 80,
             {{"async", "1"}, {"max-delay-us", "3"}});
  EXPECT_EQ(counts.marked.exchange(0), 0);
  EXPECT_GT(counts.plain.exchange(0), 80);
}

TEST(Properties, FanInBlocksHoldABackendsOperationsWithItsOwnValue) {
  // The parallel family's fan-in blocks (half its cases) name holding
  // values for the fake and OpenCL backends only; any other backend's
  // devices get the value its parameter declares (9 here), or its holding
  // operation completes before the waiters arrive. Without it only the
  // blocks that release beside an upload (a few percent) would hold.
  static DeviceCounts counts;
  registerMarkingFake("fan-in-holding-fake",
                      &BackendParameter::holdsOperationsWith, "9", counts);
  runPassing("parallel", "fan-in-holding-fake", 60, {{"async", "1"}});
  int held = counts.marked.exchange(0), unheld = counts.plain.exchange(0);
  EXPECT_GT(held, (held + unheld) / 4) << held << " of " << held + unheld;
  EXPECT_LT(held, (held + unheld) * 3 / 4) << held << " of " << held + unheld;
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
