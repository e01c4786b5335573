//===- GeneratorsTest.cpp - What the generators draw ----------------------===//
#include "drt/conformance/Generators.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace drt;
using namespace drt::conformance;

namespace {

const PropertyFamily &family(const std::string &name) {
  for (const PropertyFamily &f : propertyFamilies())
    if (f.name == name)
      return f;
  ADD_FAILURE() << "no family " << name;
  return propertyFamilies().front();
}

Capabilities fakeCapabilities() {
  return *BackendRegistry::instance().capabilitiesFor("fake", {});
}

TEST(Generators, ParallelBlocksHaveTwoBranchesOrMore) {
  // A one-branch block runs nothing in parallel. The parallel family's
  // cases have 8 to 16 steps.
  const PropertyFamily &parallel = family("parallel");
  ScenarioGenerator generator(parallel.profile(), fakeCapabilities());
  size_t blocks = 0;
  const size_t seeds = 2000;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    size_t steps = 8 + seed % 9;
    Scenario s = generator.generate(seed, steps);
    EXPECT_EQ(s, generator.generate(seed, steps)) << "seed " << seed;
    EXPECT_LE(s.commands.size(), steps) << "seed " << seed;
    std::set<int> branches;
    for (const Command &c : s.commands)
      if (c.branch)
        branches.insert(c.branch);
    if (branches.empty())
      continue;
    ++blocks;
    EXPECT_GE(branches.size(), 2u) << "seed " << seed << ":\n"
                                   << printScenario(s);
  }
  EXPECT_GE(blocks, seeds * 9 / 10);
}

TEST(Generators, LongLivedCasesReuseASlotHundredsOfTimesAndHoldHundredsLive) {
  // Each case of 4,000 steps or more names one stale location 257 times or
  // more, each time refused, and holds 257 or more raw allocations of one
  // size live at once on one device: counters of 8 bits wrap in both.
  const PropertyFamily &longLived = family("long-lived");
  ScenarioGenerator generator(longLived.profile(), fakeCapabilities());
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Scenario s = generator.generate(seed, 4000 + 1000 * seed);
    std::map<std::string, int> staleFrees;
    std::map<std::string, uint64_t> live;
    std::map<uint64_t, size_t> liveOfSize;
    size_t mostOfOneSize = 0;
    for (const Command &c : s.commands) {
      if (c.kind == CommandKind::Alloc && c.expect.kind == Outcome::Kind::Ok) {
        live[c.target] = c.bytes;
        mostOfOneSize = std::max(mostOfOneSize, ++liveOfSize[c.bytes]);
      } else if (c.kind == CommandKind::Free) {
        if (c.expect.kind == Outcome::Kind::Error &&
            c.expect.code == ErrorCode::InvalidArgument)
          ++staleFrees[c.target];
        else if (auto it = live.find(c.target); it != live.end()) {
          --liveOfSize[it->second];
          live.erase(it);
        }
      }
    }
    int mostStaleFrees = 0;
    for (const auto &[name, n] : staleFrees)
      mostStaleFrees = std::max(mostStaleFrees, n);
    EXPECT_GE(mostStaleFrees, 257) << "seed " << seed;
    EXPECT_GE(mostOfOneSize, 257u) << "seed " << seed;
  }
}

TEST(Generators, TheLastDeviceTakesAnotherConfigurationNowAndThen) {
  // cross-device: in about three cases in ten the last device gets the
  // parameters of one of the backend's other configurations.
  GeneratorProfile profile = family("cross-device").profile();
  ASSERT_GT(profile.otherConfigurationPercent, 0u);
  profile.otherConfigurations = {{{"fake:alignment", "4096"}},
                                 {{"fake:seed", "7"}}};
  ScenarioGenerator generator(profile, fakeCapabilities());
  size_t other = 0, firstTouched = 0;
  const size_t seeds = 300;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, 10);
    ASSERT_GE(s.devices.size(), 2u);
    auto has = [](const DeviceSpec &d) {
      return d.parameters.count("fake:alignment") ||
             d.parameters.count("fake:seed");
    };
    other += has(s.devices.back());
    firstTouched += has(s.devices.front());
  }
  EXPECT_GT(other, seeds / 6);
  EXPECT_LT(other, seeds / 2);
  EXPECT_EQ(firstTouched, 0u);
}

