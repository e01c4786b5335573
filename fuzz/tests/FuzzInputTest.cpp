//===- FuzzInputTest.cpp - Fuzzer inputs as scenarios ---------------------===//
#include "drt/fuzz/FuzzInput.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/ChoiceSource.h"
#include "drt/conformance/Generators.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using namespace drt::conformance;
using namespace drt::fuzz;

namespace {

std::span<const uint8_t> bytesOf(const std::string &s) {
  return {reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

/// Random bytes, \p length of them, from \p seed.
std::string randomBytes(uint64_t seed, size_t length) {
  RandomSource rng(seed);
  std::string out(length, '\0');
  for (char &c : out)
    c = char(rng.below(256));
  return out;
}

DecodedInput decoded(const std::string &input, const FuzzSetup &setup = {}) {
  auto d = decodeInput(bytesOf(input), setup);
  EXPECT_TRUE(std::holds_alternative<DecodedInput>(d))
      << std::get<Rejection>(d).reason;
  return std::holds_alternative<DecodedInput>(d) ? std::get<DecodedInput>(d)
                                                 : DecodedInput{};
}

std::string rejection(const std::string &input, const FuzzSetup &setup = {}) {
  auto d = decodeInput(bytesOf(input), setup);
  return std::holds_alternative<Rejection>(d) ? std::get<Rejection>(d).reason
                                              : "";
}

TEST(ByteChoiceSource, TakesTheFewestBytesAChoiceNeeds) {
  const uint8_t bytes[] = {7, 0x34, 0x12, 200, 9};
  ByteChoiceSource s(bytes);
  EXPECT_EQ(s.below(1), 0u);
  EXPECT_EQ(s.consumed(), 0u) << "a choice of one takes no byte";
  EXPECT_EQ(s.below(256), 7u);
  EXPECT_EQ(s.below(65536), 0x1234u) << "two bytes, little-endian";
  EXPECT_EQ(s.below(100), 0u) << "200 modulo 100";
  EXPECT_FALSE(s.exhausted());
  EXPECT_EQ(s.below(4), 1u);
  EXPECT_TRUE(s.exhausted());
  EXPECT_EQ(s.below(10), 0u) << "every choice is 0 once the bytes run out";
  EXPECT_EQ(s.consumed(), 5u);
}

TEST(ByteChoiceSource, RunsOutInTheMiddleOfAChoice) {
  const uint8_t bytes[] = {1};
  ByteChoiceSource s(bytes);
  EXPECT_EQ(s.below(1000), 0u);
  EXPECT_TRUE(s.exhausted());
}

TEST(ScenarioGenerator, ARandomSourceGivesWhatASeedGives) {
  for (const PropertyFamily &family : propertyFamilies()) {
    ScenarioGenerator g(family.profile(), drt::Capabilities{});
    for (uint64_t seed : {1u, 2u, 99u}) {
      RandomSource rng(seed);
      EXPECT_EQ(g.generate(seed, 30), g.generate(rng, 30)) << family.name;
    }
  }
}

TEST(DecodeInput, EveryChoicesInputIsAWellFormedScenarioThatPasses) {
  FuzzSetup setup;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    std::string input = randomBytes(seed, size_t(seed * 7 % 400));
    if (!input.empty() && input[0] == '#')
      input[0] = 0;
    DecodedInput d = decoded(input, setup);
    EXPECT_EQ(d.form, DecodedInput::Form::Choices);
    EXPECT_LE(d.scenario.commands.size(), setup.maxCommands);
    EXPECT_EQ(validateScenario(d.scenario), "") << seed;
    EXPECT_EQ(wellFormedScenario(d.scenario, "fake"), d.scenario)
        << "the model keeps every command and predicts every expectation";
    EXPECT_EQ(decoded(input, setup).scenario, d.scenario)
        << "decoding is deterministic";
    RunResult r = runScenario(d.scenario, {});
    EXPECT_TRUE(r.passed())
        << seed << "\n"
        << (r.divergence ? r.divergence->toString() : r.setupError)
        << printScenario(d.scenario);
  }
}

TEST(DecodeInput, ChoicesReachEveryFamilyAndEveryCommand) {
  std::set<std::string> families;
  std::set<CommandKind> kinds;
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    std::string input = randomBytes(seed, 300);
    input[0] = char(seed % 251 == '#' ? 0 : seed % 251);
    DecodedInput d = decoded(input);
    families.insert(d.family);
    for (const Command &c : d.scenario.commands)
      kinds.insert(c.kind);
  }
  for (const PropertyFamily &family : propertyFamilies())
    EXPECT_TRUE(families.count(family.name)) << family.name;
  for (int k = 0; k <= int(CommandKind::Free); ++k)
    EXPECT_TRUE(kinds.count(CommandKind(k))) << commandKindName(CommandKind(k));
}

TEST(DecodeInput, TheBytesEndTheScenario) {
  DecodedInput empty = decoded("");
  EXPECT_FALSE(empty.family.empty());
  EXPECT_EQ(empty.family, decoded(std::string("\x00\x00", 2)).family)
      << "the bytes that are missing read as zeros: slot 0";
  EXPECT_TRUE(empty.scenario.commands.empty());
  DecodedInput shortInput = decoded(std::string("\x00\x05\x00\x00", 4));
  EXPECT_LE(shortInput.scenario.commands.size(), 2u);
  FuzzSetup few;
  few.maxCommands = 3;
  EXPECT_LE(decoded(randomBytes(5, 500), few).scenario.commands.size(), 3u);
}

TEST(SlotOwner, AFamilyAddedLaterMovesNoOtherSlot) {
  std::vector<uint64_t> hashes;
  for (const char *family : {"mixed", "sizes", "faults", "view-sharing"})
    for (const char *configuration : {"default", "async=1", "alignment=4096"})
      hashes.push_back(generatorNameHash(family, configuration));
  std::vector<uint64_t> more = hashes;
  more.insert(more.begin() + 3, generatorNameHash("pinned", "default"));
  std::vector<size_t> owned(hashes.size()), ownedAfter(more.size());
  size_t movedToNew = 0;
  for (uint64_t slot = 0; slot < GeneratorSlots; ++slot) {
    size_t before = slotOwner(hashes, slot), after = slotOwner(more, slot);
    ++owned[before];
    ++ownedAfter[after];
    if (after == 3) {
      ++movedToNew;
      continue;
    }
    ASSERT_EQ(more[after], hashes[before])
        << "slot " << slot << " moved between two families that were there";
  }
  EXPECT_GT(movedToNew, GeneratorSlots / more.size() / 2)
      << "the new family takes about its share";
  EXPECT_LT(movedToNew, 2 * GeneratorSlots / more.size());
  for (size_t n : owned)
    EXPECT_GT(n, GeneratorSlots / hashes.size() / 2)
        << "every family owns about its share of the slots";
}

TEST(DecodeInput, ChoicesDrawOnlyFamiliesTheConfigurationRuns) {
  for (const drt::BackendInfo &info : drt::BackendRegistry::instance().list()) {
    FuzzSetup setup;
    setup.backend = info.name;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      std::string input = randomBytes(seed, 20);
      input[0] = char(seed == '#' ? 0 : seed);
      DecodedInput in = decoded(input, setup);
      // The devices carry the configuration the family was drawn in, and
      // its capabilities allow the family.
      ASSERT_FALSE(in.scenario.devices.empty());
      auto caps = drt::BackendRegistry::instance().capabilitiesFor(
          info.name, in.scenario.devices.front().parameters);
      ASSERT_TRUE(caps) << caps.takeError().message();
      for (const PropertyFamily &f : propertyFamilies()) {
        if (f.name == in.family) {
          EXPECT_EQ(f.skipReason(*caps), "")
              << info.name << " " << in.family << " " << in.configuration;
        }
      }
    }
  }
  FuzzSetup unknown;
  unknown.backend = "no-such-backend";
  EXPECT_NE(setupProblem(unknown).find("unknown backend 'no-such-backend'"),
            std::string::npos);
}

