//===- ConformanceMain.cpp - drt-conformance ------------------------------===//
//
// The main() of drt-conformance and of drt::conformance_main: the program with
// the default settings, on every backend linked in or loaded as a plugin.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Programs.h"

int main(int argc, char **argv) {
  return drt::conformance::conformanceProgram(argc, argv);
}
