//===- ProgramSupport.h - What the programs share --------------*- C++ -*-===//
//
// Internal to the conformance library: the last-resort handling that
// drt-conformance and drt-replay share.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROGRAMSUPPORT_H
#define DRT_CONFORMANCE_PROGRAMSUPPORT_H

#include <exception>
#include <iostream>
#include <string>

namespace drt::conformance {

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