TEST(DecodeInput, AScenarioTextIsItsOwnSeed) {
  std::string text = "# a seed\n"
                     "device d0\n"
                     "create a f32 [4] fill=3\n"
                     "to-device a d0\n"
                     "read a -> error OutOfMemory\n";
  FuzzSetup asWritten;
  asWritten.deviceParameters.clear();
  DecodedInput d = decoded(text, asWritten);
  EXPECT_EQ(d.form, DecodedInput::Form::Text);
  ASSERT_EQ(d.scenario.commands.size(), 3u);
  EXPECT_EQ(d.scenario.commands[2].expect,
            Outcome::violationOf(drt::ViolationKind::HostAccessWhileOnDevice))
      << "a text's expectations are the model's, not the text's";
  Scenario s = std::get<Scenario>(parseScenario(text));
  EXPECT_EQ(d.scenario, wellFormedScenario(s, "fake"));
  std::string seed = encodeSeed(d.scenario, "from a test");
  EXPECT_EQ(seed.rfind("# from a test\n", 0), 0u);
  EXPECT_EQ(decoded(seed, asWritten).scenario, d.scenario);
}

TEST(DecodeInput, TheSetupsDeviceParametersReachEveryDevice) {
  std::string text = "# two devices\n"
                     "device d0\n"
                     "device d1\n"
                     "create a f32 [4] fill=3\n"
                     "to-device a d1\n";
  for (const std::string &input : {text, randomBytes(7, 64)}) {
    DecodedInput d = decoded(input);
    ASSERT_FALSE(d.scenario.devices.empty());
    for (const DeviceSpec &spec : d.scenario.devices)
      EXPECT_EQ(spec.parameters.at("fake:max-delay-us"), "0")
          << d.describe() << ": the fake device's delays are off by default";
  }
  FuzzSetup setup;
  setup.deviceParameters = {{"fake:seed", "9"}};
  for (const DeviceSpec &spec : decoded(text, setup).scenario.devices) {
    EXPECT_EQ(spec.parameters.at("fake:seed"), "9");
    EXPECT_EQ(spec.parameters.count("fake:max-delay-us"), 0u);
  }
  setup.deviceParameters = {{"fake:max-delay-us", "many"}};
  InputCheck check = checkScenarioInput(bytesOf(randomBytes(7, 64)), setup);
  ASSERT_TRUE(check.finding.has_value())
      << "a parameter the backend refuses fails the setup of a generated "
         "scenario";
  EXPECT_NE(check.finding->result.setupError.find("max-delay-us"),
            std::string::npos)
      << check.finding->result.setupError;
}

