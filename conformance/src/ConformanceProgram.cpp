//===- ConformanceProgram.cpp - drt-conformance ---------------------------===//
//
// Runs the property families against registered backends and prints a
// progress line per property and a summary table; exits 0 only when every
// property passes. See docs/conformance.md.
//
//===----------------------------------------------------------------------===//
#include "ProgramSupport.h"
#include "drt/BackendRegistry.h"
#include "drt/conformance/ChildRuns.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/CrashArena.h"
#include "drt/conformance/HostMemoryRetention.h"
#include "drt/conformance/Plugins.h"
#include "drt/conformance/Programs.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Report.h"
#include "drt/conformance/ScenarioText.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace drt::conformance {

namespace {

// Follows "usage: NAME".
const char *Usage =
    " [--backend NAME|all] [--against NAME] [--seed N]\n"
    "                       [--cases N | --time-budget SECONDS]\n"
    "                       [--max-steps N] [--filter PATTERN]\n"
    "                       [--param KEY=VALUE]... [--list] [--junit FILE]\n"
    "                       [--report FILE] [--failures-dir DIR] "
    "[--fail-fast]\n"
    "                       [--census] [--plugin LIBRARY]...\n"
    "                       [--stuck-after SECONDS] [--no-shrink-aborted]\n"
    "Runs the residency conformance properties on each backend, in each of\n"
    "the configurations its parameters declare worth testing (--list shows\n"
    "them). Each property runs cases for --time-budget seconds (default 1;\n"
    "at least 10 cases; parallel twice and concurrent-records six times\n"
    "that, their bugs being races), or exactly --cases N cases, spread over\n"
    "the configurations. --param KEY=VALUE (or BACKEND:KEY=VALUE for one "
    "backend)\n"
    "fixes a parameter of the backend under test on every device it creates;\n"
    "the others are still swept. The --against partner always runs in its\n"
    "default configuration, held to its own capabilities. --report FILE\n"
    "writes a Markdown summary to FILE and JSON to FILE.json. "
    "GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX split "
    "the\n"
    "cases of every property across shards. --fail-fast stops after the first\n"
    "failing property. --census prints what the run's scenarios drew on (size\n"
    "classes, kinds, values, command pairs, states, faults, allocations). A\n"
    "run of every property fails when a size class, element kind or value\n"
    "class is never reached. --plugin LIBRARY (and DRT_PLUGINS, paths\n"
    "separated by ':') loads a shared library that registers backends.\n"
    "A case whose step does not return for --stuck-after seconds (default:\n"
    "twice the callback timeout, plus the linearizability budget, plus 10)\n"
    "or that crashes the process ends the run: the case up to that step is\n"
    "written, and the process turns into this program with --shrink-aborted\n"
    "FILE --backend NAME [--against NAME] [--stuck-after-ms MS], which\n"
    "shrinks it with a process per candidate, writes FILE-shrunk.scn and\n"
    "exits with status 1 (--no-shrink-aborted prints that command instead).\n";

/// '*' matches any run of characters; a pattern without '*' matches a
/// substring. Several patterns may be separated by ':'.
bool matchesOne(const std::string &pattern, const std::string &name) {
  if (pattern.find('*') == std::string::npos)
    return name.find(pattern) != std::string::npos;
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

bool matches(const std::string &filter, const std::string &name) {
  if (filter.empty())
    return true;
  size_t start = 0;
  while (start <= filter.size()) {
    size_t colon = filter.find(':', start);
    std::string one = filter.substr(
        start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!one.empty() && matchesOne(one, name))
      return true;
    if (colon == std::string::npos)
      break;
    start = colon + 1;
  }
  return false;
}

/// Cases a property may be asked for, and commands a case may have: large
/// enough for any release gate, small enough to fit where they go.
constexpr long MaxCases = 100'000'000;
constexpr long MaxStepsPerCase = 1'000'000;

/// The name of the one row that stands for every property of a backend
/// that could not be used.
constexpr const char *UnavailableRow = "every property";

/// Why no device of backend \p name can be created with the parameters
/// \p fixed (a driver without a platform, a failing init), or "" when one
/// can: asked once, so that an unavailable backend is one message instead of
/// a failure per property.
std::string unavailableBecause(const std::string &name,
                               const ParameterMap &fixed) {
  DeviceConfig config;
  config.name = "availability-probe";
  config.parameters = fixed;
  auto device = BackendRegistry::instance().create(name, config);
  if (!device)
    return device.takeError().toString();
  (*device)->shutdown();
  return "";
}

void list() {
  std::cout << "Properties:\n";
  for (const PropertyFamily &f : propertyFamilies())
    std::cout << "  " << f.name << "\n      " << f.description << "\n";
  std::cout << "Backends:\n";
  for (const BackendInfo &b : BackendRegistry::instance().list()) {
    std::cout << "  " << b.name << (b.testOnly ? " (test only)" : "")
              << "\n      " << b.description
              << "\n      capabilities (default configuration): "
              << b.capabilities.toString() << "\n";
    for (const BackendParameter &p : b.parameters) {
      std::cout << "      parameter " << p.name << "="
                << (p.defaultValue.empty() ? "(unset)" : p.defaultValue) << ": "
                << p.meaning << "; " << p.allowedValues();
      if (p.testValues.size() > 1) {
        std::cout << "; tested:";
        for (const std::string &v : p.testValues)
          std::cout << " " << v;
        if (!p.testedWith.empty())
          std::cout << " (with " << configurationName(p.testedWith) << ")";
      }
      if (!p.widensRacesWith.empty())
        std::cout << "; widens race windows at " << p.widensRacesWith
                  << " (half the concurrency families' cases)";
      if (!p.holdsOperationsWith.empty())
        std::cout << "; holds operations in flight at " << p.holdsOperationsWith
                  << " (a quarter of the faults "
                  << "family's cases)";
      std::cout << "\n";
    }
    auto configurations =
        BackendRegistry::instance().configurationsToTest(b.name);
    if (!configurations)
      continue;
    std::cout << "      configurations tested:";
    for (size_t i = 0; i < configurations->size(); ++i) {
      const ParameterMap &c = (*configurations)[i];
      std::cout << (i ? "; " : " ") << configurationName(c);
      auto caps = BackendRegistry::instance().capabilitiesFor(b.name, c);
      if (caps && !c.empty() && caps->toString() != b.capabilities.toString())
        std::cout << " (" << caps->toString() << ")";
    }
    std::cout << "\n";
  }
}

/// ", but nothing ran on BACKEND (unavailable)" when a backend could not
/// be used, ", but N of M property runs were skipped (...)" when more than
/// half of the summary's property runs were skipped, else "": a verdict
/// over a minority of the properties says so.
std::string skippedNote(const RunSummary &summary) {
  size_t skipped = 0;
  std::string unavailable;
  for (const PropertyResult &r : summary.results) {
    skipped += r.status == PropertyResult::Status::Skipped;
    if (r.status == PropertyResult::Status::Skipped && r.name == UnavailableRow)
      unavailable += (unavailable.empty() ? "" : ", ") + r.backend;
  }
  if (!unavailable.empty())
    return ", but nothing ran on " + unavailable + " (unavailable)";
  if (skipped * 2 <= summary.results.size())
    return "";
  return ", but " + std::to_string(skipped) + " of " +
         std::to_string(summary.results.size()) +
         " property runs were skipped (the backends' capabilities or "
         "configurations rule them out; the table says why)";
}

bool writeFile(const std::string &program, const std::string &path,
               const std::string &text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::cerr << program << ": cannot write " << path << "\n";
    return false;
  }
  return true;
}

/// The option a process whose case got stuck or crashed turns into (see
/// PropertyOptions::shrinkInPlace).
constexpr const char *ShrinkAbortedOption = "--shrink-aborted";

/// ShrinkAbortedOption: shrinks the case in \p file, which got stuck or
/// crashed on \p children's backend, with a child process per candidate,
/// writes the minimal scenario beside it (...-shrunk.scn) and prints it.
/// Returns 1: the case failed, shrunk or not.
int shrinkAbortedCase(const ProgramSettings &settings, const std::string &file,
                      const ChildRunner &children, unsigned stuckAfterMs,
                      const std::vector<LoadedPlugin> &plugins) {
  const std::string &program = settings.name;
  std::string text;
  if (std::string why = readScenarioFile(file, text); !why.empty()) {
    std::cerr << program << ": cannot shrink " << file << ": " << why << "\n";
    return 1;
  }
  ParseResult parsed = parseScenario(text);
  if (std::holds_alternative<ParseError>(parsed)) {
    std::cerr << program << ": cannot shrink " << file << ": "
              << std::get<ParseError>(parsed).toString() << "\n";
    return 1;
  }
  const Scenario &scenario = std::get<Scenario>(parsed);
  // A case that passes its first run again may still hang on an
  // interleaving: repeated, and failing, its candidates get repeated too.
  FirstChildRuns firstRuns =
      runUntilItFails(children, file, scenario, stuckAfterMs);
  const ChildRun &first = firstRuns.last;
  std::error_code ignored;
  if (first.kind != ChildRun::Kind::Crashed &&
      first.kind != ChildRun::Kind::Hung &&
      first.kind != ChildRun::Kind::Stuck &&
      first.kind != ChildRun::Kind::Diverged) {
    std::cerr << program << ": " << file
              << " did not fail again in a child process ("
              << (first.kind == ChildRun::Kind::Passed ? "it passed"
                                                       : first.detail)
              << "): it stays unshrunk\n";
    std::filesystem::remove(children.log, ignored);
    return 1;
  }
  // The same bug may show as a divergence instead: a dropped callback that
  // blocked a call for good in one run is a callback the runner waits for
  // in vain in another. The case still fails; it shrinks as any failure.
  if (first.kind == ChildRun::Kind::Diverged)
    std::cerr << program << ": " << file
              << " diverged from the model in a child process instead: "
                 "shrunk as a failure of any kind\n";
  std::string failure;
  ShrinkResult shrunk = shrinkInChildren(
      scenario, children, firstRuns, file + ".candidate",
      shrinkLimitsFor(firstRuns.candidateRuns(scenario)), failure);
  unsigned repeat =
      replayRuns(children, file + ".candidate", shrunk.scenario,
                 firstRuns.flaky, candidateStuckAfterMs(first.kind));
  std::filesystem::remove(children.log, ignored);
  std::string stem = file.size() > 4 && file.ends_with(".scn")
                         ? file.substr(0, file.size() - 4)
                         : file;
  std::string out = stem + "-shrunk.scn";
  std::string replay =
      settings.replayProgram + pluginOptions(plugins) + " " + out +
      " --backend " + children.backend +
      (children.against.empty() ? "" : " --against " + children.against) +
      (repeat > 1 ? " --repeat " + std::to_string(repeat) : "");
  std::string minimal = printScenario(shrunk.scenario);
  if (!writeFile(program, out,
                 "# " + file + " (" + std::to_string(scenario.commands.size()) +
                     " commands) shrunk in child processes to " +
                     std::to_string(shrunk.scenario.commands.size()) + "\n" +
                     commentLines(failure) + "# replay: " + replay + "\n" +
                     minimal))
    return 1;
  std::cout << "minimal scenario (" << shrunk.scenario.commands.size()
            << " steps after " << shrunk.attempts
            << " candidates, each in a process of its own):\n"
            << minimal << "  scenario: " << out << "\nreplay: " << replay
            << "\n";
  return 1;
}

/// The modes this program starts itself in: RunScenarioOption (a child run
/// of a scenario, drt/conformance/ChildRuns.h) and ShrinkAbortedOption.
/// Both take FILE --backend NAME [--against NAME] [--stuck-after-ms MS]
/// [--plugin LIBRARY]...; a child run takes [--repeat N] too.
int runStartedByItself(int argc, char **argv, const ProgramSettings &settings) {
  const std::string &program = settings.name;
  std::string mode = argv[1], file;
  ChildRunner children;
  std::vector<std::string> pluginPaths = pluginsFromEnvironment();
  long stuckAfterMs = 0, runs = 1;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg == "--backend" && hasValue) {
      children.backend = argv[++i];
    } else if (arg == "--against" && hasValue) {
      children.against = argv[++i];
    } else if (arg == "--plugin" && hasValue) {
      children.plugins.push_back(argv[++i]);
    } else if (arg == "--stuck-after-ms" && hasValue) {
      const char *v = argv[++i];
      if (!parseInt(v, stuckAfterMs) || stuckAfterMs < 1 ||
          stuckAfterMs > 3600000) {
        std::cerr << program << ": --stuck-after-ms expects a number from 1 "
                  << "to 3600000, got '" << v << "'\n";
        return 2;
      }
    } else if (arg == "--repeat" && hasValue) {
      const char *v = argv[++i];
      if (!parseInt(v, runs) || runs < 1 || runs > 100000) {
        std::cerr << program << ": --repeat expects a number from 1 to "
                  << "100000, got '" << v << "'\n";
        return 2;
      }
    } else if (file.empty() && arg.rfind("--", 0) != 0) {
      file = arg;
    } else {
      std::cerr << program << " " << mode << ": unexpected argument '" << arg
                << "'\n";
      return 2;
    }
  }
  if (file.empty() || children.backend.empty()) {
    std::cerr << program << " " << mode
              << ": needs FILE --backend NAME [--against NAME] "
                 "[--stuck-after-ms MS] [--repeat N] [--plugin LIBRARY]...\n";
    return 2;
  }
  pluginPaths.insert(pluginPaths.end(), children.plugins.begin(),
                     children.plugins.end());
  auto plugins = loadBackendPlugins(pluginPaths);
  if (!plugins) {
    std::cerr << program << ": " << plugins.takeError().message() << "\n";
    return 2;
  }
  if (mode == RunScenarioOption)
    return runScenarioAsChild(file, children.backend, children.against,
                              unsigned(stuckAfterMs), unsigned(runs));
  children.log = file + ".log";
  return shrinkAbortedCase(settings, file, children, unsigned(stuckAfterMs),
                           *plugins);
}