TEST(Generators, LongLivedCasesPlaceDozensOfNetworksAtOnce) {
  // In about half the cases: 17 or more networks placed at once, each run
  // successfully after all are placed, then all evicted.
  const PropertyFamily &longLived = family("long-lived");
  ScenarioGenerator generator(longLived.profile(), fakeCapabilities());
  const uint64_t seeds = 8;
  size_t bursts = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, longLived.steps);
    std::set<std::string> placed, runAfterMost;
    size_t most = 0;
    for (const Command &c : s.commands) {
      if (c.kind == CommandKind::AddNetwork && c.expect == Outcome::ok())
        placed.insert(c.target);
      if (c.kind == CommandKind::EvictNetwork && c.expect == Outcome::ok())
        placed.erase(c.target);
      most = std::max(most, placed.size());
      if (c.kind == CommandKind::Run && c.expect == Outcome::ok() &&
          placed.size() >= 17)
        runAfterMost.insert(c.target);
    }
    bursts += most >= 17 && runAfterMost.size() >= 17 && placed.size() < 4;
  }
  EXPECT_GE(bursts, seeds / 4);
  EXPECT_LT(bursts, seeds);
}

TEST(Generators, NearTwinNetworksDifferInOneThingAndRun) {
  // runs-and-outputs: networks added as a near twin of one placed on their
  // device (the same nodes, kind and shape but for one factor, the kind or
  // the shape), run afterwards; among them integer factors an f32 cannot
  // tell apart (2^24 + 1 and 2^24).
  const PropertyFamily &runs = family("runs-and-outputs");
  ScenarioGenerator generator(runs.profile(), fakeCapabilities());
  size_t twins = 0, run = 0, f32Twins = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Scenario s = generator.generate(seed, 40);
    std::map<std::string, const Command *> placed;
    for (size_t i = 0; i < s.commands.size(); ++i) {
      const Command &c = s.commands[i];
      if (c.kind != CommandKind::AddNetwork || !(c.expect == Outcome::ok()))
        continue;
      for (const auto &[name, o] : placed) {
        if (o->device != c.device || o->nodes.size() != c.nodes.size())
          continue;
        size_t differences = (o->elemKind != c.elemKind) + (o->dims != c.dims);
        bool f32Twin = false;
        for (size_t k = 0; k < c.nodes.size(); ++k) {
          const NetworkNode &a = o->nodes[k], &b = c.nodes[k];
          if (a.op != b.op || a.inputs != b.inputs || a.output != b.output)
            differences += 2;
          if (a.factor != b.factor) {
            ++differences;
            f32Twin = float(a.factor) == float(b.factor);
          }
        }
        if (differences != 1)
          continue;
        ++twins;
        f32Twins += f32Twin;
        for (size_t j = i + 1; j < s.commands.size(); ++j)
          if (s.commands[j].kind == CommandKind::Run &&
              s.commands[j].target == c.target &&
              s.commands[j].expect == Outcome::ok()) {
            ++run;
            break;
          }
        break;
      }
      placed[c.target] = &c;
    }
  }
  EXPECT_GT(twins, 40u);
  EXPECT_GT(run, twins / 2) << run << " of " << twins;
  EXPECT_GE(f32Twins, 2u);
}

TEST(Generators, WideNetworksHoldADozenValuesLive) {
  // Half the wide networks are trees: more than eight node outputs live at
  // once (computed, not yet read by their last reader), in networks of 32
  // or 33 placeholders.
  const PropertyFamily &runs = family("runs-and-outputs");
  ScenarioGenerator generator(runs.profile(), fakeCapabilities());
  size_t wide = 0, manyLive = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Scenario s = generator.generate(seed, 40);
    for (const Command &c : s.commands) {
      if (c.kind != CommandKind::AddNetwork || c.nodes.size() < 29)
        continue;
      ++wide;
      std::map<std::string, size_t> lastUse;
      for (size_t i = 0; i < c.nodes.size(); ++i)
        for (const std::string &in : c.nodes[i].inputs)
          lastUse[in] = i;
      size_t most = 0;
      for (size_t i = 0; i < c.nodes.size(); ++i) {
        size_t live = 0;
        for (size_t j = 0; j <= i; ++j)
          live += lastUse.count(c.nodes[j].output) &&
                  lastUse[c.nodes[j].output] > i;
        most = std::max(most, live);
      }
      manyLive += most > 8;
    }
  }
  EXPECT_GT(wide, 4u);
  EXPECT_GT(manyLive, wide / 4) << manyLive << " of " << wide;
}

