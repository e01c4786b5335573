//===- ScenarioTextTest.cpp - The scenario text form ----------------------===//
#include "drt/conformance/ScenarioText.h"
#include "drt/conformance/Generators.h"
#include "drt/conformance/Model.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cctype>

using namespace drt;
using namespace drt::conformance;

namespace {

const char *EveryCommand = R"(device d0 budget=4096 copy-to-host
device d1 async=1 seed=7
device r backend=fake budget=128
create a f32 [2x4] fill=3
create s i32 []
view v a [4] at=2
clone c v
alloc L0 d0 64
move-construct b a
move-assign c b
self-move c
to-device c d0 &
to-device c d0 at=L0 -> error InvalidArgument
from-device c d0 keep &
from-device c d0 release
release c d0
double-release c d0
read v -> violation use-of-moved-from
write c 4
refill c 5
add-network n d1 f32 [4] o=add(x,y) p=relu(o) q=scale(p,-1.5) r=copy(q) m=mul(r,r)
run n x=c y=c o=c &
evict-network n
ensure-outputs n -> error InvalidArgument
shutdown d1
inject-fault d0 from-device nth=2 DeviceLost
free L0 d0
destroy c
)";

Scenario parseOk(const std::string &text) {
  ParseResult r = parseScenario(text);
  if (auto *e = std::get_if<ParseError>(&r))
    ADD_FAILURE() << "unexpected parse error " << e->toString();
  return std::get<Scenario>(r);
}

std::string parseError(const std::string &text) {
  ParseResult r = parseScenario(text);
  if (auto *e = std::get_if<ParseError>(&r))
    return e->toString();
  return "parsed";
}

TEST(ScenarioText, EveryCommandRoundTrips) {
  Scenario s = parseOk(EveryCommand);
  EXPECT_EQ(s.devices.size(), 3u);
  EXPECT_EQ(s.devices[2].backend, "fake");
  EXPECT_EQ(s.commands.size(), 25u);
  EXPECT_TRUE(s.commands[10].noWait);
  EXPECT_FALSE(s.commands[11].noWait);
  EXPECT_EQ(s.commands[18].kind, CommandKind::Run);
  EXPECT_TRUE(s.commands[18].noWait);
  EXPECT_EQ(s.commands[18].bindings.size(), 3u);
  EXPECT_EQ(printScenario(s), EveryCommand);
}

TEST(ScenarioText, SyncMarksCommandsIssuedThroughTheBlockingHelpers) {
  const char *text = R"(device d0
create a f32 [4] fill=1
alloc L0 d0 16
to-device a d0 at=L0 sync
from-device a d0 keep sync
add-network n d0 f32 [4] o=relu(x)
create b f32 [4]
run n x=a o=b sync -> error DeviceError
|1 to-device b d0 sync
|2 from-device a d0 release sync
)";
  Scenario s = parseOk(text);
  ASSERT_EQ(s.commands.size(), 9u);
  for (size_t i : {2u, 3u, 6u, 7u, 8u})
    EXPECT_TRUE(s.commands[i].sync) << "command " << i;
  EXPECT_FALSE(s.commands[0].sync);
  EXPECT_EQ(s.commands[2].location, "L0");
  EXPECT_FALSE(s.commands[3].release);
  EXPECT_EQ(s.commands[6].bindings.size(), 2u);
  EXPECT_EQ(s.commands[6].expect, Outcome::error(ErrorCode::DeviceError));
  EXPECT_EQ(printScenario(s), text);
  Scenario plain = s;
  plain.commands[3].sync = false;
  EXPECT_FALSE(plain == s);

  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nread a sync\n"),
            "3:8: expected end of line or '-> OUTCOME' ('sync', waiting in "
            "the framework's helper, follows to-device, from-device and run "
            "only), found 'sync'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nto-device a d0 sync &\n"),
            "3:21: expected end of line or '-> OUTCOME' ('sync' waits: it "
            "takes no '&'), found '&'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nto-device a d0 & sync\n"),
            "3:18: expected end of line or '-> OUTCOME', found 'sync'");
}

