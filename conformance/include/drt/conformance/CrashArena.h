//===- drt/conformance/CrashArena.h - Crash reports without the heap -*- C++
//-*-===//
//
// A process setting for the programs that run scenarios.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_CRASHARENA_H
#define DRT_CONFORMANCE_CRASHARENA_H

namespace drt::conformance {

/// Makes the report of a crash (reportCrashesOfScenarios) independent of the
/// heap. A backend that writes outside its memory often corrupts the C
/// library's heap, which then ends the process from inside malloc or free,
/// holding the heap's lock: a report that allocated there would wait forever.
/// Once this is called, every operator new of the process, from the fatal
/// signal on, is served from a fixed arena of its own, and operator delete
/// gives nothing back, so the report (the scenario's text, the file it is
/// written to, the shrinker's command) runs to its end. Before the signal,
/// operator new and delete are malloc and free, as the C++ library's are.
/// In a build with sanitizers it does nothing: they report crashes
/// themselves.
void serveCrashReportsFromArena();

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CRASHARENA_H
