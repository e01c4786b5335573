//===- ReplayMain.cpp - drt-replay ----------------------------------------===//
//
// drt-replay FILE [--backend NAME] [--against NAME] [--trace]: runs one
// scenario against a backend, comparing it with the reference model after
// every step; --trace prints every step with its observations.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <fstream>
#include <iostream>
#include <sstream>

using namespace drt::conformance;

int main(int argc, char **argv) {
  std::string file, backend = "fake", against;
  bool trace = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--backend" || arg == "--against") && i + 1 < argc)
      (arg == "--backend" ? backend : against) = argv[++i];
    else if (arg == "--trace")
      trace = true;
    else if (arg.rfind("--", 0) != 0 && file.empty())
      file = arg;
    else {
      std::cerr << "usage: drt-replay FILE [--backend NAME] [--against NAME] "
                   "[--trace]\n";
      return 2;
    }
  }
  if (file.empty()) {
    std::cerr << "usage: drt-replay FILE [--backend NAME] [--against NAME] "
                 "[--trace]\n";
    return 2;
  }
  std::ifstream in(file);
  if (!in) {
    std::cerr << "drt-replay: cannot read " << file << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  ParseResult parsed = parseScenario(text.str());
  if (const auto *error = std::get_if<ParseError>(&parsed)) {
    std::cerr << file << ":" << error->toString() << "\n";
    return 2;
  }
  const Scenario &scenario = std::get<Scenario>(parsed);
  RunOptions options;
  options.backend = backend;
  options.against = against;
  if (trace)
    options.trace = [](const std::string &line) { std::cout << line << "\n"; };
  RunResult result = runScenario(scenario, options);
  if (!result.setupError.empty()) {
    std::cerr << "drt-replay: " << result.setupError << "\n";
    return 2;
  }
  if (result.divergence) {
    std::cout << file << ": FAILED on " << backend
              << (against.empty() ? "" : " against " + against) << "\n"
              << result.divergence->toString();
    return 1;
  }
  std::cout << file << ": passed on " << backend
            << (against.empty() ? "" : " against " + against) << " ("
            << result.steps << " steps)\n";
  return 0;
}
