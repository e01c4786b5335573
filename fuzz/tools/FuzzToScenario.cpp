//===- FuzzToScenario.cpp - drt-fuzz-to-scenario --------------------------===//
//
// drt-fuzz-to-scenario INPUT [--target residency|differential]
//                      [--backend NAME] [--against NAME] [--max-commands N]
//                      [--out DIR] [--name NAME] [--shrink-seconds S]
//                      [--no-shrink] [--plugin LIBRARY]...
//
// Turns a fuzzer input that fails (a divergence, or a crash inside the
// backend) into a readable regression: it decodes the input as the target
// does (the same environment variables, overridden by the options), writes
// the scenario with explicit names, finds out how it fails, shrinks it with
// the suite's shrinker (the model's normalisation first), and writes
// DIR/NAME.scn (default DIR: conformance/scenarios when it exists, which
// ctest replays on every backend; default NAME:
// fuzz-TARGET-BACKEND-HASH) with what failed as comments, then prints the
// drt-replay command.
//
// The scenario is written before it first runs, so a crash still leaves it.
// Whether it diverges or crashes is found out in a child process (this
// program again, --run-scenario), started before any backend runs here (a
// fork after POCL has started can hang); a divergence is then shrunk in
// this process, a crash with a child process per candidate.
//
// Exit status: 0 when a failing scenario was written, 3 when the input does
// not fail here (nothing written), 2 on bad usage or an input that decodes
// to no scenario.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/ChildRuns.h"
#include "drt/conformance/HostMemoryRetention.h"
#include "drt/conformance/Plugins.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/conformance/Shrink.h"
#include "drt/fuzz/FuzzInput.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace drt::conformance;
using namespace drt::fuzz;
namespace fs = std::filesystem;

namespace {

int usage() {
  std::cerr
      << "usage: drt-fuzz-to-scenario INPUT [--target residency|differential]"
         " [--backend NAME] [--against NAME] [--max-commands N] [--out DIR]"
         " [--name NAME] [--shrink-seconds S] [--no-shrink]"
         " [--stuck-after-ms MS] [--plugin LIBRARY]...\n";
  return 2;
}

std::string readFile(const std::string &path, bool &ok) {
  std::ifstream in(path, std::ios::binary);
  ok = bool(in);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string hashName(const std::string &bytes) {
  uint64_t h = 1469598103934665603ull;
  for (char c : bytes)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx",
                static_cast<unsigned long long>(h & 0xffffffffull));
  return buf;
}

bool writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return bool(out);
}

} // namespace

