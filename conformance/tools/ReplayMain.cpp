//===- ReplayMain.cpp - drt-replay ----------------------------------------===//
//
// The main() of drt-replay and of drt::replay_main: the program with the
// default settings, on every backend linked in or loaded as a plugin.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Programs.h"

int main(int argc, char **argv) {
  return drt::conformance::replayProgram(argc, argv);
}
