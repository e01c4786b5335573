//===- HarnessWorkloads.h - Scenarios and memory probes of the harness bench
//===//
//
// What drt-bench-harness and drt-harness-memory share: the scenario texts
// they time and the process memory figures they report. Built only on the
// public conformance API (the text form above all), so that
// bench/compare-harness.sh can build the same source against an older
// revision of the harness.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_BENCH_HARNESSWORKLOADS_H
#define DRT_BENCH_HARNESSWORKLOADS_H

#include "drt/conformance/ScenarioText.h"

// Since the revision that added it, the programs that run scenarios keep
// freed host memory for reuse.
#if __has_include("drt/conformance/HostMemoryRetention.h")
#include "drt/conformance/HostMemoryRetention.h"
#define DRT_BENCH_HAS_HOST_MEMORY_RETENTION 1
#else
#define DRT_BENCH_HAS_HOST_MEMORY_RETENTION 0
#endif

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace drt::bench {

/// A scenario of \p count tensors of four floats created, then moved to
/// device d0 one after the other, so that every step runs with up to
/// \p count live tensors; the runner then reads every one back and tears
/// down. It has 2 * count commands.
inline std::string liveTensorsScenario(size_t count) {
  std::string text = "device d0\n";
  for (size_t i = 0; i < count; ++i)
    text += "create t" + std::to_string(i) + " f32 [4] fill=1\n";
  for (size_t i = 0; i < count; ++i)
    text += "to-device t" + std::to_string(i) + " d0\n";
  return text;
}

/// The commands of tensorRoundTripScenario().
inline constexpr size_t TensorRoundTripCommands = 8;

/// A scenario over one float tensor of \p bytes bytes (a multiple of 4):
/// create it with a fill pattern, to-device, from-device keep, read, write,
/// to-device, from-device release, read; so that every path that copies a
/// tensor's contents (model, backend, runner comparisons) handles it. The
/// device's budget is twice the tensor, so that no size is refused.
inline std::string tensorRoundTripScenario(uint64_t bytes) {
  std::string elements = std::to_string(bytes / 4);
  return "device d0 budget=" + std::to_string(2 * bytes) +
         "\n"
         "create a f32 [" +
         elements +
         "] fill=1\n"
         "to-device a d0\n"
         "from-device a d0 keep\n"
         "read a\n"
         "write a 2\n"
         "to-device a d0\n"
         "from-device a d0 release\n"
         "read a\n";
}

/// Keeps freed host memory for reuse as drt-conformance and drt-replay do,
/// on the revisions whose programs do, so that the benchmarks measure what
/// the programs would (nothing on older ones).
inline void retainFreedHostMemoryAsTheProgramsDo() {
#if DRT_BENCH_HAS_HOST_MEMORY_RETENTION
  conformance::retainFreedHostMemory();
#endif
}

/// Parses \p text into \p scenario; returns "" or the parse error.
inline std::string parseInto(std::string_view text,
                             conformance::Scenario &scenario) {
  conformance::ParseResult parsed = conformance::parseScenario(text);
  if (auto *error = std::get_if<conformance::ParseError>(&parsed))
    return error->toString();
  scenario = std::move(std::get<conformance::Scenario>(parsed));
  return "";
}

/// A "VmRSS" or "VmHWM" line of /proc/self/status in bytes, or nothing
/// where the file or the line is missing.
inline std::optional<uint64_t> processMemory(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) != 0 || line.size() <= field.size() ||
        line[field.size()] != ':')
      continue;
    uint64_t kib = std::stoull(line.substr(field.size() + 1));
    return kib * 1024;
  }
  return std::nullopt;
}

/// Lowers the process's peak resident size (VmHWM) to its current one
/// (Linux 4.0 and later); false where the kernel refuses, and then VmHWM
/// still holds the peak of the whole process so far.
inline bool resetPeakMemory() {
  std::ofstream clearRefs("/proc/self/clear_refs");
  clearRefs << "5";
  clearRefs.flush();
  return clearRefs.good();
}

} // namespace drt::bench

#endif // DRT_BENCH_HARNESSWORKLOADS_H
