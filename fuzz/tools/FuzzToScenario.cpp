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
// Exit status: 0 when a failing scenario was written (--found-status N: N,
// for a caller whose own status must say that something failed, as
// drt-conformance's after a stuck or crashed case), 3 when the input does
// not fail here (nothing written), 2 on bad usage or an input that decodes
// to no scenario.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Plugins.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/conformance/Shrink.h"
#include "drt/fuzz/FuzzInput.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace drt::conformance;
using namespace drt::fuzz;
namespace fs = std::filesystem;

extern char **environ;

namespace {

/// Exit statuses of --run-scenario.
constexpr int PassedStatus = 0;
constexpr int DivergedStatus = 3;
constexpr int NotRunStatus = 4;
constexpr int StuckStatus = 5;

/// How long a shrink candidate of a stuck scenario may go without progress
/// before it counts as stuck too (RunOptions::stuckAfterMs): a step that
/// never returns shows within it, where the first run waits the runner's
/// default (about 31 s) to tell it from a slow step.
constexpr unsigned CandidateStuckAfterMs = 2000;

/// Most seconds one child run may take before it counts as a hang (the
/// runner's own watchdog ends a blocked step after about 11 s).
constexpr int ChildTimeoutSeconds = 60;

int usage() {
  std::cerr
      << "usage: drt-fuzz-to-scenario INPUT [--target residency|differential]"
         " [--backend NAME] [--against NAME] [--max-commands N] [--out DIR]"
         " [--name NAME] [--shrink-seconds S] [--no-shrink]"
         " [--found-status N] [--stuck-after-ms MS] [--plugin LIBRARY]...\n";
  return 2;
}

std::string readFile(const std::string &path, bool &ok) {
  std::ifstream in(path, std::ios::binary);
  ok = bool(in);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// "# LINE" for every line of \p text.
std::string commented(const std::string &text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    out += "# " + text.substr(pos, nl - pos) + "\n";
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

/// --run-scenario FILE --backend B [--against A] [--stuck-after-ms MS]:
/// runs a scenario file and answers with the exit status alone (a step
/// that never returns: StuckStatus, after the runner's report).
int runScenarioFile(const std::string &file, const std::string &backend,
                    const std::string &against, unsigned stuckAfterMs) {
  bool ok = false;
  std::string text = readFile(file, ok);
  ParseResult parsed = parseScenario(text);
  if (!ok || std::holds_alternative<ParseError>(parsed))
    return NotRunStatus;
  RunOptions options;
  options.backend = backend;
  options.against = against;
  options.stuckAfterMs = stuckAfterMs;
  options.reportAborted = [](const AbortedStep &stuck) {
    std::cerr << "stuck at " << stuck.toString() << std::flush;
    if (!stuck.signal)
      std::_Exit(StuckStatus);
  };
  RunResult r = runScenario(std::get<Scenario>(parsed), options);
  if (!r.setupError.empty())
    return NotRunStatus;
  return r.divergence ? DivergedStatus : PassedStatus;
}

/// How a child run of a scenario ended.
struct ChildRun {
  enum class Kind { Passed, Diverged, NotRun, Crashed, Hung, Stuck } kind;
  /// For a crash: the signal or exit status, and the sanitizer's summary
  /// line when there is one.
  std::string detail;
};

/// Runs \p file in a child process (this program, --run-scenario); its
/// output goes to \p log; \p stuckAfterMs: its RunOptions::stuckAfterMs.
ChildRun runInChild(const std::string &file, const FuzzSetup &setup,
                    const std::vector<std::string> &plugins,
                    const std::string &log, unsigned stuckAfterMs = 0) {
  std::vector<std::string> args = {"/proc/self/exe", "--run-scenario", file,
                                   "--backend", setup.backend};
  for (const std::string &plugin : plugins) {
    args.push_back("--plugin");
    args.push_back(plugin);
  }
  if (!setup.against.empty()) {
    args.push_back("--against");
    args.push_back(setup.against);
  }
  if (stuckAfterMs) {
    args.push_back("--stuck-after-ms");
    args.push_back(std::to_string(stuckAfterMs));
  }
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int spawned =
      posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    return {ChildRun::Kind::NotRun,
            std::string("cannot start a child: ") + std::strerror(spawned)};
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::seconds(ChildTimeoutSeconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return {ChildRun::Kind::Hung,
              "no end after " + std::to_string(ChildTimeoutSeconds) + " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == PassedStatus)
    return {ChildRun::Kind::Passed, ""};
  if (WIFEXITED(status) && WEXITSTATUS(status) == DivergedStatus)
    return {ChildRun::Kind::Diverged, ""};
  if (WIFEXITED(status) && WEXITSTATUS(status) == NotRunStatus)
    return {ChildRun::Kind::NotRun, "the scenario did not start"};
  if (WIFEXITED(status) && WEXITSTATUS(status) == StuckStatus) {
    bool ok = false;
    std::string report = readFile(log, ok);
    size_t at = report.find("stuck at ");
    return {ChildRun::Kind::Stuck, at == std::string::npos
                                       ? "a step never returned"
                                       : report.substr(at)};
  }
  std::string detail =
      WIFSIGNALED(status)
          ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                strsignal(WTERMSIG(status)) + ")"
          : "exited with status " + std::to_string(WEXITSTATUS(status));
  bool ok = false;
  std::istringstream lines(readFile(log, ok));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("SUMMARY: ", 0) == 0)
      detail += "; " + line;
  return {ChildRun::Kind::Crashed, detail};
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
  std::string input, out, name;
  std::optional<std::string> backend, against, maxCommands;
  Target target = Target::Residency;
  bool shrink = true;
  double shrinkSeconds = 60;
  bool runOne = false;
  unsigned stuckAfterMs = 0;
  int foundStatus = 0;
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
    } else if (arg == "--found-status" && hasValue) {
      char *end = nullptr;
      long status = std::strtol(argv[++i], &end, 10);
      if (!end || *end || status < 0 || status > 125)
        return usage();
      foundStatus = int(status);
    } else if (arg == "--stuck-after-ms" && hasValue) {
      stuckAfterMs = unsigned(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--run-scenario" && hasValue) {
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
    return runScenarioFile(input, setup.backend, setup.against, stuckAfterMs);
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
  std::string log = file + ".log";
  // The first run tells a stuck step from a slow one as the runner does,
  // or within --stuck-after-ms when the caller knows better.
  ChildRun first = runInChild(file, setup, plugins, log, stuckAfterMs);
  if (first.kind == ChildRun::Kind::Passed ||
      first.kind == ChildRun::Kind::NotRun) {
    std::cerr << "drt-fuzz-to-scenario: the scenario "
              << (first.kind == ChildRun::Kind::Passed
                      ? "passes here"
                      : "does not run here (" + first.detail + ")")
              << "; nothing written (a sanitizer finding reproduces only in "
                 "a sanitizer build: use the one from the fuzz preset)\n";
    fs::remove(file);
    fs::remove(log);
    return 3;
  }
  bool crashed = first.kind != ChildRun::Kind::Diverged;
  bool stuck = first.kind == ChildRun::Kind::Stuck;
  Scenario minimal = in.scenario;
  std::string failure = first.detail;
  ShrinkResult shrunk;
  if (!crashed) {
    // A divergence: the runner in this process says what diverged.
    RunOptions options;
    options.backend = setup.backend;
    options.against = setup.against;
    RunResult r = runScenario(minimal, options);
    if (!r.divergence) {
      std::cerr << "drt-fuzz-to-scenario: the scenario diverged in a child "
                   "process but not here (a flaky backend?)\n";
      fs::remove(log);
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
            RunResult c = runScenario(s, options);
            if (!c.divergence)
              return false;
            failure = c.divergence->toString();
            return true;
          },
          limits);
      minimal = shrunk.scenario;
    }
  } else if (shrink) {
    // A crash: every candidate runs in a child of its own, and fails when
    // it ends the way the scenario does (a stuck one within a short wait).
    std::string candidate = file + ".candidate";
    ShrinkOptions limits;
    limits.maxSeconds = shrinkSeconds;
    shrunk = shrinkScenario(
        minimal,
        [&](const Scenario &s) { return wellFormedScenario(s, setup.backend); },
        [&](const Scenario &s) {
          writeText(candidate, printScenario(s));
          ChildRun c = runInChild(candidate, setup, plugins, log,
                                  stuck ? CandidateStuckAfterMs : 0);
          if (stuck ? c.kind != ChildRun::Kind::Stuck
                    : c.kind != ChildRun::Kind::Crashed &&
                          c.kind != ChildRun::Kind::Hung)
            return false;
          failure = c.detail;
          return true;
        },
        limits);
    minimal = shrunk.scenario;
    fs::remove(candidate);
  }
  fs::remove(log);

  std::string replay = "drt-replay" + pluginOptions(*loaded) + " " + file +
                       " --backend " + setup.backend + againstOption;
  std::string header = "# regression from " + origin + ", shrunk from " +
                       std::to_string(in.scenario.commands.size()) + " to " +
                       std::to_string(minimal.commands.size()) + " commands\n" +
                       (stuck     ? commented(failure)
                        : crashed ? "# the backend crashed: " + failure + "\n"
                                  : commented(failure)) +
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
  return foundStatus;
}
