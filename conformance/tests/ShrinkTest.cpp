//===- ShrinkTest.cpp - The shrinker's simplifications --------------------===//
#include "drt/conformance/Shrink.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace drt;
using namespace drt::conformance;

namespace {

Scenario parsed(const char *text) {
  ParseResult r = parseScenario(text);
  if (const ParseError *e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << e->toString();
    return {};
  }
  return std::get<Scenario>(r);
}

Scenario normalizedOnFake(const Scenario &s) {
  return wellFormedScenario(s, "fake");
}

/// True when \p s has a run that succeeds.
bool runSucceeds(const Scenario &s) {
  return std::any_of(
      s.commands.begin(), s.commands.end(), [](const Command &c) {
        return c.kind == CommandKind::Run && c.expect == Outcome::ok();
      });
}

/// True when \p s fails on a device that corrupts every read-back.
bool failsOnCorruptReadBack(const Scenario &s) {
  RunOptions options;
  options.backend = "mutant:corrupt-read-back";
  return !runScenario(s, options).passed();
}

TEST(Shrink, DropsARunBindingTheNetworkNoLongerHasAndItsTensor) {
  // The "failure" is a run that succeeds; "o1" names no placeholder of the
  // network, so its binding and the tensor made for it must go.
  Scenario failing = parsed("device d0\n"
                            "add-network n0 d0 f32 [4] o0=copy(x)\n"
                            "create a f32 [4] fill=1\n"
                            "create b f32 [4]\n"
                            "create c f32 [4]\n"
                            "run n0 x=a o0=b o1=c\n");
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, runSucceeds);
  // A fill stops at small exact values (fill=1), never zeros.
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "add-network n0 d0 f32 [1] o0=copy(x)\n"
                                       "create a f32 [1] fill=1\n"
                                       "create b f32 [1]\n"
                                       "run n0 x=a o0=b\n");
}

TEST(Shrink, AnInputReadsTheNetworksFirstInputSoThatItsTensorGoes) {
  // A network without an "x": its second input comes to read its first,
  // and the tensor bound to the second goes with the binding.
  Scenario failing = parsed("device d0\n"
                            "add-network n0 d0 f32 [4] o0=mul(z,y)\n"
                            "create a f32 [4] fill=1\n"
                            "create b f32 [4] fill=1\n"
                            "create c f32 [4]\n"
                            "run n0 z=a y=b o0=c\n");
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, runSucceeds);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "add-network n0 d0 f32 [1] o0=mul(z,z)\n"
                                       "create a f32 [1] fill=1\n"
                                       "create c f32 [1]\n"
                                       "run n0 z=a o0=c\n");
}

TEST(Shrink, DropsAMoveThatOnlyRenamesATensor) {
  // The failure needs a tensor sent to the device (the runner reads it
  // back at the end); the moves after its create only rename it.
  Scenario failing = parsed("device d0\n"
                            "create t0 f32 [4] fill=1\n"
                            "create t1 f32 [1]\n"
                            "move-construct t2 t0\n"
                            "to-device t2 d0\n"
                            "move-assign t1 t2\n"
                            "from-device t1 d0 keep\n");
  ShrinkResult r =
      shrinkScenario(failing, normalizedOnFake, failsOnCorruptReadBack);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "create t0 f32 [1] fill=1\n"
                                       "to-device t0 d0\n");
}

TEST(Shrink, AViewOfAViewBecomesAViewOfTheBase) {
  // The "failure" needs a view that starts 3 elements into t; the view in
  // between only carries part of that offset.
  Scenario failing = parsed("device d0\n"
                            "create t f32 [8] fill=1\n"
                            "view v1 t [6] at=2\n"
                            "view v2 v1 [2] at=1\n"
                            "to-device v2 d0\n");
  auto startsThreeIn = [](const Scenario &s) {
    std::map<std::string, std::pair<std::string, uint64_t>> views;
    for (const Command &c : s.commands)
      if (c.expect.kind != Outcome::Kind::Ok)
        return false;
      else if (c.kind == CommandKind::View) {
        auto [base, offset] = views.count(c.source)
                                  ? views[c.source]
                                  : std::pair(c.source, uint64_t(0));
        views[c.target] = {base, offset + c.offset};
      }
    return std::any_of(views.begin(), views.end(), [](const auto &v) {
      return v.second.first == "t" && v.second.second == 3;
    });
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, startsThreeIn);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "create t f32 [4] fill=1\n"
                                       "view v2 t [1] at=3\n");
}

TEST(Shrink, AViewWhoseSharingDoesNotMatterBecomesATensorOfItsOwn) {
  // The "failure" needs v sent to the device, not that v shares t's record:
  // v becomes a create, filled as t was, and t goes.
  Scenario failing = parsed("device d0\n"
                            "create t f32 [8] fill=3\n"
                            "view v t [4] at=2\n"
                            "to-device v d0\n");
  auto sendsV = [](const Scenario &s) {
    return std::any_of(
        s.commands.begin(), s.commands.end(), [](const Command &c) {
          return c.kind == CommandKind::ToDevice && c.target == "v";
        });
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, sendsV);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "create v f32 [1] fill=1\n"
                                       "to-device v d0\n");
}