TEST(ScenarioText, InCallbackMarksCommandsIssuedFromTheCallbackBefore) {
  const char *text = R"(device d0
create a f32 [4] fill=1
to-device a d0
from-device a d0 keep in-callback
from-device a d0 release
release a d0 in-callback
create o f32 [4]
add-network n d0 f32 [4] o=relu(x)
run n x=a o=o
shutdown d0 in-callback
)";
  Scenario s = parseOk(text);
  ASSERT_EQ(s.commands.size(), 9u);
  for (size_t i : {2u, 4u, 8u})
    EXPECT_TRUE(s.commands[i].inCallback) << "command " << i;
  EXPECT_FALSE(s.commands[1].inCallback);
  EXPECT_FALSE(s.commands[2].release);
  EXPECT_EQ(printScenario(s), text);
  Scenario plain = s;
  plain.commands[2].inCallback = false;
  EXPECT_FALSE(plain == s);

  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nto-device a d0\n"
                       "read a in-callback\n"),
            "4:8: expected end of line or '-> OUTCOME' ('in-callback' "
            "follows to-device, from-device, release and shutdown written "
            "without 'sync' or '&'), found 'in-callback'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nto-device a d0\n"
                       "from-device a d0 keep sync in-callback\n"),
            "4:28: expected end of line or '-> OUTCOME' ('in-callback' "
            "follows to-device, from-device, release and shutdown written "
            "without 'sync' or '&'), found 'in-callback'");
  // The command before must call back to a callback of the runner's own,
  // with no transfer issued with '&' still pending when it is issued.
  auto problem = [](const std::string &before) {
    ParseResult r = parseScenario("device d0\ncreate a f32 [4]\n"
                                  "create b f32 [4]\n" +
                                  before + "\nto-device a d0 in-callback\n");
    const ParseError *e = std::get_if<ParseError>(&r);
    return e ? e->message : std::string("parsed");
  };
  EXPECT_EQ(problem("to-device b d0"), "parsed");
  for (const char *before :
       {"read b", "to-device b d0 sync", "to-device b d0 &\nread b",
        "to-device b d0\nfrom-device b d0 keep in-callback"})
    EXPECT_NE(problem(before).find("which must be a to-device, from-device "
                                   "or run"),
              std::string::npos)
        << before << ": " << problem(before);
  EXPECT_NE(problem("to-device b d0 &\nfrom-device b d0 keep")
                .find("is still pending when the command before it"),
            std::string::npos);
}

TEST(ScenarioText, DeclaredListsTheNetworksPlaceholdersInTheirOrder) {
  const char *text = R"(device d0
add-network n d0 f32 [4] o=add(x,y) p=relu(o) declared=p,y,o,x
)";
  Scenario s = parseOk(text);
  ASSERT_EQ(s.commands.size(), 1u);
  EXPECT_EQ(s.commands[0].declared,
            (std::vector<std::string>{"p", "y", "o", "x"}));
  EXPECT_EQ(printScenario(s), text);
  // The function declares them in that order.
  Function f = networkFunction(s.commands[0]);
  std::vector<std::string> order;
  for (const Placeholder &p : f.placeholders())
    order.push_back(p.name);
  EXPECT_EQ(order, s.commands[0].declared);
  EXPECT_EQ(parseError("device d0\nadd-network n d0 f32 [4] o=add(x,y) "
                       "declared=o,x\n"),
            "2:1: expected a well-formed scenario: step 1 (add-network): "
            "declared= lists network 'n''s placeholders, each once (o,x,y)");
  EXPECT_EQ(parseError("device d0\nadd-network n d0 f32 [4] o=relu(x) "
                       "declared=o,,x\n"),
            "2:47: expected a placeholder name, found ''");
}

TEST(ScenarioText, CommentsAndBlankLinesAreSkipped) {
  Scenario s = parseOk("# a comment\n\ndevice d0\n  create a u8 [3]\n");
  ASSERT_EQ(s.commands.size(), 1u);
  EXPECT_EQ(s.commands[0].elemKind, ElemKind::UInt8);
  EXPECT_EQ(s.commands[0].dims, std::vector<size_t>{3});
}

