//===- FuzzReplay.cpp - drt-fuzz-replay -----------------------------------===//
//
// drt-fuzz-replay --target TARGET [--backend NAME] [--against NAME]
//                 [--max-commands N] [--expect-accepted] [--print] PATH...
//
// Runs every input under PATH (a file, or a directory's files) the way the
// libFuzzer target TARGET does, built with any compiler: the corpus replay
// ctest runs. Exits 1 when an input is a finding (each printed with the
// command that converts it into a scenario), or, with --expect-accepted,
// when an input decodes to no scenario; 2 on bad usage. --print prints the
// scenario each input decodes to.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/HostMemoryRetention.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/fuzz/FuzzInput.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

using namespace drt::fuzz;
namespace fs = std::filesystem;

namespace {

int usage() {
  std::cerr << "usage: drt-fuzz-replay --target residency|differential|"
               "scenario-text [--backend NAME] [--against NAME] "
               "[--max-commands N] [--expect-accepted] [--print] PATH...\n";
  return 2;
}

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

} // namespace

int main(int argc, char **argv) {
  drt::conformance::retainFreedHostMemory();
  std::optional<Target> target;
  std::optional<std::string> backend, against, maxCommands;
  bool expectAccepted = false, print = false;
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--target" && hasValue) {
      target = parseTarget(argv[++i]);
      if (!target)
        return usage();
    } else if (arg == "--backend" && hasValue) {
      backend = argv[++i];
    } else if (arg == "--against" && hasValue) {
      against = argv[++i];
    } else if (arg == "--max-commands" && hasValue) {
      maxCommands = argv[++i];
    } else if (arg == "--expect-accepted") {
      expectAccepted = true;
    } else if (arg == "--print") {
      print = true;
    } else if (arg.rfind("--", 0) != 0) {
      paths.push_back(arg);
    } else {
      return usage();
    }
  }
  if (!target || paths.empty())
    return usage();
  FuzzSetup setup = setupFromEnvironment(*target);
  if (backend)
    setup.backend = *backend;
  if (against)
    setup.against = *against;
  if (maxCommands)
    setup.maxCommands =
        size_t(std::strtoull(maxCommands->c_str(), nullptr, 10));
  if (*target != Target::ScenarioText)
    if (std::string problem = setupProblem(setup); !problem.empty()) {
      std::cerr << "drt-fuzz-replay: " << problem << "\n";
      return 2;
    }

  std::vector<fs::path> inputs;
  for (const fs::path &p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const fs::directory_entry &e : fs::directory_iterator(p))
        if (e.is_regular_file())
          inputs.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    } else {
      std::cerr << "drt-fuzz-replay: no such file or directory: " << p << "\n";
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());

  auto started = std::chrono::steady_clock::now();
  size_t choices = 0, texts = 0, rejected = 0, findings = 0;
  for (const fs::path &path : inputs) {
    std::string bytes = readFile(path);
    if (*target == Target::ScenarioText) {
      std::string problem = checkScenarioText(bytes);
      drt::conformance::ParseResult parsed =
          drt::conformance::parseScenario(bytes);
      if (const auto *e = std::get_if<drt::conformance::ParseError>(&parsed)) {
        ++rejected;
        if (expectAccepted)
          std::cout << path.string() << ": REJECTED: " << e->toString() << "\n";
      } else {
        ++texts;
      }
      if (!problem.empty()) {
        ++findings;
        std::cout << path.string() << ": FINDING\n" << problem << "\n";
      }
      continue;
    }
    std::span<const uint8_t> input(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    if (print) {
      auto decoded = decodeInput(input, setup);
      if (const auto *d = std::get_if<DecodedInput>(&decoded))
        std::cout << "# " << path.string() << ": " << d->describe() << "\n"
                  << drt::conformance::printScenario(d->scenario);
    }
    InputCheck check = checkScenarioInput(
        {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()}, setup);
    if (check.rejected) {
      ++rejected;
      if (expectAccepted)
        std::cout << path.string() << ": REJECTED: " << check.rejected->reason
                  << "\n";
      continue;
    }
    ++(!bytes.empty() && bytes[0] == '#' ? texts : choices);
    if (check.finding) {
      ++findings;
      std::cout << path.string() << ": FINDING\n"
                << check.finding->report()
                << "convert it: drt-fuzz-to-scenario " << path.string()
                << " --target " << targetName(*target) << " --backend "
                << setup.backend
                << (setup.against.empty() ? "" : " --against " + setup.against)
                << "\n\n";
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  std::cout << "drt-fuzz-replay: " << targetName(*target);
  if (*target != Target::ScenarioText)
    std::cout << " on " << setup.backend
              << (setup.against.empty() ? "" : " against " + setup.against);
  std::cout << ": " << inputs.size() << " inputs (" << choices << " choices, "
            << texts << " text, " << rejected << " rejected), " << findings
            << " findings, " << seconds << " s\n";
  if (findings || (expectAccepted && rejected))
    return 1;
  return 0;
}