TEST(Shrink, FillsShrinkToSmallValuesThatStillTellTensorsApart) {
  // The "failure" needs a and b to hold different values (as a run that
  // reads the wrong buffer needs them to): both at fill 1 would lose it, so
  // the n-th tensor created stops at fill n.
  Scenario failing = parsed("device d0\n"
                            "create a f32 [4] fill=9\n"
                            "create b f32 [4] fill=7\n");
  auto fillsDiffer = [](const Scenario &s) {
    return s.commands.size() == 2 &&
           s.commands[0].pattern != s.commands[1].pattern;
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, fillsDiffer);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "create a f32 [1] fill=1\n"
                                       "create b f32 [1] fill=2\n");
}

TEST(Shrink, ATensorThatNeedNotBeDistinctBecomesAnEarlierOneOfItsType) {
  // The run succeeds with both inputs bound to one tensor: b goes, its
  // uses read a (the network keeps two inputs, so only merging the tensors
  // removes b). c, the output, cannot be a (an output shares its record
  // with no input), so it stays.
  Scenario failing = parsed("device d0\n"
                            "create a f32 [4] fill=1\n"
                            "create b f32 [4] fill=2\n"
                            "create c f32 [4]\n"
                            "add-network n0 d0 f32 [4] o0=add(x,y)\n"
                            "to-device b d0\n"
                            "run n0 x=a y=b o0=c\n");
  auto runsAnAdd = [](const Scenario &s) {
    return runSucceeds(s) &&
           std::any_of(
               s.commands.begin(), s.commands.end(), [](const Command &c) {
                 return c.kind == CommandKind::AddNetwork &&
                        c.nodes.size() == 1 && c.nodes[0].op == OpKind::Add &&
                        c.nodes[0].inputs.size() == 2 &&
                        c.nodes[0].inputs[0] != c.nodes[0].inputs[1];
               });
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, runsAnAdd);
  std::string printed = printScenario(r.scenario);
  EXPECT_EQ(printed.find("create b"), std::string::npos) << printed;
  EXPECT_NE(printed.find("create c"), std::string::npos) << printed;
}

TEST(Shrink, APlannedFaultMovesToTheOperationItStrikes) {
  // The "failure" is an upload of 'b' that fails; the fault strikes the
  // third upload, so the two before it stay unless the fault moves to just
  // before the one it strikes and strikes the first.
  Scenario failing = parsed("device d0\n"
                            "inject-fault d0 to-device nth=3 DeviceError\n"
                            "create a f32 [4] fill=1\n"
                            "create b f32 [4] fill=2\n"
                            "to-device a d0\n"
                            "release a d0\n"
                            "to-device a d0\n"
                            "to-device b d0\n");
  auto uploadOfBFails = [](const Scenario &s) {
    return std::any_of(
        s.commands.begin(), s.commands.end(), [](const Command &c) {
          return c.kind == CommandKind::ToDevice && c.target == "b" &&
                 c.expect == Outcome::error(ErrorCode::DeviceError);
        });
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, uploadOfBFails);
  EXPECT_EQ(printScenario(r.scenario),
            "device d0\n"
            "create b f32 [1] fill=1\n"
            "inject-fault d0 to-device nth=1 DeviceError\n"
            "to-device b d0 -> error DeviceError\n");
}

/// True when a run of \p s that succeeds reads, directly or through a view,
/// a record an earlier run that succeeded wrote (a view's record is its
/// source's).
bool readsWhatARunWrote(const Scenario &s) {
  std::map<std::string, std::string> record;
  std::set<std::string> written;
  bool reads = false;
  for (const Command &c : s.commands) {
    if (c.kind == CommandKind::Create)
      record[c.target] = c.target;
    if (c.kind == CommandKind::View)
      record[c.target] = record[c.source];
    if (c.kind != CommandKind::Run || !(c.expect == Outcome::ok()))
      continue;
    for (const auto &[placeholder, tensor] : c.bindings)
      if (placeholder[0] != 'o' && written.count(record[tensor]))
        reads = true;
    for (const auto &[placeholder, tensor] : c.bindings)
      if (placeholder[0] == 'o')
        written.insert(record[tensor]);
  }
  return reads;
}