TEST(Generators, LongLivedCasesHoldHundredsOfRecordsOfOneContent) {
  // In about half the cases: 257 or more records of one type and one fill
  // resident on one device at once, a run writing one of them that
  // succeeds, and all of them destroyed afterwards.
  const PropertyFamily &longLived = family("long-lived");
  ScenarioGenerator generator(longLived.profile(), fakeCapabilities());
  const uint64_t seeds = 8;
  size_t bursts = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, longLived.steps);
    std::map<std::string, std::tuple<ElemKind, std::vector<size_t>, uint64_t>>
        content;
    std::set<std::string> resident;
    size_t mostResident = 0;
    bool runOverOne = false, destroyed = false;
    for (const Command &c : s.commands) {
      if (c.kind == CommandKind::Create)
        content[c.target] = {c.elemKind, c.dims, c.pattern};
      if (c.kind == CommandKind::ToDevice && c.expect == Outcome::ok() &&
          content.count(c.target))
        resident.insert(c.target);
      if (c.kind == CommandKind::Destroy && resident.erase(c.target) &&
          mostResident >= 257)
        destroyed = true;
      if (c.kind == CommandKind::Run && c.expect == Outcome::ok() &&
          mostResident >= 257)
        for (const auto &[placeholder, tensor] : c.bindings)
          runOverOne =
              runOverOne || (placeholder == "o0" && resident.count(tensor) > 0);
      // The most resident records that share one content.
      std::map<std::tuple<ElemKind, std::vector<size_t>, uint64_t>, size_t>
          holders;
      if (c.kind == CommandKind::ToDevice)
        for (const std::string &name : resident)
          mostResident = std::max(mostResident, ++holders[content[name]]);
    }
    bursts += mostResident >= 257 && runOverOne && destroyed;
  }
  EXPECT_GE(bursts, seeds / 4);
  EXPECT_LT(bursts, seeds);
}

TEST(Generators, RunsAndOutputsPutAFreshlyReleasedBlockUnderARunsOutput) {
  // In about half the cases: a record released right after its upload,
  // then a run over an input whose upload has landed (read back, kept)
  // into a fresh output of the released record's type, read back.
  const PropertyFamily &runs = family("runs-and-outputs");
  ScenarioGenerator generator(runs.profile(), fakeCapabilities());
  size_t planned = 0;
  const size_t seeds = 200;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, 20 + seed % 21);
    for (size_t i = 0; i + 3 < s.commands.size(); ++i) {
      const Command &up = s.commands[i], &release = s.commands[i + 1],
                    &create = s.commands[i + 2], &run = s.commands[i + 3];
      if (up.kind != CommandKind::ToDevice ||
          release.kind != CommandKind::Release || release.target != up.target ||
          create.kind != CommandKind::Create || run.kind != CommandKind::Run ||
          run.expect.kind != Outcome::Kind::Ok)
        continue;
      bool intoCreated =
          std::any_of(run.bindings.begin(), run.bindings.end(),
                      [&](const auto &b) { return b.second == create.target; });
      if (intoCreated && release.expect.kind == Outcome::Kind::Ok) {
        ++planned;
        break;
      }
    }
  }
  EXPECT_GE(planned, seeds / 4);
}

TEST(Generators, ConcurrentRecordsBranchesOwnTheirRecordsAndRunNetworks) {
  // No record is shared (no view is made for the block), every scenario is
  // valid, and runs meet runs of another branch in a good share of cases.
  const PropertyFamily &concurrent = family("concurrent-records");
  ScenarioGenerator generator(concurrent.profile(), fakeCapabilities());
  size_t blocks = 0, runsInTwoBranches = 0;
  const size_t seeds = 500;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, concurrent.steps);
    EXPECT_EQ(validateScenario(s), "") << "seed " << seed;
    std::set<int> branches, running;
    for (const Command &c : s.commands) {
      EXPECT_NE(c.kind, CommandKind::View) << "seed " << seed << ":\n"
                                           << printScenario(s);
      if (c.branch)
        branches.insert(c.branch);
      if (c.branch && c.kind == CommandKind::Run)
        running.insert(c.branch);
    }
    blocks += branches.size() >= 2;
    runsInTwoBranches += running.size() >= 2;
  }
  EXPECT_GE(blocks, seeds * 9 / 10);
  EXPECT_GE(runsInTwoBranches, seeds / 20);
}