/// The program; conformanceProgram adds the last-resort catch.
/// Runs the minimal scenario of failed row \p r (of \p program's run with
/// \p seed), configured as it failed, in a child process of its own, as
/// often as its replay command repeats it: the shrink ran each candidate in
/// this process after the property's earlier cases, and a backend that keeps
/// state beyond its devices (a process-wide pool or table, say) may fail a
/// candidate only because of what they left. Empty when the scenario fails
/// alone too (or cannot be run so); else a note saying it did not.
std::string confirmAlone(const std::string &program, const PropertyResult &r,
                         long seed, const std::string &partner,
                         const std::vector<std::string> &plugins) {
  ParseResult parsed = parseScenario(r.minimalScenario);
  if (r.scenarioFile.empty() || !std::holds_alternative<Scenario>(parsed))
    return {};
  std::string file = r.scenarioFile + ".alone.scn";
  if (!writeFile(program, file,
                 printScenario(configureScenario(std::get<Scenario>(parsed),
                                                 r.backend, r.parameters))))
    return {};
  ChildRunner children;
  children.backend = r.backend;
  children.against = partner;
  children.plugins = plugins;
  children.log = file + ".log";
  ChildRun alone = runScenarioInChild(children, file, 0, r.replayRuns);
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  std::filesystem::remove(children.log, ignored);
  if (alone.kind != ChildRun::Kind::Passed)
    return {};
  return "  alone:    the minimal scenario passed " +
         std::to_string(r.replayRuns) +
         " run(s) in a fresh process: it failed here only after the "
         "property's earlier cases in this process, whose effects a backend "
         "that keeps state beyond its devices (a process-wide pool or "
         "table) carries over; the replay may pass, the property's own run "
         "(--filter " +
         r.name + " --seed " + std::to_string(seed) +
         ", the configuration's --param) fails again\n";
}

