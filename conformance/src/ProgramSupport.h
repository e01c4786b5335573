//===- ProgramSupport.h - What the programs share --------------*- C++ -*-===//
//
// Internal to the conformance library: what drt-conformance and drt-replay
// share (number parsing, the last-resort exception handling).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROGRAMSUPPORT_H
#define DRT_CONFORMANCE_PROGRAMSUPPORT_H

#include <charconv>
#include <exception>
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