TEST(Generators, ConcurrentRecordsDestroyALongCopysRecordBesideAShutdown) {
  // Some blocks shut a device down while another branch uploads a record of
  // tens of MiB to it, or reads one back from it, and destroys the record
  // as its next command: a backend still touching the copy's host memory
  // after the shutdown then touches unmapped memory.
  const PropertyFamily &concurrent = family("concurrent-records");
  ScenarioGenerator generator(concurrent.profile(), fakeCapabilities());
  std::map<CommandKind, size_t> destroyedAfter;
  const size_t seeds = 1500;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, concurrent.steps);
    std::map<std::string, size_t> elements;
    std::map<int, const Command *> lastOfBranch;
    std::set<std::string> shutDown;
    for (const Command &c : s.commands) {
      if (c.kind == CommandKind::Create)
        elements[c.target] = c.dims.empty() ? 1 : c.dims[0];
      if (c.branch && c.kind == CommandKind::Shutdown)
        shutDown.insert(c.device);
    }
    for (const Command &c : s.commands) {
      if (!c.branch)
        continue;
      const Command *before = lastOfBranch[c.branch];
      lastOfBranch[c.branch] = &c;
      if (c.kind != CommandKind::Destroy || !before ||
          before->target != c.target || !shutDown.count(before->device) ||
          elements[c.target] * 4 <= MappedAllocationBytes)
        continue;
      if (before->kind == CommandKind::ToDevice ||
          before->kind == CommandKind::FromDevice)
        ++destroyedAfter[before->kind];
    }
  }
  EXPECT_GE(destroyedAfter[CommandKind::ToDevice], 3u);
  EXPECT_GE(destroyedAfter[CommandKind::FromDevice], 1u);
}

TEST(Generators, AReleaseBesideAnUploadLeavesRoomInEveryOrderButNotWhileHeld) {
  // A branch releases a record and then uploads as many bytes while
  // another branch's upload to the device may be in flight: the budget fits
  // the three in every order, and the second upload only once the released
  // bytes no longer count.
  const PropertyFamily &concurrent = family("concurrent-records");
  Capabilities caps = fakeCapabilities();
  ScenarioGenerator generator(concurrent.profile(), caps);
  size_t blocks = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Scenario s = generator.generate(seed, concurrent.steps);
    Model model(s.devices, caps, false);
    std::map<std::string, uint64_t> bytes;
    size_t first = s.commands.size();
    for (size_t i = 0; i < s.commands.size(); ++i) {
      const Command &c = s.commands[i];
      if (c.branch) {
        first = i;
        break;
      }
      if (c.kind == CommandKind::Create)
        bytes[c.target] = 4 * (c.dims.empty() ? 1 : c.dims[0]);
      model.apply(c);
    }
    const Command *release = nullptr, *into = nullptr, *beside = nullptr;
    for (size_t i = first; i < s.commands.size(); ++i) {
      const Command &c = s.commands[i];
      // The plan's commands come first in their branches; the branches'
      // later commands may name the same tensors.
      if (!release && c.kind == CommandKind::Release &&
          c.target.starts_with("freed"))
        release = &c;
      if (!into && c.kind == CommandKind::ToDevice &&
          c.target.starts_with("into_freed"))
        into = &c;
      if (!beside && c.kind == CommandKind::ToDevice &&
          c.target.starts_with("beside"))
        beside = &c;
    }
    if (!release || !into || !beside)
      continue;
    ++blocks;
    EXPECT_EQ(release->branch, into->branch) << "seed " << seed;
    EXPECT_NE(release->branch, beside->branch) << "seed " << seed;
    EXPECT_EQ(release->device, into->device) << "seed " << seed;
    EXPECT_EQ(release->device, beside->device) << "seed " << seed;
    const ModelDevice &d = model.devices().at(release->device);
    uint64_t freed = bytes[release->target];
    uint64_t need = bytes[into->target] + bytes[beside->target];
    EXPECT_LE(d.used - freed + need, d.budget()) << "seed " << seed;
    EXPECT_GT(d.used + need, d.budget()) << "seed " << seed;
    EXPECT_LE(d.used + bytes[beside->target], d.budget()) << "seed " << seed;
  }
  EXPECT_GE(blocks, 20u);
}

