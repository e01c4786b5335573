//===- ScenarioBench.cpp - The conformance harness's own speed ------------===//
//
// How many scenario steps per second the conformance harness (generators,
// reference model, runner) gets through, on the fake device and on OpenCL.
// items_per_second counts the commands of the scenarios run (the runner's
// own final read-back and teardown are part of the time, not of the count),
// so that the figure means the same for every revision. Only the public
// conformance API is used: bench/compare-harness.sh builds this very file
// against an older revision and runs both side by side.
//
//   BM_GeneratedSteps     generate (mixed family) and run as the property
//                         loop does (annotated first on older revisions)
//   BM_GenerateOnly       generate only
//   BM_RunGeneratedOnly   run already generated and annotated scenarios
//   BM_ReplaySteps        run the stored regression scenarios
//   BM_GeneratedSmallSteps/fake   as BM_GeneratedSteps, tensors up to 4 KiB
//                         only: the cost of a step, not of its bytes
//   BM_ReplayLongSteps/fake       one long scenario of small tensors
//                         (long-lived's profile, printed and parsed back):
//                         the cost of a replayed step, not of a run's set-up
//   BM_LiveTensors/N      N creates then N to-devices: cost per step against
//                         the number of live tensors
//   BM_TensorBytes/B      a round trip of one tensor of B bytes: bytes per
//                         second and the peak resident memory it adds
//
//===----------------------------------------------------------------------===//
#include "HarnessWorkloads.h"

#include "drt/BackendRegistry.h"
#include "drt/conformance/Generators.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <benchmark/benchmark.h>

// The input space (and the long-lived family) came after revision 4d15dd3,
// which bench/compare-harness.sh builds this file against: there every
// generated tensor is small already, and the long replay is skipped.
#if __has_include("drt/conformance/InputSpace.h")
#define DRT_BENCH_HAS_INPUT_SPACE 1
#include "drt/conformance/InputSpace.h"
#else
#define DRT_BENCH_HAS_INPUT_SPACE 0
#endif

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace drt;
using namespace drt::conformance;

/// The family whose generator profile stands for generated scenarios: it
/// chooses every command kind, on two devices.
constexpr const char *RepresentativeFamily = "mixed";
/// Scenarios per iteration of the generated benchmarks, each of its own
/// seed, so that an iteration is the same work whatever the iteration count.
constexpr int GeneratedBatch = 32;
/// Step counts of the batch run from half of this to this, as a property
/// run of default settings (--max-steps 40) draws them.
constexpr int GeneratedMaxSteps = 40;

/// Why \p backend cannot run scenarios here ("" when it can): not
/// registered in this build, or its device does not start (no OpenCL
/// platform). Found once per backend with a one-command scenario.
std::string unavailableBecause(const std::string &backend) {
  static std::map<std::string, std::string> known;
  auto it = known.find(backend);
  if (it != known.end())
    return it->second;
  std::string why;
  if (!BackendRegistry::instance().find(backend)) {
    why = "backend '" + backend + "' is not registered in this build";
  } else {
    Scenario probe;
    RunResult result;
    if (std::string error =
            bench::parseInto("device d0\ncreate a f32 [4]\n", probe);
        !error.empty()) {
      why = "probe scenario: " + error;
    } else {
      RunOptions options;
      options.backend = backend;
      result = runScenario(probe, options);
    }
    if (!result.setupError.empty())
      why = "backend '" + backend + "' does not start: " + result.setupError;
    else if (result.divergence)
      why = "backend '" + backend +
            "' fails a one-command scenario: " + result.divergence->toString();
  }
  return known[backend] = why;
}

/// Sets \p options to run a generated case as the property loop does, with
/// its expectations unwritten, where the runner of this revision can
/// (bench/ is also built against older revisions by compare-harness.sh,
/// whose property loops annotate every case before running it); true then.
template <typename Options> bool runUnwritten(Options &options) {
  if constexpr (requires { options.checkWrittenExpectations = false; }) {
    options.checkWrittenExpectations = false;
    return true;
  }
  return false;
}
const bool CasesRunUnwritten = [] {
  RunOptions options;
  return runUnwritten(options);
}();