int main(int argc, char **argv) {
  drt::conformance::retainFreedHostMemory();
  std::string input, out, name;
  std::optional<std::string> backend, against, maxCommands;
  Target target = Target::Residency;
  bool shrink = true;
  double shrinkSeconds = 60;
  bool runOne = false;
  unsigned stuckAfterMs = 0, runs = 1;
  // The plugins given here; DRT_PLUGINS reaches a child by its environment.
  std::vector<std::string> plugins;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--target" && hasValue) {
      std::optional<Target> t = parseTarget(argv[++i]);
      if (!t || *t == Target::ScenarioText)
        return usage();
      target = *t;
    } else if (arg == "--backend" && hasValue) {
      backend = argv[++i];
    } else if (arg == "--against" && hasValue) {
      against = argv[++i];
    } else if (arg == "--max-commands" && hasValue) {
      maxCommands = argv[++i];
    } else if (arg == "--out" && hasValue) {
      out = argv[++i];
    } else if (arg == "--name" && hasValue) {
      name = argv[++i];
    } else if (arg == "--shrink-seconds" && hasValue) {
      shrinkSeconds = std::strtod(argv[++i], nullptr);
    } else if (arg == "--no-shrink") {
      shrink = false;
    } else if (arg == "--plugin" && hasValue) {
      plugins.push_back(argv[++i]);
    } else if (arg == "--stuck-after-ms" && hasValue) {
      stuckAfterMs = unsigned(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--repeat" && hasValue && runOne) {
      runs = unsigned(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == RunScenarioOption && hasValue) {
      runOne = true;
      input = argv[++i];
    } else if (arg.rfind("--", 0) != 0 && input.empty()) {
      input = arg;
    } else {
      return usage();
    }
  }
  if (input.empty())
    return usage();
  std::vector<std::string> pluginPaths = pluginsFromEnvironment();
  pluginPaths.insert(pluginPaths.end(), plugins.begin(), plugins.end());
  auto loaded = loadBackendPlugins(pluginPaths);
  if (!loaded) {
    std::cerr << "drt-fuzz-to-scenario: " << loaded.takeError().message()
              << "\n";
    return 2;
  }
  FuzzSetup setup = setupFromEnvironment(target);
  if (backend)
    setup.backend = *backend;
  if (against)
    setup.against = *against;
  if (maxCommands)
    setup.maxCommands =
        size_t(std::strtoull(maxCommands->c_str(), nullptr, 10));
  if (runOne)
    return runScenarioAsChild(input, setup.backend, setup.against, stuckAfterMs,
                              runs);
  if (std::string problem = setupProblem(setup); !problem.empty()) {
    std::cerr << "drt-fuzz-to-scenario: " << problem << "\n";
    return 2;
  }

  bool ok = false;
  std::string bytes = readFile(input, ok);
  if (!ok) {
    std::cerr << "drt-fuzz-to-scenario: cannot read " << input << "\n";
    return 2;
  }
  std::variant<DecodedInput, Rejection> decoded = decodeInput(
      {reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()}, setup);
  if (const auto *r = std::get_if<Rejection>(&decoded)) {
    std::cerr << "drt-fuzz-to-scenario: " << input
              << " decodes to no scenario: " << r->reason << "\n";
    return 2;
  }
  const DecodedInput &in = std::get<DecodedInput>(decoded);

  if (out.empty())
    out = fs::is_directory("conformance/scenarios") ? "conformance/scenarios"
                                                    : ".";
  std::string backendPart = setup.backend;
  for (char &c : backendPart)
    if (c == ':')
      c = '-';
  if (name.empty())
    name = "fuzz-" + std::string(targetName(target)) + "-" + backendPart + "-" +
           hashName(bytes);
  std::string file = out + "/" + name + ".scn";
  std::string againstOption =
      setup.against.empty() ? "" : " --against " + setup.against;
  std::string origin =
      "input " + fs::path(input).filename().string() + " (" +
      std::to_string(bytes.size()) + " bytes, " + in.describe() +
      ") of fuzz target '" + std::string(targetName(target)) +
      "' on backend '" + setup.backend + "'" +
      (setup.against.empty() ? std::string()
                             : " against '" + setup.against + "'");
  if (!writeText(file, "# decoded from " + origin +
                           "; not yet run (if this program dies, this is the "
                           "scenario that kills it)\n" +
                           printScenario(in.scenario))) {
    std::cerr << "drt-fuzz-to-scenario: cannot write " << file << "\n";
    return 2;
  }
  std::cerr << "drt-fuzz-to-scenario: decoded " << input << " into " << file
            << " (" << in.scenario.commands.size() << " commands)\n";

  // How does it fail? Found out in a child, before any backend starts here.
  ChildRunner children{setup.backend, setup.against, plugins, file + ".log"};
  // The first run tells a stuck step from a slow one as the runner does,
  // or within --stuck-after-ms when the caller knows better. A finding that
  // may fail in some interleavings only gets several runs to show it
  // (runUntilItFails); one that fails only after passing is treated as
  // timing dependent from here on.
  FirstChildRuns firstRuns =
      runUntilItFails(children, file, in.scenario, stuckAfterMs);
  const ChildRun &first = firstRuns.last;
  bool flaky = firstRuns.flaky;
  bool timing = flaky || timingDependent(in.scenario);
  if (first.kind == ChildRun::Kind::Passed ||
      first.kind == ChildRun::Kind::NotRun) {
    std::cerr << "drt-fuzz-to-scenario: the scenario "
              << (first.kind == ChildRun::Kind::Passed
                      ? "passes here (" + std::to_string(firstRuns.runs) +
                            " runs)"
                      : "does not run here (" + first.detail + ")")
              << "; nothing written (a sanitizer finding reproduces only in "
                 "a sanitizer build: use the one from the fuzz preset)\n";
    fs::remove(file);
    fs::remove(children.log);
    return 3;
  }
  bool crashed = first.kind != ChildRun::Kind::Diverged;
  bool stuck = first.kind == ChildRun::Kind::Stuck;
  Scenario minimal = in.scenario;
  std::string failure = first.detail;
  ShrinkResult shrunk;
  RunOptions options;
  options.backend = setup.backend;
  options.against = setup.against;
  if (!crashed) {
    // A divergence: the runner in this process says what diverged.
    RunResult r;
    unsigned runsToFail = runsUntilItFails([&] {
      r = runScenario(minimal, options);
      return r.divergence || !timing;
    });
    if (!r.divergence) {
      std::cerr << "drt-fuzz-to-scenario: the scenario diverged in a child "
                   "process but not here (a flaky backend?)\n";
      fs::remove(children.log);
      return 3;
    }
    failure = r.divergence->toString();
    if (shrink) {
      ShrinkOptions limits;
      limits.maxSeconds = shrinkSeconds;
      shrunk = shrinkScenario(
          minimal,
          [&](const Scenario &s) {
            return wellFormedScenario(s, setup.backend);
          },
          [&](const Scenario &s) {
            // An interleaving that fails may not come again: a candidate
            // whose outcome may hang on timing gets several runs.
            unsigned runs =
                flaky || timingDependent(s) ? candidateRunsFor(runsToFail) : 1;
            for (unsigned run = 0; run < runs; ++run) {
              RunResult c = runScenario(s, options);
              if (!c.divergence)
                continue;
              failure = c.divergence->toString();
              return true;
            }
            return false;
          },
          limits);
      minimal = shrunk.scenario;
    }
  } else if (shrink) {
    // A crash: every candidate runs in a child of its own, and fails when
    // it ends the way the scenario does (a stuck one within a short wait).
    ShrinkOptions limits;
    limits.maxSeconds = shrinkSeconds;
    shrunk = shrinkInChildren(minimal, children, firstRuns, file + ".candidate",
                              limits, failure);
    minimal = shrunk.scenario;
  }
  // A failure that comes once in many runs gets a replay that repeats the
  // scenario ten times as often as it took to show (replayRunsFor).
  unsigned repeat = 1;
  if (crashed) {
    repeat = replayRuns(children, file + ".candidate", minimal, flaky,
                        stuck ? CandidateStuckAfterMs : 0);
  } else if (flaky || timingDependent(minimal)) {
    repeat = replayRunsFor(runsUntilItFails(
        [&] { return bool(runScenario(minimal, options).divergence); }));
  }
  fs::remove(children.log);

  std::string replay =
      "drt-replay" + pluginOptions(*loaded) + " " + file + " --backend " +
      setup.backend + againstOption +
      (repeat > 1 ? " --repeat " + std::to_string(repeat) : "");
  std::string header = "# regression from " + origin + ", shrunk from " +
                       std::to_string(in.scenario.commands.size()) + " to " +
                       std::to_string(minimal.commands.size()) + " commands\n" +
                       (stuck     ? commentLines(failure)
                        : crashed ? "# the backend crashed: " + failure + "\n"
                                  : commentLines(failure)) +
                       "# replay: " + replay + "\n";
  if (!writeText(file, header + printScenario(minimal))) {
    std::cerr << "drt-fuzz-to-scenario: cannot write " << file << "\n";
    return 2;
  }
  std::cout << (stuck     ? "stuck: "
                : crashed ? "crash: "
                          : "divergence:\n")
            << (crashed && !stuck ? failure + "\n" : failure) << "scenario ("
            << minimal.commands.size() << " commands, " << shrunk.attempts
            << " shrink candidates run): " << file << "\n"
            << printScenario(minimal) << "replay: " << replay << "\n";
  return 0;
}