TEST(ScenarioText, ErrorsNameLineColumnAndWhatWasExpected) {
  EXPECT_EQ(parseError("device d0\ncreate a f33 [4]\n"),
            "2:10: expected an element kind (f32, i32, i64, u8, f16, bf16), "
            "found 'f33'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4xq]\n"),
            "2:17: expected a dimension (a number), found 'q'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nfrom-device a d0 maybe\n"),
            "3:18: expected release or keep, found 'maybe'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nread a -> error Oops\n"),
            "3:17: expected an error code (OutOfMemory, InvalidArgument, "
            "NotSupported, DeviceError, DeviceLost), found 'Oops'");
  EXPECT_EQ(parseError("device d0\nteleport a\n"),
            parseError("device d0\nteleport a\n"));
  EXPECT_NE(
      parseError("device d0\nteleport a\n").find("2:1: expected a command"),
      std::string::npos);
  EXPECT_EQ(parseError("device d0\nrelease a\n"),
            "2:10: expected a device name, found end of line");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nread b\n"),
            "3:1: expected a well-formed scenario: step 2 (read): unknown "
            "tensor 'b'");
  EXPECT_EQ(parseError("device d0\nadd-network n d0 f32 [4] o=pow(x)\n"),
            "2:28: expected an op (add, mul, relu, scale, copy), found 'pow'");
  // '&' follows transfers and runs only, and pending work must not meet a
  // shutdown or a fault, nor go to a device a DeviceLost may shut down.
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nread a &\n"),
            "3:8: expected end of line or '-> OUTCOME' ('&', issuing without "
            "waiting, follows to-device, from-device and run only), found "
            "'&'");
  // Nor may a run issued with '&' hold input copies on a device with a
  // budget, nor go to a device a DeviceLost may shut down.
  EXPECT_NE(parseError("device d0 budget=4096\ncreate a f32 [4]\n"
                       "create b f32 [4]\n"
                       "add-network n d0 f32 [4] o=copy(x)\n"
                       "run n x=a o=b &\n")
                .find("step 4 (run): '&' on device 'd0', which has a "
                      "memory budget"),
            std::string::npos);
  EXPECT_NE(parseError("device d0\ncreate a f32 [4]\ncreate b f32 [4]\n"
                       "add-network n d0 f32 [4] o=copy(x)\n"
                       "inject-fault d0 run nth=2 DeviceLost\n"
                       "run n x=a o=b &\n")
                .find("step 5 (run): '&' on device 'd0', where a planned "
                      "DeviceLost fault may shut the device down"),
            std::string::npos);
  EXPECT_NE(parseError("device d0\ncreate a f32 [4]\nto-device a d0 &\n"
                       "shutdown d0\n")
                .find("step 3 (shutdown): a transfer issued with '&' is still "
                      "pending"),
            std::string::npos);
  EXPECT_NE(parseError("device d0\ncreate a f32 [4]\n"
                       "inject-fault d0 run nth=3 DeviceLost\n"
                       "to-device a d0 &\n")
                .find("step 3 (to-device): '&' on device 'd0', where a "
                      "planned DeviceLost fault"),
            std::string::npos);
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nto-device a d0 &\n"
                       "read a -> violation host-access-while-device\n"
                       "shutdown d0\n"),
            "parsed");
}

TEST(ScenarioText, ValueClassesAreWrittenByName) {
  const char *text = R"(device d0
create a f16 [4] fill=specials
create b bf16 [2x2] fill=rounding:3
create c u8 [] fill=9
create d i64 [3] fill=random:7
write a extremes:1
refill b random
write c 2
)";
  Scenario s = parseOk(text);
  EXPECT_EQ(printScenario(s), text);
  ASSERT_EQ(s.commands.size(), 7u);
  EXPECT_EQ(s.commands[0].elemKind, ElemKind::Float16);
  EXPECT_EQ(s.commands[1].elemKind, ElemKind::BFloat16);
  EXPECT_EQ(valueClassOf(s.commands[0].pattern)->name, "specials");
  EXPECT_EQ(s.commands[0].pattern,
            valueClassOf(s.commands[0].pattern)->pattern);
  EXPECT_EQ(s.commands[1].pattern,
            valueClassOf(s.commands[1].pattern)->pattern + 3);
  EXPECT_EQ(s.commands[2].pattern, 9u);
  EXPECT_EQ(valueClassOf(s.commands[3].pattern)->name, "random");
  EXPECT_EQ(s.commands[4].pattern % ValueClassBase, 1u);
  EXPECT_EQ(valueClassOf(s.commands[5].pattern)->name, "random");
  EXPECT_EQ(s.commands[6].pattern, 2u);
}

TEST(ScenarioText, FillPatternErrorsSayWhatAPatternIs) {
  const std::string what =
      "expected a fill pattern (a number, or a value class specials, "
      "extremes, rounding or random, with an optional :VARIANT as in "
      "random:7)";
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4] fill=noise\n"),
            "2:23: " + what + " after fill=, found 'noise'");
  EXPECT_EQ(parseError("device d0\ncreate a f32 [4]\nwrite a specials:x\n"),
            "3:9: " + what + ", found 'specials:x'");
  // A number that selects a value class is written by name instead.
  std::string classNumber = std::to_string(ValueClassBase);
  EXPECT_EQ(
      parseError("device d0\ncreate a f32 [4]\nwrite a " + classNumber + "\n"),
      "3:9: " + what + ", found '" + classNumber + "'");
  EXPECT_EQ(
      parseError("device d0\ncreate a f32 [4] fill=random:" + classNumber +
                 "\n"),
      "2:23: " + what + " after fill=, found 'random:" + classNumber + "'");
}