TEST(Generators, FaultsArePlannedBesideReadBacksInFlight) {
  // A fault planned while a read-back issued without waiting is in flight,
  // which it must not strike; and a fault planned for the read-back after
  // one issued without waiting, which it strikes while the first one's
  // completion may still be on its way.
  const PropertyFamily &faults = family("faults");
  ScenarioGenerator generator(faults.profile(), fakeCapabilities());
  size_t behind = 0, before = 0;
  const size_t seeds = 300;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, 20 + seed % 41);
    EXPECT_EQ(validateScenario(s), "") << "seed " << seed;
    for (size_t i = 1; i < s.commands.size(); ++i) {
      const Command &prev = s.commands[i - 1], &c = s.commands[i];
      if (prev.kind == CommandKind::FromDevice && prev.noWait &&
          c.kind == CommandKind::InjectFault)
        ++behind;
      if (i + 1 < s.commands.size() && prev.kind == CommandKind::InjectFault &&
          c.kind == CommandKind::FromDevice && c.noWait &&
          c.expect == Outcome::ok() &&
          s.commands[i + 1].kind == CommandKind::FromDevice &&
          s.commands[i + 1].expect.kind == Outcome::Kind::Error)
        ++before;
    }
  }
  EXPECT_GE(behind, seeds / 10);
  EXPECT_GE(before, 3u);
}

TEST(Generators, AFailedUploadsBlockGoesToAnotherTensorsUpload) {
  // After an upload that a planned fault fails (one that does not lose the
  // device), half the time: a fresh tensor of its type created, uploaded to
  // the same device (where it is handed the freed block) and read back.
  const PropertyFamily &faults = family("faults");
  ScenarioGenerator generator(faults.profile(), fakeCapabilities());
  size_t failed = 0, followed = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Scenario s = generator.generate(seed, 40);
    for (size_t i = 1; i + 3 < s.commands.size(); ++i) {
      const Command &fault = s.commands[i - 1], &up = s.commands[i];
      // The upload the fault planned right before it fails.
      if (fault.kind != CommandKind::InjectFault ||
          (fault.fault.site != FaultSite::TransferToDevice &&
           fault.fault.site != FaultSite::Allocation) ||
          fault.fault.nth != 1 || fault.fault.code == ErrorCode::DeviceLost ||
          up.kind != CommandKind::ToDevice ||
          !(up.expect == Outcome::error(fault.fault.code)))
        continue;
      ++failed;
      const Command &create = s.commands[i + 1], &other = s.commands[i + 2],
                    &back = s.commands[i + 3];
      followed += create.kind == CommandKind::Create &&
                  other.kind == CommandKind::ToDevice &&
                  other.target == create.target && other.device == up.device &&
                  back.kind == CommandKind::FromDevice &&
                  back.target == create.target;
    }
  }
  EXPECT_GT(failed, 20u);
  EXPECT_GT(followed, failed / 4) << followed << " of " << failed;
}

