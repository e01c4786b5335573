//===- Properties.cpp - Property families ---------------------------------===//
#include "drt/conformance/Properties.h"

#include "drt/BackendRegistry.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/conformance/Shrink.h"

#include <chrono>
#include <fstream>

namespace drt::conformance {

std::string PropertyResult::statusText() const {
  switch (status) {
  case Status::Passed:
    return "passed";
  case Status::Failed:
    return "FAILED";
  case Status::Skipped:
    return "skipped";
  }
  return "?";
}

uint64_t familySeed(uint64_t seed, const std::string &family, int shard) {
  // FNV-1a over the family name, mixed with the seed and the shard.
  uint64_t h = 1469598103934665603ull;
  for (char c : family)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  h ^= seed * 0x9E3779B97F4A7C15ull;
  h ^= uint64_t(shard) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h;
}

namespace {

using K = CommandKind;

std::string needsResident(const Capabilities &c) {
  return c.residentTensors ? "" : "the backend declares no resident tensors";
}

DeviceSpec device(std::string name, uint64_t budget = 0) {
  DeviceSpec d;
  d.name = std::move(name);
  d.budget = budget;
  return d;
}

/// Weights shared by the lifecycle families, then adjusted per family.
std::map<CommandKind, int> baseWeights() {
  return {{K::Create, 6},     {K::View, 3},     {K::Clone, 1},
          {K::Destroy, 2},    {K::ToDevice, 6}, {K::FromDevice, 4},
          {K::Release, 2},    {K::Read, 4},     {K::Write, 2},
          {K::MoveAssign, 1}, {K::SelfMove, 1}, {K::MoveConstruct, 1}};
}

GeneratorProfile oneDevice(std::map<CommandKind, int> weights,
                           uint64_t budget = 0) {
  GeneratorProfile p;
  p.devices = {device("d0", budget)};
  p.weights = std::move(weights);
  return p;
}

std::vector<PropertyFamily> makeFamilies() {
  std::vector<PropertyFamily> f;
  f.push_back({"view-sharing",
               "views share storage and residency with their owner",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::View] = 8;
                 w[K::Read] = 8;
                 w[K::Write] = 4;
                 return oneDevice(w);
               },
               {"view-observes-Device", "view@Device"}});
  f.push_back({"clone-independence",
               "a clone is independent of its source in data and residency",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::Clone] = 8;
                 w[K::Write] = 5;
                 w[K::FromDevice] = 6;
                 return oneDevice(w);
               },
               {"clone@Host", "clone@Device"}});
  f.push_back({"move-semantics",
               "moves empty their source, move-assign releases the target "
               "once, self-move is a no-op",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::MoveAssign] = 8;
                 w[K::MoveConstruct] = 5;
                 w[K::SelfMove] = 3;
                 return oneDevice(w);
               },
               {"move-assign-onto-resident", "self-move@",
                "outcome-violation use-of-moved-from"}});
  f.push_back({"double-release",
               "releasing twice is a success that frees once",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::DoubleRelease] = 8;
                 w[K::Release] = 5;
                 return oneDevice(w);
               },
               {"double-release-of-resident"}});
  f.push_back({"round-trips",
               "to-device / from-device keep and release, Mirrored reads and "
               "writes",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::FromDevice] = 8;
                 w[K::Write] = 4;
                 w[K::Refill] = 2;
                 return oneDevice(w);
               },
               {"host-write-drops-mirror", "to-device-already-Mirrored"}});
  f.push_back({"destruction-releases-once",
               "the last reference of a resident record frees it exactly "
               "once; views keep records alive",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::Destroy] = 8;
                 w[K::View] = 6;
                 return oneDevice(w);
               },
               {"destroy-while-shared-and-resident",
                "last-reference-releases-Device"}});
  f.push_back({"accounting",
               "used bytes and live allocations are exact after every step; "
               "budgets give OutOfMemory; raw locations are checked",
               [](const Capabilities &c) {
                 if (!c.memoryBudget)
                   return std::string(
                       "the backend does not enforce a memory budget");
                 return needsResident(c);
               },
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::Alloc] = 5;
                 w[K::Free] = 4;
                 w[K::ToDevice] = 8;
                 GeneratorProfile p = oneDevice(w);
                 p.drawBudgets = true;
                 return p;
               },
               {"out-of-memory", "takes-over-location"}});
  f.push_back({"runs-and-outputs",
               "runs leave outputs resident; ensureOutputsAvailable brings "
               "them back; results are exact",
               needsResident,
               [](const std::string &, uint64_t) {
                 std::map<CommandKind, int> w = {
                     {K::Create, 8},        {K::ToDevice, 4},
                     {K::FromDevice, 2},    {K::Read, 5},
                     {K::AddNetwork, 3},    {K::Run, 10},
                     {K::EnsureOutputs, 5}, {K::EvictNetwork, 1},
                     {K::Destroy, 1},       {K::View, 1}};
                 return oneDevice(w);
               },
               {"run-leaves-outputs-resident", "ensure-outputs-brings-back",
                "run-input-in-place"}});
  f.push_back({"runs-on-views",
               "views at an offset into resident tensors are run inputs in "
               "place; results are exact",
               needsResident,
               [](const std::string &, uint64_t) {
                 std::map<CommandKind, int> w = {
                     {K::Create, 6},     {K::View, 6},         {K::ToDevice, 6},
                     {K::AddNetwork, 3}, {K::Run, 10},         {K::Read, 2},
                     {K::FromDevice, 2}, {K::EnsureOutputs, 3}};
                 GeneratorProfile p = oneDevice(w);
                 // One element kind, so that most tensors fit a network.
                 p.space.elemKinds = {ElemKind::Float32};
                 return p;
               },
               {"run-input-view-at-offset-in-place"}});
  f.push_back({"copy-outputs-to-host",
               "with copyDeviceTensorsToHost a run leaves its outputs on "
               "host",
               [](const Capabilities &) { return std::string(); },
               [](const std::string &, uint64_t) {
                 std::map<CommandKind, int> w = {
                     {K::Create, 8},     {K::ToDevice, 3}, {K::Read, 5},
                     {K::AddNetwork, 3}, {K::Run, 10},     {K::Destroy, 1}};
                 GeneratorProfile p = oneDevice(w);
                 p.devices[0].copyToHost = true;
                 return p;
               },
               {"run-copies-outputs-to-host"}});
  f.push_back({"cross-device",
               "tensors move between two devices of one backend; runs move "
               "their inputs",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::ToDevice] = 10;
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 6;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 return p;
               },
               {"cross-device-move-from-Device", "run-input-moved"}});
  f.push_back({"faults",
               "injected out-of-memory, failing transfers and runs, lost "
               "devices leave records consistent",
               [](const Capabilities &c) {
                 if (!c.faultInjection)
                   return std::string(
                       "the backend does not declare fault injection");
                 return needsResident(c);
               },
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::InjectFault] = 6;
                 w[K::FromDevice] = 9;
                 w[K::AddNetwork] = 2;
                 w[K::Run] = 6;
                 w[K::Refill] = 2;
                 GeneratorProfile p = oneDevice(w);
                 p.faultCodes = {ErrorCode::DeviceError, ErrorCode::OutOfMemory,
                                 ErrorCode::DeviceLost};
                 return p;
               },
               {"fault-failed-to-device", "fault-failed-from-device",
                "fault-struck-alloc"}});
  f.push_back({"device-loss",
               "shutdown makes Device records Lost and Mirrored ones Host; "
               "refill recovers",
               [](const Capabilities &c) {
                 if (!c.deviceLoss)
                   return std::string("the backend does not declare device "
                                      "loss");
                 return needsResident(c);
               },
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::Shutdown] = 3;
                 w[K::Refill] = 6;
                 w[K::Release] = 3;
                 w[K::ToDevice] = 8;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 return p;
               },
               {"device-lost-makes-Lost", "refill-of-Lost"}});
  f.push_back({"async-completion",
               "completions on another thread after random delays: every "
               "callback exactly once, after the record update",
               [](const Capabilities &c) {
                 if (!c.asynchronousCompletion)
                   return std::string("the backend does not declare "
                                      "asynchronous completion");
                 return needsResident(c);
               },
               [](const std::string &backend, uint64_t seed) {
                 auto w = baseWeights();
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 8;
                 w[K::EnsureOutputs] = 3;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 if (backend == "fake")
                   for (DeviceSpec &d : p.devices) {
                     d.parameters["async"] = "1";
                     d.parameters["seed"] = std::to_string(seed % 1000 + 1);
                   }
                 return p;
               },
               {"from-device@Device", "run-succeeded"}});
  f.push_back({"sizes",
               "tensors from one element to several MiB, at and around the "
               "sizes where a backend changes path, keep their contents "
               "through every transfer",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::Write] = 4;
                 w[K::FromDevice] = 6;
                 w[K::AddNetwork] = 1;
                 w[K::Run] = 2;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 p.sizeClassWeights = {4, 8, 10, 14, 20, 22, 22};
                 p.maxTensors = 8;
                 return p;
               },
               {"to-device@Host", "from-device@Device"}});
  {
    PropertyFamily longLived{
        "long-lived",
        "one device serves thousands of allocations in a case: freed memory "
        "is reused hundreds of times and accounting stays exact",
        needsResident,
        [](const std::string &, uint64_t) {
          std::map<CommandKind, int> w = {
              {K::Create, 8},     {K::Destroy, 6},    {K::ToDevice, 14},
              {K::Release, 8},    {K::FromDevice, 4}, {K::Alloc, 6},
              {K::Free, 6},       {K::Read, 2},       {K::Write, 2},
              {K::View, 2},       {K::MoveAssign, 1}, {K::DoubleRelease, 1}};
          GeneratorProfile p = oneDevice(w);
          p.sizeClassWeights = {20, 50, 30, 2};
          p.maxTensors = 16;
          // Host records are the ones a transfer allocates for.
          p.stateWeights = {8, 2, 2, 1, 1};
          return p;
        },
        {"last-reference-releases-Device", "release-of-Device"}};
    longLived.steps = 8000;
    longLived.minCases = 3;
    longLived.minAllocationsOnOneDevice = 1000;
    f.push_back(std::move(longLived));
  }
  f.push_back({"mixed",
               "every command, weighted towards deep residency states",
               needsResident,
               [](const std::string &, uint64_t) {
                 auto w = baseWeights();
                 w[K::DoubleRelease] = 1;
                 w[K::Refill] = 1;
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 5;
                 w[K::EnsureOutputs] = 2;
                 w[K::EvictNetwork] = 1;
                 w[K::Alloc] = 1;
                 w[K::Free] = 1;
                 w[K::FromDevice] = 6;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 p.drawBudgets = true;
                 return p;
               },
               {"to-device@Mirrored", "cross-device-move-"}});
  return f;
}

