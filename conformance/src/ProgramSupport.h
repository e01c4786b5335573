//===- ProgramSupport.h - What the programs share --------------*- C++ -*-===//
//
// Internal to the conformance library: what drt-conformance and drt-replay
// share (number parsing, reading a scenario file, the last-resort exception
// handling).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROGRAMSUPPORT_H
#define DRT_CONFORMANCE_PROGRAMSUPPORT_H

#include <charconv>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

namespace drt::conformance {

/// A decimal number, all of \p text; false when it is not one or does not
/// fit a long (a leading "+", space or base prefix is refused).
inline bool parseInt(const char *text, long &out) {
  std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

/// The most bytes a scenario file may hold: far more than any scenario the
/// suite writes, and a bound on what a wrong path (a device, a huge log)
/// makes the program read.
inline constexpr size_t MaxScenarioFileBytes = 64u << 20;

/// Reads scenario file \p path into \p text; "" on success, else why not
/// (it does not exist, is a directory, cannot be read, or holds more than
/// MaxScenarioFileBytes).
inline std::string readScenarioFile(const std::string &path,
                                    std::string &text) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    return "it is a directory, not a scenario file";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::filesystem::exists(path, error) ? "it cannot be opened"
                                                : "no such file";
  text.clear();
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, size_t(in.gcount()));
    if (text.size() > MaxScenarioFileBytes)
      return "it holds more than " + std::to_string(MaxScenarioFileBytes) +
             " bytes, more than a scenario file may";
  }
  if (in.bad())
    return "reading it failed";
  return "";
}

/// Runs \p body and returns its exit code; an exception that escapes it is
/// reported on stderr under \p program's name and gives exit code 3. Every
/// expected failure is a value; anything thrown is a defect in the suite or
/// in the backend, and is reported instead of aborting.
template <typename Body>
int runReportingExceptions(const std::string &program, Body &&body) {
  try {
    return body();
  } catch (const std::exception &e) {
    std::cerr << program << ": stopped by an unexpected exception: " << e.what()
              << "\n";
  } catch (...) {
    std::cerr << program << ": stopped by an unexpected exception\n";
  }
  return 3;
}

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_PROGRAMSUPPORT_H
