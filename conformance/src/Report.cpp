//===- Report.cpp - Summaries of a conformance run ------------------------===//
#include "drt/conformance/Report.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace drt::conformance {

bool RunSummary::passed() const {
  for (const PropertyResult &r : results)
    if (r.status == PropertyResult::Status::Failed)
      return false;
  return true;
}

namespace {

std::string pad(std::string s, size_t width) {
  s.append(s.size() < width ? width - s.size() : 1, ' ');
  return s;
}

std::string coverageLine(const PropertyResult &r) {
  return std::to_string(r.labels.size()) + " labels, " +
         std::to_string(r.transitions.size()) + " transitions";
}

std::string xmlEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::map<std::string, int> allTransitions(const RunSummary &summary,
                                          const std::string &backend) {
  std::map<std::string, int> out;
  for (const PropertyResult &r : summary.results)
    if (r.backend == backend)
      for (const auto &[t, n] : r.transitions)
        out[t] += n;
  return out;
}

std::set<std::string> backendsOf(const RunSummary &summary) {
  std::set<std::string> out;
  for (const PropertyResult &r : summary.results)
    out.insert(r.backend);
  return out;
}

} // namespace

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string summaryTable(const RunSummary &summary) {
  // Each column is as wide as its longest entry (names of mutants and
  // configurations are long) plus two spaces.
  std::vector<std::vector<std::string>> cells = {
      {"property", "backend", "configuration", "cases", "steps", "result"}};
  for (const PropertyResult &r : summary.results)
    cells.push_back({r.name, r.backend, r.configuration,
                     std::to_string(r.cases), std::to_string(r.steps),
                     r.statusText()});
  std::vector<size_t> widths(cells.front().size(), 0);
  for (const auto &row : cells)
    for (size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size() + 2);
  size_t ruler = 0;
  for (size_t w : widths)
    ruler += w;
  std::string s;
  for (size_t i = 0; i < cells.front().size(); ++i)
    s += pad(cells.front()[i], widths[i]);
  s += "coverage / reason\n" + std::string(ruler + 40, '-') + "\n";
  for (size_t k = 0; k < summary.results.size(); ++k) {
    const PropertyResult &r = summary.results[k];
    for (size_t i = 0; i < cells[k + 1].size(); ++i)
      s += pad(cells[k + 1][i], widths[i]);
    if (r.status == PropertyResult::Status::Passed)
      s += coverageLine(r) + (r.reason.empty() ? "" : "; " + r.reason);
    else if (r.status == PropertyResult::Status::Incomplete)
      s += coverageLine(r) + "; " + r.reason;
    else if (r.status == PropertyResult::Status::Skipped)
      s += "skipped: " + r.reason;
    else if (!r.replayCommand.empty())
      s += "minimal scenario of " + std::to_string(r.minimalLength) +
           " steps: " + r.replayCommand;
    else
      s += r.reason;
    s += "\n";
  }
  return s;
}

std::string markdownReport(const RunSummary &summary) {
  std::string s = "# Conformance summary\n\n";
  char budget[32];
  std::snprintf(budget, sizeof budget, "%g", summary.timeBudget);
  s += "Seed " + std::to_string(summary.seed) + ", " +
       (summary.cases ? std::to_string(summary.cases) + " cases per property"
                      : std::string(budget) + " s per property") +
       ", at most " + std::to_string(summary.maxSteps) +
       " steps per case, shard " + std::to_string(summary.shardIndex + 1) +
       " of " + std::to_string(summary.shardCount) +
       (summary.against.empty() ? ""
                                : ", differential against " + summary.against) +
       ". Result: " + (summary.passed() ? "**passed**" : "**FAILED**") +
       ".\n\n";
  s += "| property | backend | configuration | cases | steps | result | "
       "seconds | skips, failures and coverage |\n"
       "|---|---|---|---|---|---|---|---|\n";
  for (const PropertyResult &r : summary.results) {
    std::string note = coverageLine(r);
    if (r.status == PropertyResult::Status::Incomplete)
      note += "; " + r.reason;
    else if (r.status != PropertyResult::Status::Passed)
      note = r.reason;
    for (char &c : note)
      if (c == '\n' || c == '|')
        c = ' ';
    s += "| " + r.name + " | " + r.backend + " | " + r.configuration + " | " +
         std::to_string(r.cases) + " | " + std::to_string(r.steps) + " | " +
         r.statusText() + " | " + seconds(r.seconds) + " | " + note + " |\n";
  }
  for (const std::string &backend : backendsOf(summary)) {
    s += "\n## Residency transitions on " + backend + "\n\n";
    s += "| from -operation-> to | count |\n|---|---|\n";
    for (const auto &[t, n] : allTransitions(summary, backend))
      s += "| " + t + " | " + std::to_string(n) + " |\n";
  }
  for (const PropertyResult &r : summary.results) {
    if (r.status != PropertyResult::Status::Failed)
      continue;
    s += "\n## Failure: " + r.name + " on " + r.backend + " (" +
         r.configuration + ")\n\n```\n" + r.reason + "```\n";
    if (!r.minimalScenario.empty())
      s += "\nMinimal scenario (" + std::to_string(r.minimalLength) +
           " steps), replay with `" + r.replayCommand + "`:\n\n```\n" +
           r.minimalScenario + "```\n";
  }
  s += "\n## Coverage labels\n\n";
  for (const PropertyResult &r : summary.results) {
    if (r.labels.empty())
      continue;
    s += "- **" + r.name + "** (" + r.backend + ", " + r.configuration + "): ";
    bool first = true;
    for (const auto &[label, n] : r.labels) {
      s += (first ? "" : ", ") + label + " " + std::to_string(n);
      first = false;
    }
    s += "\n";
  }
  return s;
}

