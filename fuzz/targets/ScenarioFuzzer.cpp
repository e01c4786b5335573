//===- ScenarioFuzzer.cpp - libFuzzer target running scenarios ------------===//
//
// The residency and differential targets (DRT_FUZZ_TARGET names which):
// each input decodes to a scenario (drt/fuzz/FuzzInput.h) that the
// conformance runner executes on DRT_FUZZ_BACKEND (and DRT_FUZZ_AGAINST in
// lockstep), comparing it with the reference model after every step. A
// finding is printed with its scenario and ends the process with abort(), so
// that libFuzzer keeps the input; drt-fuzz-to-scenario turns it into a
// shrunk .scn file.
//
//===----------------------------------------------------------------------===//
#include "drt/fuzz/FuzzInput.h"

#include <cstdio>
#include <cstdlib>

using namespace drt::fuzz;

namespace {

Target target() { return *parseTarget(DRT_FUZZ_TARGET); }

const FuzzSetup &setup() {
  static const FuzzSetup s = setupFromEnvironment(target());
  return s;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (std::string problem = setupProblem(setup()); !problem.empty()) {
    std::fprintf(stderr, "drt-fuzz-%s: %s\n", DRT_FUZZ_TARGET, problem.c_str());
    std::exit(2);
  }
  std::fprintf(stderr, "drt-fuzz-%s: backend %s%s%s, at most %zu commands\n",
               DRT_FUZZ_TARGET, setup().backend.c_str(),
               setup().against.empty() ? "" : " against ",
               setup().against.c_str(), setup().maxCommands);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  InputCheck check = checkScenarioInput({data, size}, setup());
  // A text that decodes to no scenario teaches nothing: keep it out of the
  // corpus.
  if (check.rejected)
    return -1;
  if (check.finding) {
    std::fputs(check.finding->report().c_str(), stderr);
    std::fflush(stderr);
    std::abort();
  }
  return 0;
}
