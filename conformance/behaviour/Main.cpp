//===- Main.cpp - The Behaviour tests' program ----------------------------===//
#include "drt/conformance/Behaviour.h"

int main(int argc, char **argv) {
  return drt::conformance::behaviourTestsMain(argc, argv);
}