TEST(DecodeInput, OneInputInEightKeepsShortDelaysAndItsCommands) {
  FuzzSetup undelayed;
  undelayed.delayedInputsOneIn = 0;
  int delayed = 0, inputs = 400;
  for (int i = 0; i < inputs; ++i) {
    std::string input = randomBytes(uint64_t(1000 + i), 64);
    DecodedInput d = decoded(input), plain = decoded(input, undelayed);
    ASSERT_EQ(d.scenario.commands, plain.scenario.commands)
        << d.describe() << ": delays must not change what an input decodes to";
    ASSERT_EQ(d.scenario.devices.size(), plain.scenario.devices.size());
    bool slow = false;
    for (size_t k = 0; k < d.scenario.devices.size(); ++k) {
      const std::string &delay =
          d.scenario.devices[k].parameters.at("fake:max-delay-us");
      EXPECT_TRUE(delay == "0" || delay == "50") << d.describe();
      EXPECT_EQ(plain.scenario.devices[k].parameters.at("fake:max-delay-us"),
                "0");
      slow = slow || delay == "50";
    }
    delayed += slow;
  }
  // One in eight slots: about 50 of 400, far from none and from all.
  EXPECT_GT(delayed, inputs / 16);
  EXPECT_LT(delayed, inputs / 4);
}