bool reached(const std::map<std::string, int> &labels,
             const std::string &prefix) {
  auto it = labels.lower_bound(prefix);
  return it != labels.end() && it->first.rfind(prefix, 0) == 0;
}

} // namespace

const std::vector<PropertyFamily> &propertyFamilies() {
  static const std::vector<PropertyFamily> families = makeFamilies();
  return families;
}

/// Further rounds (of the time budget, or of the cases) a property runs while
/// a key state is missing.
constexpr int CoverageRounds = 3;

/// The seed of case \p index of a property whose seed is \p seed.
uint64_t caseSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

PropertyResult runProperty(const PropertyFamily &family,
                           const PropertyOptions &options) {
  using Clock = std::chrono::steady_clock;
  PropertyResult result;
  result.name = family.name;
  result.backend = options.backend;
  result.seed = familySeed(options.seed, family.name, 0);
  auto started = Clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - started).count();
  };
  auto finish = [&]() -> PropertyResult {
    result.seconds = elapsed();
    return result;
  };

  std::vector<std::string> backends = {options.backend};
  if (!options.against.empty())
    backends.push_back(options.against);
  Capabilities caps;
  for (size_t i = 0; i < backends.size(); ++i) {
    const BackendInfo *info = BackendRegistry::instance().find(backends[i]);
    if (!info) {
      result.status = PropertyResult::Status::Failed;
      result.reason = "unknown backend '" + backends[i] + "'";
      return finish();
    }
    if (std::string why = family.skipReason(info->capabilities); !why.empty()) {
      result.status = PropertyResult::Status::Skipped;
      result.reason = (i ? backends[i] + ": " : "") + why;
      return finish();
    }
    if (i == 0)
      caps = info->capabilities;
  }

  ScenarioGenerator generator(family.profile(options.backend, result.seed),
                              caps);
  RunOptions run;
  run.backend = options.backend;
  run.against = options.against;
  auto missingKeyState = [&]() -> std::optional<std::string> {
    for (const std::string &key : family.keyLabels)
      if (!reached(result.labels, key))
        return key;
    return std::nullopt;
  };

  // Cases are numbered; a shard runs every shardCount-th one, so the shards
  // together run exactly the cases one process would. With a case count the
  // run is exact; with a time budget it runs cases until the budget is
  // spent, so faster code means a deeper run (deterministic for a seed and
  // a machine speed).
  bool byTime = options.cases <= 0;
  auto budgetSpent = [&](int round) {
    if (!byTime)
      return false;
    return result.cases >= (family.minCases ? family.minCases
                                             : options.minCases) &&
           elapsed() >= options.timeBudget * (round + 1);
  };
  uint64_t index = 0;
  std::optional<Scenario> failing;
  std::string failure;
  uint64_t failingSeed = 0;
  size_t maxSteps =
      family.steps ? family.steps : size_t(std::max(options.maxSteps, 1));
  size_t minSteps = std::max<size_t>(maxSteps / 2, 1);
  for (int round = 0; round <= CoverageRounds && !failing; ++round) {
    uint64_t end = byTime ? UINT64_MAX : uint64_t(options.cases) * (round + 1);
    for (; index < end && !budgetSpent(round); ++index) {
      if (int64_t(index % uint64_t(options.shardCount)) != options.shardIndex)
        continue;
      uint64_t seed = caseSeed(result.seed, index);
      RandomSource lengths(seed ^ 0x5bd1e995u);
      Scenario s = generator.generate(
          seed, size_t(lengths.between(minSteps, maxSteps)));
      RunResult r = runScenario(s, run);
      ++result.cases;
      result.steps += r.steps;
      result.census.addScenario(s, generator.profile().space);
      result.census.addRun(r);
      for (const auto &[label, n] : r.labels)
        result.labels[label] += n;
      for (const auto &[t, n] : r.transitions)
        result.transitions[t] += n;
      if (!r.passed()) {
        failing = std::move(s);
        failure = r.setupError.empty() ? r.divergence->toString()
                                       : r.setupError;
        failingSeed = seed;
        break;
      }
    }
    // One shard sees a part of the cases: coverage is judged over all. A
    // family that must make many allocations on one device runs on until
    // one case has, like one that misses a key state: on a slow or busy
    // machine its first cases may be all the time budget allows.
    bool fewAllocations = family.minAllocationsOnOneDevice &&
                          result.census.mostAllocationsOnOneDevice <
                              family.minAllocationsOnOneDevice;
    if (failing || options.shardCount > 1 ||
        (!missingKeyState() && !fewAllocations))
      break;
  }

  if (failing) {
    ShrinkResult shrunk = shrinkScenario(
        *failing,
        [&](const Scenario &s) { return wellFormedScenario(s, options.backend); },
        [&](const Scenario &s) {
          RunResult r = runScenario(s, run);
          if (r.passed())
            return false;
          failure =
              r.setupError.empty() ? r.divergence->toString() : r.setupError;
          return true;
        });
    // The failure message is that of the last candidate that failed, which
    // is the minimal scenario.
    result.shrinksTried = int(shrunk.attempts);
    result.shrinksAccepted = int(shrunk.accepted);
    const Scenario &minimal = shrunk.scenario;
    result.status = PropertyResult::Status::Failed;
    result.reason = failure;
    result.minimalScenario = printScenario(minimal);
    result.minimalLength = minimal.commands.size();
    std::string dir =
        options.failureDirectory.empty() ? "." : options.failureDirectory;
    result.scenarioFile = dir + "/" + family.name + "-" + options.backend +
                          "-" + std::to_string(options.seed) + ".scn";
    for (char &c : result.scenarioFile)
      if (c == ':')
        c = '_';
    std::ofstream out(result.scenarioFile);
    out << "# minimal failing scenario of property '" << family.name
        << "' on backend '" << options.backend << "', seed " << options.seed
        << " (case seed " << failingSeed << ")\n";
    std::string text = failure;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      out << "# " << text.substr(pos, nl - pos) << "\n";
      pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    out << result.minimalScenario;
    result.replayCommand =
        "drt-replay " + result.scenarioFile + " --backend " + options.backend +
        (options.against.empty() ? "" : " --against " + options.against);
    return finish();
  }
  if (family.minAllocationsOnOneDevice &&
      result.census.mostAllocationsOnOneDevice <
          family.minAllocationsOnOneDevice &&
      options.shardCount == 1) {
    result.status = PropertyResult::Status::Failed;
    result.reason = "its " + std::to_string(result.cases) +
                    " cases never made " +
                    std::to_string(family.minAllocationsOnOneDevice) +
                    " allocations on one device (at most " +
                    std::to_string(result.census.mostAllocationsOnOneDevice) +
                    ")";
    return finish();
  }
  for (const std::string &key : family.keyLabels) {
    if (reached(result.labels, key))
      continue;
    if (options.shardCount > 1) {
      result.reason += (result.reason.empty() ? "" : ", ") +
                       std::string("key state '") + key +
                       "' not reached in this shard";
      continue;
    }
    result.status = PropertyResult::Status::Failed;
    result.reason = "its " + std::to_string(result.cases) +
                    " cases never reached the key state '" + key +
                    "' (a vacuous pass is a failure)";
    return finish();
  }
  return finish();
}

} // namespace drt::conformance
