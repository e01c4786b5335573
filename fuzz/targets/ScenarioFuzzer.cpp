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

#include "drt/conformance/HostMemoryRetention.h"

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>

using namespace drt::fuzz;

namespace {

/// The fatal signals whose handlers libFuzzer and the sanitizers install,
/// and which LLVM (inside POCL) takes over when an OpenCL platform first
/// starts.
constexpr std::array FatalSignals = {
    SIGHUP, SIGINT,  SIGTERM, SIGUSR2, SIGILL,  SIGTRAP, SIGABRT, SIGFPE,
    SIGBUS, SIGSEGV, SIGQUIT, SIGSYS,  SIGXCPU, SIGXFSZ, SIGPIPE};

/// LLVM's handlers end the process without libFuzzer saving the input that
/// killed it (and without a sanitizer's report of a crash), so the handlers
/// in place when the first input runs are put back after every input.
class FatalSignalHandlers {
public:
  FatalSignalHandlers() {
    for (size_t i = 0; i < FatalSignals.size(); ++i)
      sigaction(FatalSignals[i], nullptr, &saved_[i]);
  }
  void restore() const {
    for (size_t i = 0; i < FatalSignals.size(); ++i)
      sigaction(FatalSignals[i], &saved_[i], nullptr);
  }

private:
  std::array<struct sigaction, FatalSignals.size()> saved_;
};

Target target() { return *parseTarget(DRT_FUZZ_TARGET); }

const FuzzSetup &setup() {
  static const FuzzSetup s = setupFromEnvironment(target());
  return s;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  drt::conformance::retainFreedHostMemory();
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
  static const FatalSignalHandlers handlers;
  InputCheck check = checkScenarioInput({data, size}, setup());
  handlers.restore();
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