TEST(Generators, ContentTwinsAreUploadedAndReadBack) {
  // Two creates of one type and fill in a row, both uploaded and read back
  // later; in some, a write through a view in the middle of the second.
  const PropertyFamily &crossDevice = family("cross-device");
  ScenarioGenerator generator(crossDevice.profile(), fakeCapabilities());
  size_t twins = 0, nearTwins = 0, runOverTwin = 0, uploadBehindRun = 0,
         computingRun = 0;
  const size_t seeds = 200;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    Scenario s = generator.generate(seed, 30);
    for (size_t i = 0; i + 1 < s.commands.size(); ++i) {
      const Command &a = s.commands[i], &b = s.commands[i + 1];
      if (a.kind != CommandKind::Create || b.kind != CommandKind::Create ||
          a.elemKind != b.elemKind || a.dims != b.dims ||
          a.pattern != b.pattern)
        continue;
      bool aBack = false, bBack = false;
      for (size_t j = i + 2; j < s.commands.size(); ++j) {
        const Command &c = s.commands[j];
        aBack = aBack || (c.kind == CommandKind::FromDevice &&
                          c.target == a.target && c.expect == Outcome::ok());
        bBack = bBack || (c.kind == CommandKind::FromDevice &&
                          c.target == b.target && c.expect == Outcome::ok());
        nearTwins +=
            c.kind == CommandKind::View && c.source == b.target && j == i + 2;
        bool overB =
            c.kind == CommandKind::Run &&
            std::any_of(c.bindings.begin(), c.bindings.end(),
                        [&](const auto &x) { return x.second == b.target; });
        runOverTwin += overB;
        // The run into the second in flight, the first uploaded behind it
        // and read back first.
        if (overB && c.noWait && j + 2 < s.commands.size()) {
          const Command &up = s.commands[j + 1], &back = s.commands[j + 2];
          uploadBehindRun +=
              up.kind == CommandKind::ToDevice && up.target == a.target &&
              back.kind == CommandKind::FromDevice && back.target == a.target;
        }
        if (overB)
          for (size_t k = i + 2; k < j; ++k)
            computingRun += s.commands[k].kind == CommandKind::AddNetwork &&
                            s.commands[k].target == c.target &&
                            s.commands[k].nodes.front().op != OpKind::Copy;
      }
      twins += aBack && bBack;
      break;
    }
  }
  EXPECT_GE(twins, seeds / 8);
  EXPECT_GE(nearTwins, seeds / 40);
  EXPECT_GE(runOverTwin, seeds / 40);
  // 24 and 43 of 200 when written.
  EXPECT_GE(uploadBehindRun, seeds / 20);
  EXPECT_GE(computingRun, seeds / 10);
}

TEST(Generators, ParallelBlocksBeginWithResidentTwinsDroppedTogether) {
  // Twins of one type and fill uploaded to one device before the block,
  // each the subject of the first command of a branch of its own, most of
  // which drop the twin's copy: several threads count one shared block's
  // holders down at once.
  // parallel: half its blocks are of the fan-in shape, half the others
  // run networks over shared records, and neither has twins.
  for (auto [name, least] :
       {std::pair{"parallel", 40}, {"concurrent-records", 10}}) {
    const PropertyFamily &f = family(name);
    ScenarioGenerator generator(f.profile(), fakeCapabilities());
    size_t blocks = 0, dropsTogether = 0;
    const size_t seeds = 400;
    for (uint64_t seed = 0; seed < seeds; ++seed) {
      Scenario s = generator.generate(seed, f.steps);
      // Each create's type and fill, and the device of its upload before
      // the block.
      std::map<std::string, std::tuple<ElemKind, std::vector<size_t>, uint64_t>>
          made;
      std::map<std::string, std::string> uploadedTo;
      std::set<int> branchesSeen;
      // (type and fill, device) -> branches whose first command drops it.
      std::map<std::pair<std::tuple<ElemKind, std::vector<size_t>, uint64_t>,
                         std::string>,
               std::set<int>>
          drops;
      for (const Command &c : s.commands) {
        if (c.branch == 0) {
          if (c.kind == CommandKind::Create)
            made[c.target] = {c.elemKind, c.dims, c.pattern};
          if (c.kind == CommandKind::ToDevice)
            uploadedTo[c.target] = c.device;
          continue;
        }
        if (!branchesSeen.insert(c.branch).second)
          continue;
        auto up = uploadedTo.find(c.target);
        auto m = made.find(c.target);
        if (up == uploadedTo.end() || m == made.end())
          continue;
        bool drop = c.kind == CommandKind::Release ||
                    (c.kind == CommandKind::FromDevice && c.release) ||
                    (c.kind == CommandKind::ToDevice && c.device != up->second);
        if (drop)
          drops[{m->second, up->second}].insert(c.branch);
      }
      blocks += !branchesSeen.empty();
      dropsTogether += std::any_of(drops.begin(), drops.end(), [](auto &d) {
        return d.second.size() >= 2;
      });
    }
    EXPECT_GE(blocks, seeds / 2) << name;
    EXPECT_GE(dropsTogether, seeds / least) << name;
  }
}