TEST(DecodeInput, ATextOutsideTheInputSpaceIsRejected) {
  EXPECT_NE(rejection("# bad\ndevice d0\ncreate a f99 [1]\n"), "");
  EXPECT_NE(rejection("# big\ndevice d0\ncreate a f32 [4194304]\n")
                .find("keeps more than 65536 bytes live"),
            std::string::npos);
  EXPECT_NE(rejection("# big network\ndevice d0\n"
                      "add-network n d0 f32 [4194304] o=relu(x)\n")
                .find("larger than the largest size class"),
            std::string::npos);
  // A size the framework must refuse allocates nothing: a valid input.
  EXPECT_EQ(rejection("# overflow\ndevice d0\n"
                      "create a u8 [4294967296x4294967296]\n"),
            "");
  // Live bytes: the setup's bound (64 KiB by default), and never more than
  // the input space's own.
  EXPECT_EQ(rejection("# fits\ndevice d0\ncreate a f32 [16384]\n"), "");
  EXPECT_NE(rejection("# one more\ndevice d0\ncreate a f32 [16385]\n")
                .find("keeps more than 65536 bytes live"),
            std::string::npos);
  FuzzSetup roomy;
  roomy.maxLiveBytes = uint64_t(1) << 40;
  std::string live = "# live\ndevice d0\n";
  for (int i = 0; i < 3; ++i)
    live += "create t" + std::to_string(i) + " f32 [2097152]\n";
  EXPECT_EQ(rejection(live, roomy), "");
  live += "create t3 f32 [2097152]\n";
  EXPECT_NE(rejection(live, roomy).find("keeps more than 25165824 bytes live"),
            std::string::npos);
  EXPECT_NE(rejection("# slow\ndevice d0 async=1 max-delay-us=100000000\n")
                .find("max-delay-us"),
            std::string::npos);
  std::string longText = "# long\ndevice d0\ncreate a f32 [1]\n";
  for (int i = 0; i < 64; ++i)
    longText += "read a\n";
  EXPECT_NE(rejection(longText).find("more than 64 commands"),
            std::string::npos);
}

