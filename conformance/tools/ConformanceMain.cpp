//===- ConformanceMain.cpp - drt-conformance ------------------------------===//
//
// The main() of drt-conformance and of drt::conformance_main: the program with
// the default settings, on every backend linked in or loaded as a plugin; a
// case whose step gets stuck or crashes is shrunk by drt-fuzz-to-scenario.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Programs.h"

// The build tree's shrinker, for a drt-conformance run where it was built.
#ifndef DRT_SHRINK_EXECUTABLE
#define DRT_SHRINK_EXECUTABLE ""
#endif

int main(int argc, char **argv) {
  return drt::conformance::conformanceProgram(
      argc, argv,
      {"", "drt-replay", "drt-fuzz-to-scenario", DRT_SHRINK_EXECUTABLE});
}
