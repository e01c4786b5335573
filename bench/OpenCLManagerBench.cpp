//===- OpenCLManagerBench.cpp - The cost of a short-lived OpenCL manager --===//
//
// A conformance scenario creates one manager per device, so the cost of
// creating, initialising and shutting one down is what shrinking on OpenCL
// spends its time on. Measured side by side: managers that share the
// device's context and program (the default) and managers that build their
// own (shared-context=0), from the binary the process kept of the device's
// first build or from source (program-binaries=0); then one small scenario
// end to end on each and on the fake device.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/opencl/OpenCLDevice.h"

#include <benchmark/benchmark.h>

#include <variant>

namespace {

using namespace drt;

DeviceConfig configWith(bool shared, bool binaries = true) {
  DeviceConfig config;
  config.name = "bench";
  config.parameters["shared-context"] = shared ? "1" : "0";
  config.parameters["program-binaries"] = binaries ? "1" : "0";
  return config;
}

void managerLifetime(benchmark::State &state) {
  bool shared = state.range(0) != 0;
  bool binaries = state.range(1) != 0;
  // The first manager of the device, so that a shared one has a context to
  // reuse; it lives through the whole benchmark, as in a test process.
  opencl::OpenCLDeviceManager first(configWith(true));
  if (Error e = first.init()) {
    state.SkipWithError(e.toString().c_str());
    return;
  }
  for (auto _ : state) {
    opencl::OpenCLDeviceManager device(configWith(shared, binaries));
    if (Error e = device.init()) {
      state.SkipWithError(e.toString().c_str());
      return;
    }
    benchmark::DoNotOptimize(device.programReused());
  }
}
BENCHMARK(managerLifetime)
    ->ArgNames({"shared", "binaries"})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Args({0, 0})
    ->Unit(benchmark::kMillisecond);

/// One scenario (two devices, a transfer, a run, a read-back) through the
/// conformance runner, the cost of one case or one shrink step.
void scenario(benchmark::State &state, const char *backend,
              const char *parameters) {
  std::string text =
      std::string("device d0 ") + parameters + "\ndevice d1 " + parameters + R"(
create a f32 [4] fill=1
create o f32 [4]
to-device a d0
add-network n d1 f32 [4] o=scale(x,2)
run n x=a o=o
from-device o d1 release
)";
  conformance::ParseResult parsed = conformance::parseScenario(text);
  if (auto *error = std::get_if<conformance::ParseError>(&parsed)) {
    state.SkipWithError(error->toString().c_str());
    return;
  }
  const conformance::Scenario &s = std::get<conformance::Scenario>(parsed);
  conformance::RunOptions options;
  options.backend = backend;
  for (auto _ : state) {
    conformance::RunResult r = conformance::runScenario(s, options);
    if (!r.passed()) {
      state.SkipWithError("the scenario failed");
      return;
    }
  }
}
BENCHMARK_CAPTURE(scenario, opencl_shared, "opencl", "shared-context=1")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(scenario, opencl_own, "opencl", "shared-context=0")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(scenario, opencl_own_from_source, "opencl",
                  "shared-context=0 program-binaries=0")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(scenario, fake, "fake", "")->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