/// Runs \p scenario on \p backend; false (and the benchmark is skipped with
/// the reason) when it does not pass, since a failing run measures nothing
/// comparable. \p generatedCase: run as the property loop runs a case.
bool runPasses(benchmark::State &state, const Scenario &scenario,
               const std::string &backend, const std::string &what,
               bool generatedCase = false) {
  RunOptions options;
  options.backend = backend;
  if (generatedCase)
    runUnwritten(options);
  RunResult result = runScenario(scenario, options);
  if (result.passed())
    return true;
  std::string why = result.setupError.empty() ? result.divergence->toString()
                                              : result.setupError;
  state.SkipWithError((what + " failed on " + backend + ": " + why).c_str());
  return false;
}

/// Sets items_per_second to \p commandsPerIteration per iteration, a
/// counter of the commands per iteration (generators of other revisions may
/// draw other scenarios from the same seeds) and one of the wall time per
/// command (seconds, shown with SI prefixes: "12.3u" is 12.3 microseconds).
void reportSteps(benchmark::State &state, size_t commandsPerIteration) {
  state.SetItemsProcessed(int64_t(state.iterations()) *
                          int64_t(commandsPerIteration));
  state.counters["commands"] = double(commandsPerIteration);
  state.counters["seconds_per_step"] =
      benchmark::Counter(double(commandsPerIteration),
                         benchmark::Counter::kIsIterationInvariantRate |
                             benchmark::Counter::kInvert);
}

/// Does one timed iteration's work and returns whether it went well. Out of
/// line under a name of its own, so that a profiler can count the timed
/// work alone: bench/compare-harness.sh counts the instructions executed
/// inside it with callgrind --toggle-collect='*timedIteration*'.
template <typename Work> [[gnu::noinline]] bool timedIteration(Work &&work) {
  return work();
}

/// What generating scenarios for \p backend needs: the representative
/// family's profile and the backend's capabilities.
struct GeneratorSetup {
  GeneratorProfile profile;
  Capabilities capabilities;
};

/// Largest tensor of the small-tensor benchmarks, in bytes.
constexpr uint64_t SmallTensorBytes = 4096;

/// Limits \p profile to tensors of at most SmallTensorBytes: the size
/// classes up to it, and live bytes bounded so that a tensor that takes
/// what is left of a budget stays small too.
void limitToSmallTensors(GeneratorProfile &profile) {
#if DRT_BENCH_HAS_INPUT_SPACE
  std::vector<SizeClass> &classes = profile.space.sizeClasses;
  classes.erase(std::remove_if(classes.begin(), classes.end(),
                               [](const SizeClass &c) {
                                 return c.maxBytes > SmallTensorBytes;
                               }),
                classes.end());
  if (profile.sizeClassWeights.size() > classes.size())
    profile.sizeClassWeights.resize(classes.size());
  profile.space.maxLiveBytes = SmallTensorBytes;
#else
  // Tensors are drawn from a few shapes of at most 8 elements.
  (void)profile;
#endif
}

/// \p family's generator profile. Older revisions built it for a backend
/// and a seed (the configuration was part of the profile); newer ones build
/// it alone and apply configurations to the scenarios.
template <typename Family>
GeneratorProfile profileOf(const Family &family, const std::string &backend) {
  if constexpr (std::is_invocable_v<decltype(family.profile)>)
    return family.profile();
  else
    return family.profile(backend, 1);
}