TEST(Shrink, ShapesShrinkTogetherSoThatTwoNetworksShareOne) {
  // The "failure" is a run that reads, through a view, part of what an
  // earlier run wrote, the two runs of networks of different shapes (as
  // run-chains plans them). No one command can change shape alone (a run
  // binds tensors of its network's shape), so the shapes shrink together:
  // both networks and their tensors to one element, where the view covers
  // its whole source and goes.
  Scenario failing = parsed("device d0\n"
                            "add-network p d0 i32 [3x100] o0=mul(y,y)\n"
                            "add-network c d0 i32 [64] o0=mul(y,y)\n"
                            "create t0 i32 [3x100] fill=5\n"
                            "create t2 i32 [3x100] fill=7\n"
                            "to-device t2 d0\n"
                            "create t4 i32 [64] fill=9\n"
                            "view t5 t2 [64] at=200\n"
                            "run p y=t0 o0=t2 &\n"
                            "run c o0=t4 y=t5 &\n");
  ASSERT_TRUE(readsWhatARunWrote(normalizedOnFake(failing)));
  ShrinkResult r =
      shrinkScenario(failing, normalizedOnFake, readsWhatARunWrote);
  std::string printed = printScenario(r.scenario);
  EXPECT_EQ(printed.find("view"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("[3x100]"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("[64]"), std::string::npos) << printed;
  EXPECT_LE(r.scenario.commands.size(), 6u) << printed;
  // The kinds go to f32 together too: no create could alone.
  EXPECT_EQ(printed.find("i32"), std::string::npos) << printed;
}

TEST(Shrink, RunsOfTwoNetworksOfOneShapeBecomeRunsOfOne) {
  // The "failure" needs two runs, the second reading what the first
  // wrote, not two functions: the second run runs the first's network,
  // its tensors bound in order, and the other network goes (and d, which
  // need not be distinct from a).
  Scenario failing = parsed("device d0\n"
                            "add-network p d0 f32 [4] o0=copy(x)\n"
                            "add-network c d0 f32 [4] o0=mul(y,z)\n"
                            "create a f32 [4] fill=1\n"
                            "create b f32 [4] fill=2\n"
                            "create d f32 [4] fill=3\n"
                            "run p x=a o0=b\n"
                            "run c y=b z=a o0=d\n");
  ASSERT_TRUE(readsWhatARunWrote(normalizedOnFake(failing)));
  ShrinkResult r =
      shrinkScenario(failing, normalizedOnFake, readsWhatARunWrote);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "add-network p d0 f32 [1] o0=copy(x)\n"
                                       "create a f32 [1] fill=1\n"
                                       "create b f32 [1] fill=2\n"
                                       "run p x=a o0=b\n"
                                       "run p x=b o0=a\n");
}

} // namespace

TEST(Shrink, ALongNetworkLosesItsNodesInOnePass) {
  // The "failure" is a successful run of a network that multiplies: of a
  // chain of 24 nodes only one mul is needed. Bypassing halves, then
  // quarters, and simplifying a command until nothing simpler fails takes
  // the chain down to that node in a few dozen attempts, not one node a
  // pass over the whole scenario.
  std::string network = "add-network n0 d0 f32 [4] o0=copy(x)";
  std::string run = "run n0 x=a o0=t0";
  std::string creates;
  for (int i = 1; i < 24; ++i) {
    std::string in = "o" + std::to_string(i - 1), out = "o" + std::to_string(i);
    network +=
        " " + out + "=" + (i == 13 ? "mul(" + in + ",x)" : "relu(" + in + ")");
    run += " " + out + "=t" + std::to_string(i);
  }
  for (int i = 0; i < 24; ++i)
    creates += "create t" + std::to_string(i) + " f32 [4]\n";
  std::string text = "device d0\n" + network + "\ncreate a f32 [4] fill=1\n" +
                     creates + run + "\n";
  Scenario failing = parsed(text.c_str());
  auto multiplies = [](const Scenario &s) {
    for (const Command &c : s.commands)
      if (c.kind == CommandKind::AddNetwork &&
          std::none_of(
              c.nodes.begin(), c.nodes.end(),
              [](const NetworkNode &n) { return n.op == OpKind::Mul; }))
        return false;
    return runSucceeds(s);
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, multiplies);
  EXPECT_EQ(printScenario(r.scenario),
            "device d0\n"
            "add-network n0 d0 f32 [1] o13=mul(x,x)\n"
            "create a f32 [1] fill=1\n"
            "create t13 f32 [1]\n"
            "run n0 x=a o13=t13\n");
  EXPECT_LT(r.attempts, 400u) << r.attempts << " attempts";
}

TEST(Shrink, AViewOfAWholeTensorBecomesTheTensor) {
  // The "failure" is a run that succeeds after a transfer: the view of all
  // of t, at offset 0 and of t's shape, reads what t does, so the run may
  // name t itself (the transfer between t's create and the view made
  // nothing).
  Scenario failing = parsed("device d0\n"
                            "add-network n0 d0 f32 [6] o0=copy(x)\n"
                            "create t f32 [6] fill=1\n"
                            "create o f32 [6]\n"
                            "to-device t d0\n"
                            "view v t [6]\n"
                            "run n0 x=v o0=o\n");
  auto transfersAndRuns = [](const Scenario &s) {
    return runSucceeds(s) &&
           std::any_of(s.commands.begin(), s.commands.end(),
                       [](const Command &c) {
                         return c.kind == CommandKind::ToDevice;
                       });
  };
  ShrinkResult r = shrinkScenario(failing, normalizedOnFake, transfersAndRuns);
  EXPECT_EQ(printScenario(r.scenario), "device d0\n"
                                       "add-network n0 d0 f32 [1] o0=copy(x)\n"
                                       "create t f32 [1] fill=1\n"
                                       "create o f32 [1]\n"
                                       "to-device t d0\n"
                                       "run n0 x=t o0=o\n");
}
