//===- AbortsAtExit.cpp - A backend's static state that aborts at exit ----===//
//
// Linked into a test plugin beside the example backend: its destructor runs
// as the process ends, outside any scenario, and aborts, as a backend whose
// static driver state is released once too often would.
//
//===----------------------------------------------------------------------===//
#include <cstdlib>

namespace {
struct AbortsAtExit {
  ~AbortsAtExit() { std::abort(); }
} abortsAtExit;
} // namespace