/// The generator setup of \p backend for \p family, or nothing and the
/// reason in \p why.
std::optional<GeneratorSetup>
generatorSetup(const std::string &backend, std::string &why,
               const std::string &familyName = RepresentativeFamily) {
  const BackendInfo *info = BackendRegistry::instance().find(backend);
  if (!info) {
    why = "backend '" + backend + "' is not registered in this build";
    return std::nullopt;
  }
  for (const PropertyFamily &family : propertyFamilies()) {
    if (family.name != familyName)
      continue;
    if (std::string skip = family.skipReason(info->capabilities);
        !skip.empty()) {
      why = "family '" + family.name + "' does not run on " + backend + ": " +
            skip;
      return std::nullopt;
    }
    return GeneratorSetup{profileOf(family, backend), info->capabilities};
  }
  why = "no property family named '" + familyName + "'";
  return std::nullopt;
}

/// Scenario \p index of the batch, drawn with a fixed seed and size, so
/// that every run of the benchmark draws the same scenarios.
Scenario drawScenario(const GeneratorSetup &setup, int index) {
  rc::Gen<Scenario> gen = genScenario(setup.profile, setup.capabilities);
  int size = GeneratedMaxSteps / 2 +
             index * (GeneratedMaxSteps / 2) / (GeneratedBatch - 1);
  rc::Random random(0x5eed0000u + uint64_t(index));
  return gen(random, size).value();
}