std::string jsonReport(const RunSummary &summary) {
  std::string s = "{\n  \"seed\": " + std::to_string(summary.seed) +
                  ",\n  \"cases\": " + std::to_string(summary.cases) +
                  ",\n  \"timeBudget\": " + std::to_string(summary.timeBudget) +
                  ",\n  \"maxSteps\": " + std::to_string(summary.maxSteps) +
                  ",\n  \"shard\": " + std::to_string(summary.shardIndex) +
                  ",\n  \"shards\": " + std::to_string(summary.shardCount) +
                  ",\n  \"against\": " + jsonString(summary.against) +
                  ",\n  \"passed\": " + (summary.passed() ? "true" : "false") +
                  ",\n  \"secondsPerBackend\": {";
  bool first = true;
  for (const auto &[b, t] : summary.secondsPerBackend) {
    s +=
        std::string(first ? "" : ",") + " " + jsonString(b) + ": " + seconds(t);
    first = false;
  }
  s += " },\n  \"properties\": [\n";
  for (size_t i = 0; i < summary.results.size(); ++i) {
    const PropertyResult &r = summary.results[i];
    s += "    {\"name\": " + jsonString(r.name) +
         ", \"backend\": " + jsonString(r.backend) +
         ", \"configuration\": " + jsonString(r.configuration) +
         ", \"parameters\": {";
    bool firstParameter = true;
    for (const auto &[key, value] : r.parameters) {
      s += std::string(firstParameter ? "" : ", ") + jsonString(key) + ": " +
           jsonString(value);
      firstParameter = false;
    }
    s += "}, \"result\": " + jsonString(r.statusText()) +
         ", \"cases\": " + std::to_string(r.cases) +
         ", \"steps\": " + std::to_string(r.steps) +
         ", \"seconds\": " + seconds(r.seconds) +
         ", \"seed\": " + std::to_string(r.seed) +
         ", \"reason\": " + jsonString(r.reason) +
         ", \"minimalScenario\": " + jsonString(r.minimalScenario) +
         ", \"minimalLength\": " + std::to_string(r.minimalLength) +
         ", \"replay\": " + jsonString(r.replayCommand) + ", \"coverage\": {";
    bool firstLabel = true;
    for (const auto &[label, n] : r.labels) {
      s += std::string(firstLabel ? "" : ", ") + jsonString(label) + ": " +
           std::to_string(n);
      firstLabel = false;
    }
    s += "}, \"transitions\": {";
    firstLabel = true;
    for (const auto &[t, n] : r.transitions) {
      s += std::string(firstLabel ? "" : ", ") + jsonString(t) + ": " +
           std::to_string(n);
      firstLabel = false;
    }
    s += "}, \"census\": " + r.census.toJson() + "}" +
         std::string(i + 1 < summary.results.size() ? "," : "") + "\n";
  }
  s += "  ]\n}\n";
  return s;
}

std::string junitReport(const RunSummary &summary) {
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n";
  for (const std::string &backend : backendsOf(summary)) {
    int tests = 0, failures = 0, skipped = 0;
    double time = 0;
    for (const PropertyResult &r : summary.results)
      if (r.backend == backend) {
        ++tests;
        failures += r.status == PropertyResult::Status::Failed;
        skipped += r.status == PropertyResult::Status::Skipped;
        time += r.seconds;
      }
    s += "  <testsuite name=\"conformance." + xmlEscape(backend) +
         "\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
         std::to_string(failures) + "\" skipped=\"" + std::to_string(skipped) +
         "\" time=\"" + seconds(time) + "\">\n";
    for (const PropertyResult &r : summary.results) {
      if (r.backend != backend)
        continue;
      std::string name = r.configuration == "default"
                             ? r.name
                             : r.name + " [" + r.configuration + "]";
      s += "    <testcase classname=\"conformance." + xmlEscape(backend) +
           "\" name=\"" + xmlEscape(name) + "\" time=\"" + seconds(r.seconds) +
           "\">";
      if (r.status == PropertyResult::Status::Incomplete)
        s += "<system-out>" + xmlEscape(r.statusText() + ": " + r.reason) +
             "</system-out>";
      if (r.status == PropertyResult::Status::Skipped)
        s += "<skipped message=\"" + xmlEscape(r.reason) + "\"/>";
      if (r.status == PropertyResult::Status::Failed)
        s += "<failure message=\"" +
             xmlEscape(r.replayCommand.empty() ? r.reason : r.replayCommand) +
             "\">" + xmlEscape(r.reason + "\n" + r.minimalScenario) +
             "</failure>";
      s += "</testcase>\n";
    }
    s += "  </testsuite>\n";
  }
  return s + "</testsuites>\n";
}

} // namespace drt::conformance
