//===- HarnessMemory.cpp - Peak memory of one large-tensor scenario -------===//
//
// drt-harness-memory BYTES [--backend NAME]
//
// Runs one scenario over a single float tensor of BYTES bytes (create with
// a fill pattern, to-device, from-device keep, read, write, to-device,
// from-device release, read) through the conformance runner, in a process
// of its own so that the peak resident size (VmHWM, which only grows) is
// this scenario's. Prints one "key=value" line per figure:
//
//   tensor_bytes          BYTES
//   baseline_rss_bytes    resident size before the scenario
//   peak_rss_bytes        peak resident size of the process
//   peak_ratio            peak_rss_bytes / tensor_bytes
//   growth_ratio          (peak_rss_bytes - baseline_rss_bytes) / tensor_bytes
//   seconds               wall time of parsing and running the scenario
//
// BYTES takes a K, M or G suffix (powers of 1024) and must be a positive
// multiple of 4. Exit status: 0 when the scenario passed, 1 when it did not
// (the divergence is printed), 2 for bad arguments.
//
//===----------------------------------------------------------------------===//
#include "HarnessWorkloads.h"

#include "drt/conformance/Runner.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

namespace {

/// BYTES with an optional K/M/G suffix, or nothing when it is not a
/// positive multiple of 4 that fits.
std::optional<uint64_t> parseBytes(const std::string &text) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception &) {
    return std::nullopt;
  }
  std::string suffix = text.substr(used);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty())
    return std::nullopt;
  if (value == 0 || value > (UINT64_MAX >> 1 >> shift))
    return std::nullopt;
  value <<= shift;
  if (value % 4 != 0)
    return std::nullopt;
  return value;
}

int usage(const char *why) {
  std::cerr << "drt-harness-memory: " << why
            << "\nusage: drt-harness-memory BYTES[K|M|G] [--backend NAME]\n";
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  drt::bench::retainFreedHostMemoryAsTheProgramsDo();
  std::optional<uint64_t> bytes;
  std::string backend = "fake";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0) {
      if (++i == argc)
        return usage("--backend needs a backend name");
      backend = argv[i];
    } else if (!bytes) {
      bytes = parseBytes(argv[i]);
      if (!bytes)
        return usage(("'" + std::string(argv[i]) +
                      "' is not a positive multiple of 4 bytes")
                         .c_str());
    } else {
      return usage(
          ("unexpected argument '" + std::string(argv[i]) + "'").c_str());
    }
  }
  if (!bytes)
    return usage("the tensor size is missing");

  uint64_t baseline = drt::bench::processMemory("VmRSS").value_or(0);
  auto started = std::chrono::steady_clock::now();
  drt::conformance::Scenario scenario;
  if (std::string error = drt::bench::parseInto(
          drt::bench::tensorRoundTripScenario(*bytes), scenario);
      !error.empty()) {
    std::cerr << "drt-harness-memory: the scenario does not parse: " << error
              << "\n";
    return 1;
  }
  drt::conformance::RunOptions options;
  options.backend = backend;
  drt::conformance::RunResult result =
      drt::conformance::runScenario(scenario, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (!result.passed()) {
    std::cerr << "drt-harness-memory: the scenario failed on " << backend
              << ":\n"
              << (result.setupError.empty() ? result.divergence->toString()
                                            : result.setupError)
              << "\n";
    return 1;
  }
  std::optional<uint64_t> peak = drt::bench::processMemory("VmHWM");
  if (!peak) {
    std::cerr << "drt-harness-memory: no VmHWM in /proc/self/status\n";
    return 1;
  }
  double size = double(*bytes);
  std::printf("tensor_bytes=%llu\n", (unsigned long long)*bytes);
  std::printf("baseline_rss_bytes=%llu\n", (unsigned long long)baseline);
  std::printf("peak_rss_bytes=%llu\n", (unsigned long long)*peak);
  std::printf("peak_ratio=%.3f\n", double(*peak) / size);
  std::printf("growth_ratio=%.3f\n",
              double(*peak > baseline ? *peak - baseline : 0) / size);
  std::printf("seconds=%.3f\n", seconds);
  return 0;
}
