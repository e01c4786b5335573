//===- drt/conformance/Programs.h - drt-conformance and drt-replay -*- C++
//-*-===//
//
// The programs' whole logic, so that a backend linked into a program of its
// own gets the same drt-conformance and drt-replay: drt::conformance_main and
// drt::replay_main hold a main() that calls these with the default settings,
// and drt_add_conformance_tests (the installed package) builds programs that
// name their own replay tool.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PROGRAMS_H
#define DRT_CONFORMANCE_PROGRAMS_H

#include <string>

namespace drt::conformance {

/// What distinguishes one build of the programs from another.
struct ProgramSettings {
  /// The program's name in messages and in its usage text.
  std::string name;
  /// The command that starts the replay tool in the replay line printed for
  /// each failure (a path for a tool that is not on PATH).
  std::string replayProgram = "drt-replay";
};

/// drt-conformance: parses \p argv (see its --help), loads the plugins of
/// --plugin and DRT_PLUGINS, runs the properties and prints the summary.
/// Returns the exit status: 0 when every property passed, 1 when one failed
/// or a report could not be written, 2 for bad usage (arguments, unknown
/// backend, a plugin that does not load or registers nothing), 3 for an
/// unexpected exception. \p settings.name defaults to "drt-conformance".
int conformanceProgram(int argc, char **argv, ProgramSettings settings = {});

/// What drt-replay returns for a scenario it skips (ctest's
/// SKIP_RETURN_CODE): one whose written expectations need a capability the
/// backend does not declare, such as a planned fault without fault
/// injection or a transfer that succeeds without resident tensors.
inline constexpr int SkippedExitCode = 77;

/// drt-replay: runs one scenario file on a backend (see its --help), after
/// loading the plugins of --plugin and DRT_PLUGINS. Returns 0 when the
/// scenario passes, 1 on a divergence, 2 on a usage, plugin, parse or setup
/// error, 3 on an unexpected exception, SkippedExitCode for a scenario the
/// backend's capabilities rule out. \p settings.name defaults to
/// "drt-replay".
int replayProgram(int argc, char **argv, ProgramSettings settings = {});

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_PROGRAMS_H
