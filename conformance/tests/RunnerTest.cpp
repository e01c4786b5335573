//===- RunnerTest.cpp - The runner, the model and differential mode -------===//
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <gtest/gtest.h>

using namespace drt;
using namespace drt::conformance;

namespace {

Scenario parse(const std::string &text) {
  ParseResult r = parseScenario(text);
  if (auto *e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << e->toString();
    return {};
  }
  return std::get<Scenario>(r);
}

RunResult run(const std::string &text, const std::string &backend = "fake",
              const std::string &against = "") {
  RunOptions options;
  options.backend = backend;
  options.against = against;
  return runScenario(parse(text), options);
}

TEST(Runner, ViewsObserveTheOwnersResidency) {
  RunResult r = run(R"(device d0
create a f32 [8] fill=1
view v a [4] at=4
to-device v d0 -> error InvalidArgument
to-device a d0
read v -> violation host-access-while-device
from-device a d0 keep
read v
write v 3
read a
)");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString()
                                           : r.setupError);
  EXPECT_EQ(r.steps, 9u);
  EXPECT_EQ(r.transitions["Host -to-device-> Device"], 1);
  EXPECT_EQ(r.transitions["Device -from-device-> Mirrored"], 1);
  EXPECT_EQ(r.transitions["Mirrored -write-> Host"], 1);
}

TEST(Runner, AWrongExpectationIsReportedAgainstTheModel) {
  RunResult r = run("device d0\ncreate a f32 [4]\nrelease a d0 -> error "
                    "InvalidArgument\n");
  ASSERT_TRUE(r.divergence);
  EXPECT_EQ(r.divergence->step, 2u);
  EXPECT_EQ(r.divergence->backend, "scenario");
  EXPECT_EQ(r.divergence->expected, "the model's ok");
}

TEST(Runner, UnknownBackendIsASetupError) {
  RunResult r = run("device d0\ncreate a f32 [4]\n", "no-such-backend");
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.setupError.find("no-such-backend"), std::string::npos);
}

TEST(Runner, RunsComputeExactResultsAndStayResident) {
  RunResult r = run(R"(device d0
create x i32 [4] fill=3
create y i32 [4] fill=4
create o i32 [4]
add-network n d0 i32 [4] o=mul(x,y)
run n x=x y=y o=o
read o -> violation host-access-while-device
ensure-outputs n
read o
)");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString() : "");
  EXPECT_GE(r.labels["run-leaves-outputs-resident"], 1);
  EXPECT_GE(r.labels["ensure-outputs-brings-back"], 1);
}

TEST(Runner, DifferentialFakeAgainstAsyncFake) {
  RunResult r = run(R"(device d0 async=1 seed=5
device d1 async=1 seed=9
create a f32 [4] fill=2
to-device a d0
to-device a d1
from-device a d1 keep
to-device a d0
shutdown d0
read a -> violation host-access-while-lost
refill a 3
read a
)",
                    "fake", "fake");
  EXPECT_TRUE(r.passed()) << (r.divergence ? r.divergence->toString() : "");
}

TEST(Runner, TraceShowsEveryStep) {
  RunOptions options;
  std::vector<std::string> lines;
  options.trace = [&](const std::string &l) { lines.push_back(l); };
  RunResult r = runScenario(parse("device d0\ncreate a f32 [4]\nto-device a "
                                  "d0\n"),
                            options);
  EXPECT_TRUE(r.passed());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("tensor a: Device on d0"), std::string::npos);
  EXPECT_NE(lines[1].find("[1 callback]"), std::string::npos);
}

} // namespace
