//===- ChildRuns.cpp - Scenarios run in child processes -------------------===//
#include "drt/conformance/ChildRuns.h"

#include "ProgramSupport.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"

#include <algorithm>
#include <chrono>
#include <csignal>
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

namespace drt::conformance {

namespace {

/// The exit statuses of a child run.
constexpr int PassedStatus = 0;
constexpr int DivergedStatus = 3;
constexpr int NotRunStatus = 4;
constexpr int StuckStatus = 5;

/// What the child writes before its report of a stuck step.
constexpr std::string_view StuckMark = "stuck at ";

/// What the child writes, with the run's number, before each run.
constexpr std::string_view RunMark = "drt-child-run ";

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

int runScenarioAsChild(const std::string &file, const std::string &backend,
                       const std::string &against, unsigned stuckAfterMs,
                       unsigned runs) {
  std::string text;
  if (!readScenarioFile(file, text).empty())
    return NotRunStatus;
  ParseResult parsed = parseScenario(text);
  if (std::holds_alternative<ParseError>(parsed))
    return NotRunStatus;
  RunOptions options;
  options.backend = backend;
  options.against = against;
  options.stuckAfterMs = stuckAfterMs;
  options.reportAborted = [](const AbortedStep &step) {
    std::cerr << StuckMark << step.toString() << std::flush;
    if (!step.signal)
      std::_Exit(StuckStatus);
  };
  // Repeats stop after SearchSeconds (a third of ChildRunner's default
  // timeout), so that a slow scenario that passes every run ends well
  // before the parent would count it hung.
  auto started = std::chrono::steady_clock::now();
  for (unsigned run = 0; run < std::max(runs, 1u); ++run) {
    if (run > 0 && std::chrono::steady_clock::now() - started > SearchSeconds)
      break;
    std::cout << RunMark << run + 1 << std::endl;
    RunResult r = runScenario(std::get<Scenario>(parsed), options);
    if (!r.setupError.empty())
      return NotRunStatus;
    if (r.divergence)
      return DivergedStatus;
  }
  return PassedStatus;
}

ChildRun runScenarioInChild(const ChildRunner &runner, const std::string &file,
                            unsigned stuckAfterMs, unsigned runs) {
  std::vector<std::string> args = {"/proc/self/exe", RunScenarioOption, file,
                                   "--backend", runner.backend};
  for (const std::string &plugin : runner.plugins)
    args.insert(args.end(), {"--plugin", plugin});
  if (!runner.against.empty())
    args.insert(args.end(), {"--against", runner.against});
  if (stuckAfterMs)
    args.insert(args.end(), {"--stuck-after-ms", std::to_string(stuckAfterMs)});
  if (runs > 1)
    args.insert(args.end(), {"--repeat", std::to_string(runs)});
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // Spawned, not forked: a fork after POCL has started can hang.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, runner.log.c_str(),
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
                  std::chrono::seconds(runner.timeoutSeconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return {ChildRun::Kind::Hung,
              "no end after " + std::to_string(runner.timeoutSeconds) + " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::string log = readText(runner.log);
  unsigned started = 0;
  if (size_t at = log.rfind(RunMark); at != std::string::npos)
    started =
        unsigned(std::strtoul(log.c_str() + at + RunMark.size(), nullptr, 10));
  if (WIFEXITED(status) && WEXITSTATUS(status) == PassedStatus)
    return {ChildRun::Kind::Passed, "", started};
  if (WIFEXITED(status) && WEXITSTATUS(status) == DivergedStatus)
    return {ChildRun::Kind::Diverged, "", started};
  if (WIFEXITED(status) && WEXITSTATUS(status) == NotRunStatus)
    return {ChildRun::Kind::NotRun, "the scenario did not start", started};
  if (WIFEXITED(status) && WEXITSTATUS(status) == StuckStatus) {
    size_t at = log.find(StuckMark);
    return {ChildRun::Kind::Stuck,
            at == std::string::npos ? "a step never returned" : log.substr(at),
            started};
  }
  std::string detail =
      WIFSIGNALED(status)
          ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                strsignal(WTERMSIG(status)) + ")"
          : "exited with status " + std::to_string(WEXITSTATUS(status));
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("SUMMARY: ", 0) == 0)
      detail += "; " + line;
  return {ChildRun::Kind::Crashed, detail, started};
}

FirstChildRuns runUntilItFails(const ChildRunner &runner,
                               const std::string &file,
                               const Scenario &scenario,
                               unsigned stuckAfterMs) {
  FirstChildRuns out;
  bool timing = timingDependent(scenario);
  out.last =
      runScenarioInChild(runner, file, stuckAfterMs, timing ? SearchRuns : 1);
  out.runs = int(out.last.runs);
  if (!timing && out.last.kind == ChildRun::Kind::Passed) {
    out.last = runScenarioInChild(runner, file, stuckAfterMs, SearchRuns);
    out.runs += int(out.last.runs);
    out.flaky = out.last.kind != ChildRun::Kind::Passed &&
                out.last.kind != ChildRun::Kind::NotRun;
  }
  return out;
}

unsigned FirstChildRuns::candidateRuns(const Scenario &candidate) const {
  if (!flaky && !timingDependent(candidate))
    return 1;
  return candidateRunsFor(last.runs);
}

unsigned replayRuns(const ChildRunner &runner, const std::string &file,
                    const Scenario &minimal, bool flaky,
                    unsigned stuckAfterMs) {
  if (!flaky && !timingDependent(minimal))
    return 1;
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << printScenario(minimal);
  }
  ChildRun search = runScenarioInChild(runner, file, stuckAfterMs, SearchRuns);
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  bool failed = search.kind != ChildRun::Kind::Passed &&
                search.kind != ChildRun::Kind::NotRun;
  return replayRunsFor(failed ? search.runs : 0);
}

ShrinkResult shrinkInChildren(const Scenario &scenario,
                              const ChildRunner &runner,
                              const FirstChildRuns &firstRuns,
                              const std::string &candidateFile,
                              const ShrinkOptions &limits,
                              std::string &failure) {
  const ChildRun &first = firstRuns.last;
  bool stuck = first.kind == ChildRun::Kind::Stuck;
  // A case that crashed or got stuck in the run that found it and diverged
  // in its first child run fails in more ways than one: any failure keeps
  // a candidate, a stuck step counted within CandidateStuckAfterMs.
  bool anyFailure = first.kind == ChildRun::Kind::Diverged;
  // A divergence's child run has no detail of its own.
  auto detail = [](const ChildRun &run) {
    return run.kind == ChildRun::Kind::Diverged
               ? std::string("a divergence from the reference model")
               : run.detail;
  };
  failure = detail(first);
  ShrinkResult shrunk = shrinkScenario(
      scenario,
      [&](const Scenario &s) { return wellFormedScenario(s, runner.backend); },
      [&](const Scenario &s) {
        {
          std::ofstream out(candidateFile, std::ios::binary | std::ios::trunc);
          out << printScenario(s);
        }
        ChildRun c = runScenarioInChild(runner, candidateFile,
                                        candidateStuckAfterMs(first.kind),
                                        firstRuns.candidateRuns(s));
        bool fails = anyFailure ? c.kind != ChildRun::Kind::Passed &&
                                      c.kind != ChildRun::Kind::NotRun
                     : stuck ? c.kind == ChildRun::Kind::Stuck
                             : c.kind == ChildRun::Kind::Crashed ||
                                   c.kind == ChildRun::Kind::Hung;
        if (!fails)
          return false;
        failure = detail(c);
        return true;
      },
      limits);
  std::error_code ignored;
  std::filesystem::remove(candidateFile, ignored);
  return shrunk;
}

} // namespace drt::conformance