TEST(Generators, EveryGeneratedScenarioPrintsAndParsesBackAsItself) {
  // A command carries only the fields its kind prints: parse(print(s)) is
  // s itself, and the shrinker sees no device a command does not use.
  Capabilities caps = fakeCapabilities();
  for (const PropertyFamily &f : propertyFamilies()) {
    if (!f.skipReason(caps).empty())
      continue;
    ScenarioGenerator generator(f.profile(), caps);
    for (uint64_t seed = 0; seed < 100; ++seed) {
      Scenario s = generator.generate(seed, 1 + seed % 32);
      std::string text = printScenario(s);
      ParseResult parsed = parseScenario(text);
      if (auto *e = std::get_if<ParseError>(&parsed)) {
        ADD_FAILURE() << f.name << " seed " << seed << ": " << e->toString()
                      << "\n"
                      << text;
        continue;
      }
      const Scenario &back = std::get<Scenario>(parsed);
      EXPECT_EQ(printScenario(back), text) << f.name << " seed " << seed;
      if (back == s)
        continue;
      for (size_t i = 0; i < s.commands.size() && i < back.commands.size(); ++i)
        if (!(s.commands[i] == back.commands[i])) {
          ADD_FAILURE() << f.name << " seed " << seed << ": command " << i + 1
                        << " '" << printCommand(s.commands[i])
                        << "' carries fields it does not print";
          break;
        }
      EXPECT_EQ(back.devices, s.devices) << f.name << " seed " << seed;
    }
  }
}

TEST(Generators, EveryWrittenOutcomeIsTheOneTheModelPredicts) {
  // The generator's model and the runner's must agree step by step: a
  // network's declared order, for one, decides in which order a run stages
  // its placeholders, and with it where a planned fault strikes.
  Capabilities caps = fakeCapabilities();
  for (const PropertyFamily &f : propertyFamilies()) {
    if (!f.skipReason(caps).empty())
      continue;
    ScenarioGenerator generator(f.profile(), caps);
    for (uint64_t seed = 0; seed < 200; ++seed) {
      Scenario s = generator.generate(seed, 8 + seed % 40);
      Scenario again = wellFormedScenario(s, "fake");
      ASSERT_EQ(again.commands.size(), s.commands.size())
          << f.name << " seed " << seed;
      for (size_t i = 0; i < s.commands.size(); ++i)
        if (!s.commands[i].branch &&
            !(again.commands[i].expect == s.commands[i].expect)) {
          ADD_FAILURE() << f.name << " seed " << seed << ": step " << i + 1
                        << " '" << printCommand(s.commands[i])
                        << "': the model predicts "
                        << again.commands[i].expect.toString();
          break;
        }
    }
  }
}

TEST(Generators,
     UnderBudgetsNoTransferIssuedWithoutWaitingFreesOrAllocatesLater) {
  // Where a device holds a budget of its own, what an allocation finds
  // would depend on whether such a transfer had completed: the generator
  // waits for it instead. The accounting family issues a third of its
  // transfers without waiting, under budgets it draws.
  Capabilities caps = fakeCapabilities();
  ScenarioGenerator generator(family("accounting").profile(), caps);
  size_t issued = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Scenario s = generator.generate(seed, 8 + seed % 40);
    bool budgets = std::any_of(s.devices.begin(), s.devices.end(),
                               [](const DeviceSpec &d) { return d.budget; });
    Model model(s.devices, caps, false);
    for (const Command &c : s.commands) {
      if (budgets && c.noWait) {
        ++issued;
        EXPECT_TRUE(model.accountingFixedByCompletion(c))
            << "seed " << seed << ": '" << printCommand(c) << "'";
      }
      model.apply(c);
    }
  }
  EXPECT_GT(issued, 100u);
}

TEST(Generators, FreesFollowWorkInFlightThatChangesNoAccounting) {
  // A release, destroy or free right after a command issued without
  // waiting whose completion changes no accounting: the runner compares
  // accounting then, before it waits. Counted with the plan and without it.
  Capabilities caps = fakeCapabilities();
  auto count = [&](unsigned percent) {
    GeneratorProfile profile = family("run-chains").profile();
    profile.freeBehindPendingPercent = percent;
    ScenarioGenerator generator(profile, caps);
    size_t frees = 0;
    for (uint64_t seed = 0; seed < 300; ++seed) {
      Scenario s = generator.generate(seed, 40);
      Model model(s.devices, caps, false);
      bool fixedBefore = false;
      for (const Command &c : s.commands) {
        if (fixedBefore &&
            (c.kind == CommandKind::Release || c.kind == CommandKind::Destroy ||
             c.kind == CommandKind::Free))
          ++frees;
        fixedBefore = c.noWait && model.accountingFixedByCompletion(c);
        model.apply(c);
      }
    }
    return frees;
  };
  size_t planned =
      count(family("run-chains").profile().freeBehindPendingPercent);
  size_t unplanned = count(0);
  EXPECT_GT(planned, 2 * unplanned + 50) << planned << " against " << unplanned;
}

