//===- ViolationReport.h - Violations without temporaries ---*- C++ -*-===//
//-*-===//
//
// reportViolation's message is a std::string the caller builds: when the
// handler throws, the unwinding stops in the caller's frame to destroy it and
// resumes, which costs as much again as the throw. The framework's own
// frequent violations (use of a moved-from tensor) compose their message
// from pieces here instead, so that nothing in the frames between the
// violation and its handler needs destroying.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_VIOLATIONREPORT_H
#define DRT_FRAMEWORK_VIOLATIONREPORT_H

#include "drt/Violation.h"

#include <initializer_list>
#include <string_view>

namespace drt {

/// Calls the installed handler with a violation of \p kind whose message is
/// \p parts joined; as reportViolation, it never returns.
[[noreturn]] void
reportViolationOf(ViolationKind kind,
                  std::initializer_list<std::string_view> parts);

} // namespace drt

#endif // DRT_FRAMEWORK_VIOLATIONREPORT_H