RC_GTEST_PROP(ScenarioText, EveryPatternPrintsAndParsesBack, (uint64_t raw)) {
  // Small numbers, every class with small and huge variants, and any bits.
  uint64_t pattern = raw;
  switch (*rc::gen::inRange(0, 3)) {
  case 0:
    pattern = raw % 100;
    break;
  case 1: {
    auto classes = valueClasses();
    size_t which = *rc::gen::inRange<size_t>(0, classes.size());
    pattern = classes[which].pattern + raw % ValueClassBase;
    break;
  }
  default:
    break;
  }
  std::string text = printPattern(pattern);
  RC_ASSERT(parsePattern(text) == std::optional<uint64_t>(pattern));
  RC_ASSERT((valueClassOf(pattern) != nullptr) ==
            !std::isdigit(static_cast<unsigned char>(text[0])));
}

TEST(ScenarioText, ValidTypesTooLargeForTheRunnerAreRefusedWithTheLine) {
  // 2^46 bytes is the largest valid type (drt::MaxTensorBytes); the runner
  // cannot hold it, so the scenario is refused, naming the line.
  EXPECT_EQ(parseError("device d0\n# big\ncreate t u8 [70368744177664]\n"),
            "3:1: expected a well-formed scenario: step 1 (create): tensor 't' "
            "of type u8[70368744177664] holds 70368744177664 bytes, more than "
            "the 2147483648 bytes a scenario may create (the runner and the "
            "model hold every tensor in host memory); types over "
            "70368744177664 bytes, which the contract refuses, may be "
            "written");
  EXPECT_NE(parseError("device d0\ncreate t f32 [4096x4096x1024]\n")
                .find("holds 68719476736 bytes"),
            std::string::npos);
  // Invalid types stay writable: they test the violation.
  parseOk("device d0\ncreate t u8 [70368744177665] -> violation "
          "invalid-tensor-type\n");
  parseOk("device d0\ncreate t f32 [4096x4096x4096x4096] -> violation "
          "invalid-tensor-type\n");
  parseOk("device d0\ncreate t u8 [2147483648]\n");
  EXPECT_NE(parseError("device d0\ncreate t u8 [2147483649]\n")
                .find("holds 2147483649 bytes"),
            std::string::npos);
}

TEST(ScenarioText, ParametersForOneBackendRoundTrip) {
  const char *text = "device d0 fake:async=1 seed=3\ncreate a f32 [4]\n";
  Scenario s = parseOk(text);
  EXPECT_EQ(s.devices[0].parameters.at("fake:async"), "1");
  EXPECT_EQ(printScenario(s), text);
}

TEST(ScenarioText, ALocationOfAnotherDeviceIsTheDevicesToRefuse) {
  // Handing a location to a device that did not issue it is a command the
  // contract answers (InvalidArgument), not a malformed scenario; a
  // location never allocated still is one.
  ParseResult r =
      parseScenario("device d0\ndevice d1\nalloc L d0 16\n"
                    "free L d1 -> error InvalidArgument\n"
                    "create t u8 [16]\n"
                    "to-device t d1 at=L -> error InvalidArgument\n");
  ASSERT_TRUE(std::holds_alternative<Scenario>(r))
      << std::get<ParseError>(r).toString();
  Scenario s = std::get<Scenario>(r);
  Model m(s.devices, Capabilities{});
  for (const Command &c : s.commands)
    EXPECT_EQ(m.apply(c).outcome, c.expect) << printCommand(c);
  EXPECT_EQ(parseError("device d0\ndevice d1\nfree L d1\n"),
            "3:1: expected a well-formed scenario: step 1 (free): unknown "
            "location 'L'");
}

GeneratorProfile everythingProfile() {
  GeneratorProfile p;
  DeviceSpec d0, d1;
  d0.name = "d0";
  d0.budget = 256;
  d1.name = "d1";
  p.devices = {d0, d1};
  for (int k = 0; k <= int(CommandKind::Free); ++k)
    p.weights[CommandKind(k)] = 2;
  return p;
}

RC_GTEST_PROP(ScenarioText, PrintParsePrintIsIdentity, ()) {
  Capabilities caps;
  caps.faultInjection = true;
  Scenario s = *rc::gen::resize(30, genScenario(everythingProfile(), caps));
  std::string text = printScenario(s);
  ParseResult r = parseScenario(text);
  RC_ASSERT(std::holds_alternative<Scenario>(r));
  RC_ASSERT(printScenario(std::get<Scenario>(r)) == text);
  RC_ASSERT(std::get<Scenario>(r) == s);
}

} // namespace