int run(int argc, char **argv, const ProgramSettings &settings) {
  if (argc > 1 && (std::string_view(argv[1]) == RunScenarioOption ||
                   std::string_view(argv[1]) == ShrinkAbortedOption))
    return runStartedByItself(argc, argv, settings);
  const std::string &program = settings.name;
  std::string usage = "usage: " + program + Usage;
  std::string backend = "all", against, filter, junit, report, failuresDir;
  std::vector<std::string> pluginPaths = pluginsFromEnvironment();
  long seed = 1, cases = 0, maxSteps = 40;
  double timeBudget = 1.0;
  bool failFast = false, printCensus = false, listRequested = false;
  bool shrinkAborted = true;
  long stuckAfterSeconds = 0;
  ParameterMap parameters;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::cerr << program << ": " << arg << " needs a value\n" << usage;
        std::exit(2);
      }
      return argv[++i];
    };
    // Bounded, so that no value is cut to fit where it goes (a case count
    // of 2^32 is not 0).
    auto number = [&](long &out, long least, long most) {
      const char *v = value();
      if (!parseInt(v, out) || out < least || out > most) {
        std::cerr << program << ": " << arg << " expects a number from "
                  << least << " to " << most << ", got '" << v << "'\n";
        std::exit(2);
      }
    };
    if (arg == "--backend")
      backend = value();
    else if (arg == "--against")
      against = value();
    else if (arg == "--seed")
      number(seed, 0, std::numeric_limits<long>::max());
    else if (arg == "--cases")
      number(cases, 1, MaxCases);
    else if (arg == "--time-budget") {
      const char *v = value();
      char *end = nullptr;
      timeBudget = std::strtod(v, &end);
      if (!end || *end || end == v || !(timeBudget > 0) || timeBudget > 3600) {
        std::cerr << program
                  << ": --time-budget expects seconds in "
                     "(0, 3600], got '"
                  << v << "'\n";
        return 2;
      }
    } else if (arg == "--max-steps")
      number(maxSteps, 1, MaxStepsPerCase);
    else if (arg == "--filter")
      filter = value();
    else if (arg == "--junit")
      junit = value();
    else if (arg == "--report")
      report = value();
    else if (arg == "--failures-dir")
      failuresDir = value();
    else if (arg == "--fail-fast")
      failFast = true;
    else if (arg == "--census")
      printCensus = true;
    else if (arg == "--stuck-after")
      number(stuckAfterSeconds, 1, 3600);
    else if (arg == "--no-shrink-aborted")
      shrinkAborted = false;
    else if (arg == "--plugin")
      pluginPaths.push_back(value());
    else if (arg == "--param") {
      std::string text = value(), key, v;
      if (!parseParameterOption(text, key, v)) {
        std::cerr << program << ": --param expects KEY=VALUE, got '" << text
                  << "'\n";
        return 2;
      }
      parameters[key] = v;
    } else if (arg == "--list") {
      listRequested = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      return 0;
    } else {
      std::cerr << program << ": unknown argument '" << arg << "'\n" << usage;
      return 2;
    }
  }

  auto plugins = loadBackendPlugins(pluginPaths);
  if (!plugins) {
    std::cerr << program << ": " << plugins.takeError().message() << "\n";
    return 2;
  }
  if (listRequested) {
    list();
    return 0;
  }
  // A stuck or crashed case is shrunk by this very program, started again.
  std::vector<std::string> shrinkInPlace;
  if (shrinkAborted) {
    shrinkInPlace = {"/proc/self/exe", ShrinkAbortedOption};
    for (const LoadedPlugin &p : *plugins)
      shrinkInPlace.insert(shrinkInPlace.end(), {"--plugin", p.path});
  }

  std::vector<std::string> backends;
  if (backend == "all")
    backends = BackendRegistry::instance().productionNames();
  else
    backends = {backend};
  for (const std::string &b : backends)
    if (!BackendRegistry::instance().find(b)) {
      std::cerr << program << ": unknown backend '" << b
                << "'; --list shows the registered backends\n";
      return 2;
    }
  if (!against.empty() && !BackendRegistry::instance().find(against)) {
    std::cerr << program << ": unknown backend '" << against << "'\n";
    return 2;
  }
  // A parameter written BACKEND:KEY must name a backend under test.
  for (const auto &[key, v] : parameters) {
    size_t colon = key.rfind(':');
    if (colon == std::string::npos)
      continue;
    std::string named = key.substr(0, colon);
    if (std::find(backends.begin(), backends.end(), named) == backends.end()) {
      std::cerr << program << ": --param " << key << "=" << v
                << " is for backend '" << named
                << "', which is not under test\n";
      return 2;
    }
  }
  std::map<std::string, std::vector<ParameterMap>> configurations;
  for (const std::string &b : backends) {
    auto sweep =
        BackendRegistry::instance().configurationsToTest(b, parameters);
    if (!sweep) {
      std::cerr << program << ": --param: " << sweep.takeError().message()
                << "\n";
      return 2;
    }
    configurations[b] = std::move(*sweep);
    // A value no configuration tests is code no run reaches: said before
    // the run, so that a green run is not taken for more than it checked.
    if (const BackendInfo *info = BackendRegistry::instance().find(b))
      if (std::vector<std::string> untested =
              untestedParameters(info->parameters);
          !untested.empty()) {
        std::string names;
        for (const std::string &name : untested)
          names += (names.empty() ? "" : ", ") + name;
        std::cout << "note: backend '" << b << "' declares parameters no "
                  << "configuration tests beyond their default: " << names
                  << " (give each test values, or a reason in "
                  << "BackendParameter::untestedBecause)\n";
      }
  }
  if (!failuresDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(failuresDir, error);
    if (error || !std::filesystem::is_directory(failuresDir)) {
      std::cerr << program << ": --failures-dir " << failuresDir
                << ": cannot create the directory"
                << (error ? " (" + error.message() + ")" : std::string())
                << "\n";
      return 2;
    }
  }
  // The report files are written after the whole run: a path that cannot be
  // written is found now, not then.
  for (const auto &[option, path] :
       {std::pair{"--junit", &junit}, std::pair{"--report", &report}}) {
    if (path->empty())
      continue;
    std::error_code error;
    bool existed = std::filesystem::exists(*path, error);
    if (std::ofstream probe(*path, std::ios::app); !probe) {
      std::cerr << program << ": " << option << " " << *path
                << ": cannot write the file (" << std::strerror(errno) << ")\n";
      return 2;
    }
    if (!existed)
      std::filesystem::remove(*path, error);
  }

  RunSummary summary;
  summary.seed = uint64_t(seed);
  summary.cases = int(cases);
  summary.timeBudget = cases ? 0 : timeBudget;
  summary.maxSteps = int(maxSteps);
  summary.against = against;
  if (const char *total = std::getenv("GTEST_TOTAL_SHARDS")) {
    long n = 0, index = 0;
    const char *idx = std::getenv("GTEST_SHARD_INDEX");
    if (!parseInt(total, n) || n < 1 || n > MaxCases || !idx ||
        !parseInt(idx, index) || index < 0 || index >= n) {
      std::cerr << program
                << ": GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX "
                   "must be a count and an index below it\n";
      return 2;
    }
    summary.shardCount = int(n);
    summary.shardIndex = int(index);
    if (const char *status = std::getenv("GTEST_SHARD_STATUS_FILE"))
      writeFile(program, status, "");
  }

  std::vector<const PropertyFamily *> families;
  for (const PropertyFamily &f : propertyFamilies())
    if (matches(filter, f.name))
      families.push_back(&f);
  if (families.empty()) {
    std::cerr << program << ": no property matches '" << filter << "'\n";
    return 2;
  }

  size_t total = families.size() * backends.size(), done = 0;
  for (const std::string &b : backends) {
    std::string partner = against == b ? "" : against;
    auto started = std::chrono::steady_clock::now();
    // An unavailable backend (or partner) is one row: a failure when it was
    // asked for by name, else a skip.
    std::string unavailable;
    bool named = false;
    // The partner runs in its default configuration: --param is not its.
    for (const std::string &name : {b, partner})
      if (!name.empty() && unavailable.empty())
        if (std::string why = unavailableBecause(
                name, name == b
                          ? BackendRegistry::parametersFor(name, parameters)
                          : ParameterMap{});
            !why.empty()) {
          unavailable = "backend '" + name + "' is unavailable: " + why;
          std::replace(unavailable.begin(), unavailable.end(), '\n', ' ');
          named = name == partner || backend != "all";
        }
    if (!unavailable.empty()) {
      PropertyResult r;
      r.name = UnavailableRow;
      r.backend = b;
      r.configuration = "default";
      r.seed = uint64_t(seed);
      r.status = named ? PropertyResult::Status::Failed
                       : PropertyResult::Status::Skipped;
      r.reason = unavailable;
      done += families.size();
      std::cout << "[" << done << "/" << total << "] " << UnavailableRow
                << " on " << b << (partner.empty() ? "" : " against " + partner)
                << ": " << r.statusText() << " (" << unavailable << ")"
                << std::endl;
      summary.results.push_back(std::move(r));
      summary.secondsPerBackend[b] = 0;
      continue;
    }
    for (const PropertyFamily *f : families) {
      PropertyOptions options;
      options.backend = b;
      options.against = partner;
      options.seed = uint64_t(seed);
      options.cases = int(cases);
      options.timeBudget = timeBudget;
      options.maxSteps = int(maxSteps);
      options.shardIndex = summary.shardIndex;
      options.shardCount = summary.shardCount;
      options.failureDirectory = failuresDir;
      options.parameters = BackendRegistry::parametersFor(b, parameters);
      options.failFast = failFast;
      options.replayProgram = settings.replayProgram + pluginOptions(*plugins);
      options.shrinkProgram = std::string(argv[0]) + " " + ShrinkAbortedOption +
                              pluginOptions(*plugins);
      options.shrinkInPlace = shrinkInPlace;
      options.stuckAfterMs = unsigned(stuckAfterSeconds * 1000);
      std::vector<PropertyResult> rows =
          runPropertyInConfigurations(*f, options, configurations.at(b));
      ++done;
      bool stop = false;
      for (PropertyResult &r : rows) {
        char head[32];
        std::snprintf(head, sizeof head, "[%2zu/%zu] ", done, total);
        std::cout << head << f->name << " on " << b << " [" << r.configuration
                  << "]" << (partner.empty() ? "" : " against " + partner)
                  << ": " << r.statusText() << ", " << r.cases << " cases, "
                  << r.steps << " steps, " << int(r.seconds * 1000) << " ms";
        if (r.status == PropertyResult::Status::Skipped ||
            r.status == PropertyResult::Status::Incomplete)
          std::cout << " (" << r.reason << ")";
        std::cout << std::endl;
        if (r.status == PropertyResult::Status::Failed) {
          std::string alone =
              confirmAlone(program, r, seed, partner, pluginPaths);
          if (!alone.empty())
            r.reason += (r.reason.back() == '\n' ? "" : "\n") + alone;
          std::cout << r.reason << (r.reason.back() == '\n' ? "" : "\n");
          if (!r.minimalScenario.empty())
            std::cout << "  minimal scenario (" << r.minimalLength
                      << " steps after " << r.shrinksAccepted << " of "
                      << r.shrinksTried << " shrinks), seed " << seed
                      << ", configuration " << r.configuration << ":\n"
                      << r.minimalScenario << "  replay: " << r.replayCommand
                      << "\n";
          std::cout << std::flush;
        }
        stop = stop || (failFast && r.status == PropertyResult::Status::Failed);
        summary.results.push_back(std::move(r));
      }
      if (stop)
        break;
    }
    summary.secondsPerBackend[b] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      started)
            .count();
    if (failFast && !summary.passed())
      break;
  }

  // The input space a verdict covers: every key class must be reached by a
  // run of every property (a filtered run covers a part of it by design).
  bool covered = true;
  for (const std::string &b : backends) {
    Census census;
    bool ran = false;
    for (const PropertyResult &r : summary.results)
      if (r.backend == b) {
        census.merge(r.census);
        ran = ran || r.name != UnavailableRow;
      }
    // An unavailable backend ran nothing: its one row says why.
    if (!ran)
      continue;
    if (printCensus)
      std::cout << "\ncensus of " << b << ":\n" << census.toString();
    if (!filter.empty() || summary.shardCount > 1 ||
        (failFast && !summary.passed()))
      continue;
    // As for a key state: a run of fewer cases than coverage needs, asked
    // for by count, says what it missed and passes.
    bool tooFew = cases > 0 && cases < CasesForCoverage;
    for (const std::string &missing :
         census.missingKeyClasses(makeInputSpace())) {
      std::cout << "census of " << b << ": key class never reached: " << missing
                << (tooFew ? " (coverage incomplete: " + std::to_string(cases) +
                                 " cases a property, fewer than the " +
                                 std::to_string(CasesForCoverage) +
                                 " coverage needs)"
                           : std::string())
                << "\n";
      covered = covered && tooFew;
    }
  }

  std::cout << "\n" << summaryTable(summary);
  for (const auto &[b, s] : summary.secondsPerBackend)
    std::printf("wall time on %s: %.1f s\n", b.c_str(), s);
  bool passed = summary.passed() && covered;
  std::cout << (passed ? "PASSED" : "FAILED") << skippedNote(summary)
            << std::endl;
  bool written = true;
  if (!junit.empty())
    written &= writeFile(program, junit, junitReport(summary));
  if (!report.empty()) {
    written &= writeFile(program, report, markdownReport(summary));
    written &= writeFile(program, report + ".json", jsonReport(summary));
  }
  return passed && written ? 0 : 1;
}

} // namespace

int conformanceProgram(int argc, char **argv, ProgramSettings settings) {
  if (settings.name.empty())
    settings.name = "drt-conformance";
  reportCrashesOfScenarios();
  serveCrashReportsFromArena();
  retainFreedHostMemory();
  return runReportingExceptions(settings.name,
                                [&] { return run(argc, argv, settings); });
}

} // namespace drt::conformance