/// Generates and runs the batch on \p backend as the property loop does
/// (annotating each case first where the runner needs it), its tensors up
/// to SmallTensorBytes when \p smallTensors.
void generatedSteps(benchmark::State &state, const char *backend,
                    bool smallTensors) {
  if (std::string why = unavailableBecause(backend); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  std::string why;
  std::optional<GeneratorSetup> setup = generatorSetup(backend, why);
  if (!setup) {
    state.SkipWithError(why.c_str());
    return;
  }
  if (smallTensors)
    limitToSmallTensors(setup->profile);
  size_t commands = 0;
  try {
    for (auto _ : state)
      if (!timedIteration([&] {
            commands = 0;
            for (int i = 0; i < GeneratedBatch; ++i) {
              Scenario s = drawScenario(*setup, i);
              if (!CasesRunUnwritten)
                s = annotateExpectations(s, backend);
              commands += s.commands.size();
              if (!runPasses(state, s, backend, "generated scenario", true))
                return false;
            }
            return true;
          }))
        return;
  } catch (const std::exception &e) {
    state.SkipWithError(
        (std::string("generation failed: ") + e.what()).c_str());
    return;
  }
  reportSteps(state, commands);
}

void BM_GeneratedSteps(benchmark::State &state, const char *backend) {
  generatedSteps(state, backend, false);
}
BENCHMARK_CAPTURE(BM_GeneratedSteps, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GeneratedSteps, opencl, "opencl")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_GeneratedSmallSteps(benchmark::State &state, const char *backend) {
  generatedSteps(state, backend, true);
}
BENCHMARK_CAPTURE(BM_GeneratedSmallSteps, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_GenerateOnly(benchmark::State &state, const char *backend) {
  std::string why;
  std::optional<GeneratorSetup> setup = generatorSetup(backend, why);
  if (!setup) {
    state.SkipWithError(why.c_str());
    return;
  }
  size_t commands = 0;
  try {
    for (auto _ : state)
      timedIteration([&] {
        commands = 0;
        for (int i = 0; i < GeneratedBatch; ++i) {
          Scenario s = drawScenario(*setup, i);
          commands += s.commands.size();
          benchmark::DoNotOptimize(s);
        }
        return true;
      });
  } catch (const std::exception &e) {
    state.SkipWithError(
        (std::string("generation failed: ") + e.what()).c_str());
    return;
  }
  reportSteps(state, commands);
}
BENCHMARK_CAPTURE(BM_GenerateOnly, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

void BM_RunGeneratedOnly(benchmark::State &state, const char *backend) {
  if (std::string why = unavailableBecause(backend); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  std::string why;
  std::optional<GeneratorSetup> setup = generatorSetup(backend, why);
  if (!setup) {
    state.SkipWithError(why.c_str());
    return;
  }
  std::vector<Scenario> batch;
  size_t commands = 0;
  try {
    for (int i = 0; i < GeneratedBatch; ++i) {
      batch.push_back(annotateExpectations(drawScenario(*setup, i), backend));
      commands += batch.back().commands.size();
    }
  } catch (const std::exception &e) {
    state.SkipWithError(
        (std::string("generation failed: ") + e.what()).c_str());
    return;
  }
  // One untimed pass first: a first run pays one-off costs (kernel builds,
  // the allocator's growth), and a failing scenario stops the benchmark.
  for (const Scenario &s : batch)
    if (!runPasses(state, s, backend, "generated scenario"))
      return;
  for (auto _ : state)
    if (!timedIteration([&] {
          for (const Scenario &s : batch)
            if (!runPasses(state, s, backend, "generated scenario"))
              return false;
          return true;
        }))
      return;
  reportSteps(state, commands);
}
BENCHMARK_CAPTURE(BM_RunGeneratedOnly, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_RunGeneratedOnly, opencl, "opencl")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

/// The folder of stored scenarios: $DRT_BENCH_SCENARIO_DIR when set (so
/// that two builds can replay the same files), else the source tree's.
std::filesystem::path scenarioFolder() {
  if (const char *dir = std::getenv("DRT_BENCH_SCENARIO_DIR"); dir && *dir)
    return dir;
  return DRT_BENCH_SCENARIO_DIR;
}

void BM_ReplaySteps(benchmark::State &state, const char *backend) {
  if (std::string why = unavailableBecause(backend); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  std::filesystem::path folder = scenarioFolder();
  std::vector<std::filesystem::path> files;
  std::error_code listError;
  for (const auto &entry :
       std::filesystem::directory_iterator(folder, listError))
    if (entry.path().extension() == ".scn")
      files.push_back(entry.path());
  if (listError || files.empty()) {
    state.SkipWithError(("no stored scenarios (*.scn) in " + folder.string() +
                         (listError ? ": " + listError.message() : ""))
                            .c_str());
    return;
  }
  std::sort(files.begin(), files.end());
  std::vector<Scenario> scenarios(files.size());
  size_t commands = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    std::ifstream in(files[i]);
    std::stringstream text;
    text << in.rdbuf();
    if (std::string error = bench::parseInto(text.str(), scenarios[i]);
        !error.empty()) {
      state.SkipWithError((files[i].string() + ":" + error).c_str());
      return;
    }
    commands += scenarios[i].commands.size();
  }
  // One untimed pass first, as in BM_RunGeneratedOnly.
  for (size_t i = 0; i < scenarios.size(); ++i)
    if (!runPasses(state, scenarios[i], backend, files[i].string()))
      return;
  for (auto _ : state)
    if (!timedIteration([&] {
          for (size_t i = 0; i < scenarios.size(); ++i)
            if (!runPasses(state, scenarios[i], backend, files[i].string()))
              return false;
          return true;
        }))
      return;
  reportSteps(state, commands);
  state.counters["scenarios"] = double(scenarios.size());
}
BENCHMARK_CAPTURE(BM_ReplaySteps, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplaySteps, opencl, "opencl")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

/// The family whose profile the long replayed scenario is drawn from: one
/// device, thousands of creates, transfers, releases and raw allocations.
constexpr const char *LongFamily = "long-lived";
/// Commands of the long replayed scenario.
constexpr size_t LongScenarioSteps = 4000;
/// The seed it is drawn from, fixed so that every run replays the same one.
constexpr uint64_t LongScenarioSeed = 0x10c0ffeeu;

void BM_ReplayLongSteps(benchmark::State &state, const char *backend) {
#if DRT_BENCH_HAS_INPUT_SPACE
  if (std::string why = unavailableBecause(backend); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  std::string why;
  std::optional<GeneratorSetup> setup =
      generatorSetup(backend, why, LongFamily);
  if (!setup) {
    state.SkipWithError(why.c_str());
    return;
  }
  limitToSmallTensors(setup->profile);
  // Printed and parsed back, as a stored scenario reaches drt-replay.
  Scenario s;
  try {
    std::string text =
        printScenario(ScenarioGenerator(setup->profile, setup->capabilities)
                          .generate(LongScenarioSeed, LongScenarioSteps));
    if (std::string error = bench::parseInto(text, s); !error.empty()) {
      state.SkipWithError(("long scenario: " + error).c_str());
      return;
    }
  } catch (const std::exception &e) {
    state.SkipWithError(
        (std::string("generation failed: ") + e.what()).c_str());
    return;
  }
  // One untimed pass first, as in BM_RunGeneratedOnly.
  if (!runPasses(state, s, backend, "long scenario"))
    return;
  for (auto _ : state)
    if (!timedIteration(
            [&] { return runPasses(state, s, backend, "long scenario"); }))
      return;
  reportSteps(state, s.commands.size());
#else
  (void)backend;
  state.SkipWithError("this revision has no input space to draw the long "
                      "scenario's small tensors from");
#endif
}
BENCHMARK_CAPTURE(BM_ReplayLongSteps, fake, "fake")
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

/// No fixed iteration count: the default minimum time runs a single
/// iteration when the first one takes longer than that (N=800 took about a
/// minute at commit 4d15dd3), and enough for a stable figure on a faster
/// harness.
void BM_LiveTensors(benchmark::State &state) {
  size_t count = size_t(state.range(0));
  Scenario s;
  if (std::string error =
          bench::parseInto(bench::liveTensorsScenario(count), s);
      !error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state)
    if (!timedIteration([&] {
          return runPasses(state, s, "fake", "live-tensors scenario");
        }))
      return;
  reportSteps(state, s.commands.size());
}
BENCHMARK(BM_LiveTensors)
    ->Arg(100)
    ->Arg(200)
    ->Arg(400)
    ->Arg(800)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

/// Peak memory is measured from a reset peak where the kernel allows it
/// (peak_rss_growth then belongs to this benchmark alone); elsewhere the
/// process-wide peak only grows, and peak_rss_reset is 0. Memory the
/// allocator kept from an earlier benchmark can hide part of the growth:
/// drt-harness-memory measures one size in a process of its own.
void BM_TensorBytes(benchmark::State &state) {
  uint64_t bytes = uint64_t(state.range(0));
  Scenario s;
  if (std::string error =
          bench::parseInto(bench::tensorRoundTripScenario(bytes), s);
      !error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  bool reset = bench::resetPeakMemory();
  uint64_t baseline =
      bench::processMemory(reset ? "VmRSS" : "VmHWM").value_or(0);
  for (auto _ : state)
    if (!timedIteration(
            [&] { return runPasses(state, s, "fake", "tensor round trip"); }))
      return;
  uint64_t peak = bench::processMemory("VmHWM").value_or(0);
  reportSteps(state, s.commands.size());
  state.SetBytesProcessed(int64_t(state.iterations()) *
                          int64_t(s.commands.size()) * int64_t(bytes));
  uint64_t growth = peak > baseline ? peak - baseline : 0;
  state.counters["peak_rss_growth"] =
      benchmark::Counter(double(growth), benchmark::Counter::kDefaults,
                         benchmark::Counter::kIs1024);
  state.counters["growth_per_byte"] = double(growth) / double(bytes);
  state.counters["peak_rss_reset"] = reset ? 1 : 0;
}
BENCHMARK(BM_TensorBytes)
    ->Arg(4 << 10)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(64 << 20)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

// Before main(), as in the programs, where it is their first call.
const bool RetainedFreedHostMemory =
    (bench::retainFreedHostMemoryAsTheProgramsDo(), true);

} // namespace

BENCHMARK_MAIN();
