//===- ConformanceMain.cpp - drt-conformance ------------------------------===//
//
// Runs the property families against registered backends and prints a
// progress line per property and a summary table; exits 0 only when every
// property passes. See docs/conformance.md.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/Report.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

using namespace drt;
using namespace drt::conformance;

namespace {

const char *Usage =
    "usage: drt-conformance [--backend NAME|all] [--against NAME] [--seed N]\n"
    "                       [--cases N | --time-budget SECONDS]\n"
    "                       [--max-steps N] [--filter PATTERN]\n"
    "                       [--list] [--junit FILE] [--report FILE]\n"
    "                       [--failures-dir DIR] [--fail-fast] [--census]\n"
    "Runs the residency conformance properties. Each property runs cases\n"
    "for --time-budget seconds (default 0.5; at least 10 cases), or exactly\n"
    "--cases N cases. --report FILE writes a\n"
    "Markdown summary to FILE and JSON to FILE.json. GTEST_TOTAL_SHARDS and\n"
    "GTEST_SHARD_INDEX split the cases of every property across shards.\n"
    "--fail-fast stops after the first failing property. --census prints\n"
    "what the run's scenarios drew on (size classes, kinds, values, command\n"
    "pairs, states, faults, allocations). A run of every property fails when\n"
    "a size class, element kind or value class is never reached.\n";

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

bool parseInt(const char *text, long &out) {
  char *end = nullptr;
  out = std::strtol(text, &end, 10);
  return end && *end == '\0' && end != text;
}

void list() {
  std::cout << "Properties:\n";
  for (const PropertyFamily &f : propertyFamilies())
    std::cout << "  " << f.name << "\n      " << f.description << "\n";
  std::cout << "Backends:\n";
  for (const BackendInfo &b : BackendRegistry::instance().list())
    std::cout << "  " << b.name << (b.testOnly ? " (test only)" : "")
              << "\n      " << b.description
              << "\n      capabilities: " << b.capabilities.toString() << "\n";
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::cerr << "drt-conformance: cannot write " << path << "\n";
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::string backend = "all", against, filter, junit, report, failuresDir;
  long seed = 1, cases = 0, maxSteps = 40;
  double timeBudget = 0.5;
  bool failFast = false, printCensus = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::cerr << "drt-conformance: " << arg << " needs a value\n" << Usage;
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](long &out) {
      const char *v = value();
      if (!parseInt(v, out) || out < 0) {
        std::cerr << "drt-conformance: " << arg
                  << " expects a non-negative number, got '" << v << "'\n";
        std::exit(2);
      }
    };
    if (arg == "--backend")
      backend = value();
    else if (arg == "--against")
      against = value();
    else if (arg == "--seed")
      number(seed);
    else if (arg == "--cases")
      number(cases);
    else if (arg == "--time-budget") {
      const char *v = value();
      char *end = nullptr;
      timeBudget = std::strtod(v, &end);
      if (!end || *end || end == v || !(timeBudget > 0) || timeBudget > 3600) {
        std::cerr << "drt-conformance: --time-budget expects seconds in "
                     "(0, 3600], got '"
                  << v << "'\n";
        return 2;
      }
    }
    else if (arg == "--max-steps")
      number(maxSteps);
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
    else if (arg == "--list") {
      list();
      return 0;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << Usage;
      return 0;
    } else {
      std::cerr << "drt-conformance: unknown argument '" << arg << "'\n"
                << Usage;
      return 2;
    }
  }

  std::vector<std::string> backends;
  if (backend == "all")
    backends = BackendRegistry::instance().productionNames();
  else
    backends = {backend};
  for (const std::string &b : backends)
    if (!BackendRegistry::instance().find(b)) {
      std::cerr << "drt-conformance: unknown backend '" << b
                << "'; --list shows the registered backends\n";
      return 2;
    }
  if (!against.empty() && !BackendRegistry::instance().find(against)) {
    std::cerr << "drt-conformance: unknown backend '" << against << "'\n";
    return 2;
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
    if (!parseInt(total, n) || n < 1 || !idx || !parseInt(idx, index) ||
        index < 0 || index >= n) {
      std::cerr << "drt-conformance: GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX "
                   "must be a count and an index below it\n";
      return 2;
    }
    summary.shardCount = int(n);
    summary.shardIndex = int(index);
    if (const char *status = std::getenv("GTEST_SHARD_STATUS_FILE"))
      writeFile(status, "");
  }

  std::vector<const PropertyFamily *> families;
  for (const PropertyFamily &f : propertyFamilies())
    if (matches(filter, f.name))
      families.push_back(&f);
  if (families.empty()) {
    std::cerr << "drt-conformance: no property matches '" << filter << "'\n";
    return 2;
  }

  size_t total = families.size() * backends.size(), done = 0;
  for (const std::string &b : backends) {
    std::string partner = against == b ? "" : against;
    auto started = std::chrono::steady_clock::now();
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
      PropertyResult r = runProperty(*f, options);
      ++done;
      char head[32];
      std::snprintf(head, sizeof head, "[%2zu/%zu] ", done, total);
      std::cout << head << f->name << " on " << b
                << (partner.empty() ? "" : " against " + partner) << ": "
                << r.statusText() << ", " << r.cases << " cases, " << r.steps
                << " steps, " << int(r.seconds * 1000) << " ms";
      if (r.status == PropertyResult::Status::Skipped)
        std::cout << " (" << r.reason << ")";
      std::cout << std::endl;
      if (r.status == PropertyResult::Status::Failed) {
        std::cout << r.reason << (r.reason.back() == '\n' ? "" : "\n");
        if (!r.minimalScenario.empty())
          std::cout << "  minimal scenario (" << r.minimalLength
                    << " steps after " << r.shrinksAccepted << " of "
                    << r.shrinksTried << " shrinks), seed " << seed << ":\n"
                    << r.minimalScenario << "  replay: " << r.replayCommand
                    << "\n";
        std::cout << std::flush;
      }
      bool stop = failFast && r.status == PropertyResult::Status::Failed;
      summary.results.push_back(std::move(r));
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
    for (const PropertyResult &r : summary.results)
      if (r.backend == b)
        census.merge(r.census);
    if (printCensus)
      std::cout << "\ncensus of " << b << ":\n" << census.toString();
    if (!filter.empty() || summary.shardCount > 1 ||
        (failFast && !summary.passed()))
      continue;
    for (const std::string &missing :
         census.missingKeyClasses(makeInputSpace())) {
      std::cout << "census of " << b << ": key class never reached: "
                << missing << "\n";
      covered = false;
    }
  }

  std::cout << "\n" << summaryTable(summary);
  for (const auto &[b, s] : summary.secondsPerBackend)
    std::printf("wall time on %s: %.1f s\n", b.c_str(), s);
  bool passed = summary.passed() && covered;
  std::cout << (passed ? "PASSED" : "FAILED") << std::endl;
  bool written = true;
  if (!junit.empty())
    written &= writeFile(junit, junitReport(summary));
  if (!report.empty()) {
    written &= writeFile(report, markdownReport(summary));
    written &= writeFile(report + ".json", jsonReport(summary));
  }
  return passed && written ? 0 : 1;
}
