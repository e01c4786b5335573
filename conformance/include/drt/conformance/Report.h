//===- drt/conformance/Report.h - Summaries of a conformance run -*- C++
//-*-===//
#ifndef DRT_CONFORMANCE_REPORT_H
#define DRT_CONFORMANCE_REPORT_H

#include "drt/conformance/Properties.h"

#include <string>
#include <vector>

namespace drt::conformance {

/// Everything a conformance run produced, for the summary and the reports.
struct RunSummary {
  /// The base seed and the settings of the run.
  uint64_t seed = 0;
  /// Cases per property, or 0 when each property ran for timeBudget seconds.
  int cases = 0;
  double timeBudget = 0;
  int maxSteps = 0;
  int shardIndex = 0;
  int shardCount = 1;
  std::string against;
  std::vector<PropertyResult> results;
  /// Wall time per backend, in seconds.
  std::map<std::string, double> secondsPerBackend;

  /// True when no property failed.
  bool passed() const;
};

/// The summary table printed at the end: one row per property, backend and
/// configuration (cases, steps, result, skips and why, coverage), each
/// column as wide as its longest entry.
std::string summaryTable(const RunSummary &summary);
/// The conformance summary in Markdown, including residency transitions.
std::string markdownReport(const RunSummary &summary);
/// The same summary as JSON.
std::string jsonReport(const RunSummary &summary);
/// JUnit XML: one testsuite per backend, one testcase per property and
/// configuration ("NAME" for the default one, "NAME [CONFIGURATION]"
/// otherwise).
std::string junitReport(const RunSummary &summary);

/// \p s as a JSON string literal (quoted and escaped).
std::string jsonString(const std::string &s);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_REPORT_H