TEST(Generators, RunChainsReadPartOfAPendingRunsOutput) {
  // The plan of viewOfPendingOutputPercent: a run issued without waiting
  // that reads, through a view, part of what the pending run before it
  // writes.
  Capabilities caps = fakeCapabilities();
  ScenarioGenerator generator(family("run-chains").profile(), caps);
  size_t through = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Scenario s = generator.generate(seed, 40);
    Model model(s.devices, caps, false);
    for (const Command &c : s.commands)
      for (const CoverageLabel &label : model.apply(c).labels)
        through += label.text() == "run-joins-through-a-partial-view";
  }
  EXPECT_GE(through, 20u);
}

TEST(Generators, RunChainsViewPendingOutputsPiecesAwayBehindWorkInFlight) {
  // The plan of viewOfPendingOutputPercent draws outputs of several
  // kilobytes too, with views whose bytes lie a kilobyte or more past their
  // element offset (a backend that splits work into pieces and takes one
  // for the other orders the wrong pieces), and issues the runs half the
  // time behind a read-back in flight.
  Capabilities caps = fakeCapabilities();
  ScenarioGenerator generator(family("run-chains").profile(), caps);
  size_t farViews = 0, behindReadBacks = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Scenario s = generator.generate(seed, 40);
    Model model(s.devices, caps, false);
    const Command *before = nullptr;
    for (const Command &c : s.commands) {
      model.apply(c);
      if (c.kind == CommandKind::View && model.tensor(c.target) &&
          !model.tensor(c.target)->empty()) {
        uint64_t bytes = model.tensor(c.target)->offsetBytes;
        farViews += bytes >= c.offset + 1024;
        behindReadBacks += before && before->kind == CommandKind::FromDevice &&
                           before->noWait && !before->release;
      }
      before = &c;
    }
  }
  EXPECT_GE(farViews, 15u);
  EXPECT_GE(behindReadBacks, 15u);
}

TEST(Generators, RunChainsOverwriteWhatAPendingRunReads) {
  // The plan of writeAfterReadPercent: three runs issued without waiting,
  // the third (of the first's network) reading the first's result and
  // writing, in place, what the second reads.
  Capabilities caps = fakeCapabilities();
  ScenarioGenerator generator(family("run-chains").profile(), caps);
  size_t chains = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Scenario s = generator.generate(seed, 60);
    Model model(s.devices, caps, false);
    std::map<std::string, Command> networks;
    std::vector<const Command *> runs;
    for (const Command &c : s.commands) {
      if (c.kind == CommandKind::AddNetwork)
        networks[c.target] = c;
      ModelStep step = model.apply(c);
      if (c.kind != CommandKind::Run || !c.noWait) {
        runs.clear();
        continue;
      }
      runs.push_back(&c);
      if (runs.size() < 3 || !c.target.starts_with("writer"))
        continue;
      const Command &first = *runs[runs.size() - 3];
      const Command &second = *runs[runs.size() - 2];
      if (first.target != c.target)
        continue;
      const Command &writer = networks.at(c.target);
      auto boundTo = [](const Command &run, const std::string &ph) {
        for (const auto &[p, name] : run.bindings)
          if (p == ph)
            return name;
        return std::string();
      };
      const std::string &out = writer.nodes.back().output;
      bool readsResult = false, overwritesInput = false;
      for (const auto &[ph, name] : c.bindings) {
        readsResult = readsResult || (name == boundTo(first, out) &&
                                      !networkWrites(writer.nodes, ph));
        overwritesInput =
            overwritesInput ||
            (ph == out &&
             std::any_of(second.bindings.begin(), second.bindings.end(),
                         [&](const auto &b) { return b.second == name; }));
      }
      bool labelled = false;
      for (const CoverageLabel &label : step.labels)
        labelled =
            labelled || label.text() == "run-overwrites-a-pending-runs-input";
      // Random runs of the same networks may follow one another too: only
      // the plan's triples are counted.
      if (!readsResult || !overwritesInput || !labelled ||
          step.outcome != Outcome::ok())
        continue;
      ++chains;
    }
  }
  EXPECT_GE(chains, 20u);
}

} // namespace
