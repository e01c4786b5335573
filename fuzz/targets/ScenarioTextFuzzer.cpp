//===- ScenarioTextFuzzer.cpp - libFuzzer target of the text form ---------===//
//
// The scenario-text target: any bytes are given to the scenario parser,
// which must answer with a scenario or a parse error (never a crash, a hang
// or unbounded memory); a scenario must print to a text that parses back to
// the same scenario.
//
//===----------------------------------------------------------------------===//
#include "drt/fuzz/FuzzInput.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string problem = drt::fuzz::checkScenarioText(
      std::string_view(reinterpret_cast<const char *>(data), size));
  if (!problem.empty()) {
    std::fprintf(stderr, "drt fuzz finding: %s\n", problem.c_str());
    std::fflush(stderr);
    std::abort();
  }
  return 0;
}
