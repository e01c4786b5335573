//===- drt/conformance/ScenarioText.h - Scenario text form ------*- C++ -*-===//
//
// The text form: one command a line, '#' starts a comment line. The grammar
// is in docs/conformance.md. print(parse(x)) == x for every printed scenario.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_SCENARIOTEXT_H
#define DRT_CONFORMANCE_SCENARIOTEXT_H

#include "drt/conformance/Scenario.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace drt::conformance {

/// Where and why a scenario text could not be parsed.
struct ParseError {
  int line = 0;
  int column = 0;
  /// "expected a device name, found '7'".
  std::string message;
  /// "LINE:COLUMN: MESSAGE".
  std::string toString() const;
};

/// A parsed scenario or the first parse error.
using ParseResult = std::variant<Scenario, ParseError>;

/// Parses the text form. Names are also checked with validateScenario; a
/// naming problem is reported at the line of the offending command.
ParseResult parseScenario(std::string_view text);

/// A fill pattern in the text form: a value class by name, with its variant
/// when not 0 ("specials", "rounding:1", "random:7"); any other pattern as a
/// number ("3").
std::string printPattern(uint64_t pattern);
/// Parses what printPattern prints; nullopt for anything else, including a
/// number that selects a value class (those are written by name, so that
/// every pattern has one spelling).
std::optional<uint64_t> parsePattern(std::string_view text);

/// Prints one command in the text form (no newline).
std::string printCommand(const Command &command);
/// Prints one device declaration (no newline).
std::string printDevice(const DeviceSpec &device);
/// Prints the whole scenario, one line per device and command.
std::string printScenario(const Scenario &scenario);
/// "# LINE" for every line of \p text: a report in a scenario file's
/// header, which the parser skips.
std::string commentLines(const std::string &text);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_SCENARIOTEXT_H