TEST(CheckScenarioInput, AFindingNamesTheDivergenceAndTheScenario) {
  FuzzSetup setup;
  setup.backend = "mutant:corrupt-read-back";
  std::string text = "# round trip\ndevice d0\ncreate a f32 [2] fill=1\n"
                     "to-device a d0\nfrom-device a d0 release\n";
  InputCheck check = checkScenarioInput(bytesOf(text), setup);
  ASSERT_TRUE(check.finding);
  EXPECT_FALSE(check.rejected);
  std::string report = check.finding->report();
  EXPECT_NE(report.find("scenario text"), std::string::npos) << report;
  EXPECT_NE(report.find("backend:  mutant:corrupt-read-back"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("from-device a d0 release"), std::string::npos)
      << report;
  setup.backend = "fake";
  EXPECT_FALSE(checkScenarioInput(bytesOf(text), setup).finding);
}

TEST(CheckScenarioInput, ChoicesFindAMutant) {
  FuzzSetup setup;
  setup.backend = "mutant:corrupt-read-back";
  size_t found = 0;
  for (uint64_t seed = 0; seed < 200 && !found; ++seed) {
    std::string input = randomBytes(seed, 200);
    input[0] = 0;
    InputCheck check = checkScenarioInput(bytesOf(input), setup);
    EXPECT_FALSE(check.rejected);
    found += bool(check.finding);
  }
  EXPECT_GT(found, 0u);
}

TEST(CheckScenarioInput, ADeviceTheBackendRefusesRejectsAText) {
  FuzzSetup setup;
  setup.backend = "fake";
  std::string text = "# refused\ndevice d0 async=maybe\ncreate a f32 [1]\n";
  InputCheck check = checkScenarioInput(bytesOf(text), setup);
  ASSERT_TRUE(check.rejected);
  EXPECT_NE(check.rejected->reason.find("refuses"), std::string::npos);
  EXPECT_FALSE(check.finding);
}

TEST(CheckScenarioText, ParsesPrintsAndParsesBack) {
  EXPECT_EQ(checkScenarioText("device d0\ncreate a f32 [2x3] fill=specials:2\n"
                              "add-network n d0 f32 [2x3] o=scale(x,0.3)\n"
                              "run n x=a o=a -> error InvalidArgument\n"),
            "");
  EXPECT_EQ(checkScenarioText("not a scenario \x01\x02"), "")
      << "a parse error is an answer, not a problem";
  EXPECT_EQ(checkScenarioText(""), "");
}

TEST(SetupFromEnvironment, TargetsAndOverrides) {
  unsetenv("DRT_FUZZ_BACKEND");
  unsetenv("DRT_FUZZ_AGAINST");
  unsetenv("DRT_FUZZ_MAX_COMMANDS");
  EXPECT_EQ(setupFromEnvironment(Target::Residency).backend, "fake");
  EXPECT_EQ(setupFromEnvironment(Target::Residency).against, "");
  EXPECT_EQ(setupFromEnvironment(Target::Differential).backend, "opencl");
  EXPECT_EQ(setupFromEnvironment(Target::Differential).against, "fake");
  setenv("DRT_FUZZ_BACKEND", "mutant:double-free", 1);
  setenv("DRT_FUZZ_MAX_COMMANDS", "16", 1);
  FuzzSetup s = setupFromEnvironment(Target::Residency);
  EXPECT_EQ(s.backend, "mutant:double-free");
  EXPECT_EQ(s.maxCommands, 16u);
  EXPECT_EQ(s.deviceParameters.count("mutant:double-free:max-delay-us"), 1u)
      << "a mutant backend reads only keys qualified by its own name";
  EXPECT_EQ(s.deviceParameters.count("fake:max-delay-us"), 1u)
      << "the reference devices of some families are fake devices";
  EXPECT_EQ(setupProblem(s), "");
  setenv("DRT_FUZZ_MAX_COMMANDS", "many", 1);
  EXPECT_NE(setupProblem(setupFromEnvironment(Target::Residency)), "");
  unsetenv("DRT_FUZZ_BACKEND");
  unsetenv("DRT_FUZZ_MAX_COMMANDS");
  EXPECT_EQ(setupFromEnvironment(Target::Residency).deviceParameters,
            (drt::ParameterMap{{"fake:max-delay-us", "0"}}));
  EXPECT_EQ(setupFromEnvironment(Target::Residency).delayedInputsOneIn, 8u);
  setenv("DRT_FUZZ_DEVICE_PARAMS", "fake:max-delay-us=0", 1);
  EXPECT_EQ(setupFromEnvironment(Target::Residency).delayedInputsOneIn, 0u)
      << "device parameters given are what every input's devices get";
  setenv("DRT_FUZZ_DEVICE_PARAMS", "fake:max-delay-us=20,fake:seed=3", 1);
  EXPECT_EQ(
      setupFromEnvironment(Target::Residency).deviceParameters,
      (drt::ParameterMap{{"fake:max-delay-us", "20"}, {"fake:seed", "3"}}));
  setenv("DRT_FUZZ_DEVICE_PARAMS", "", 1);
  EXPECT_TRUE(setupFromEnvironment(Target::Residency).deviceParameters.empty());
  setenv("DRT_FUZZ_DEVICE_PARAMS", "fake:max-delay-us", 1);
  EXPECT_EQ(setupProblem(setupFromEnvironment(Target::Residency)),
            "DRT_FUZZ_DEVICE_PARAMS: 'fake:max-delay-us' is not KEY=VALUE "
            "(KEY may be BACKEND:NAME)");
  unsetenv("DRT_FUZZ_DEVICE_PARAMS");
  EXPECT_EQ(parseTarget("scenario-text"), Target::ScenarioText);
  EXPECT_EQ(parseTarget("nope"), std::nullopt);
}

} // namespace
