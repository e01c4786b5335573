//===- ViolationReport.h - Violations without temporaries -------*- C++ -*-===//
//
// reportViolation's message is a std::string the caller builds: when the
// handler throws, the unwinding stops in the caller's frame to destroy it and
// resumes, which costs as much again as the throw. The framework's own
// frequent violations (use of a moved-from tensor, host access while the data
// is on a device) compose their message from pieces here instead, so that
// nothing in the frames between the violation and its handler needs
// destroying, and throw from the reporting frame itself when the throwing
// handler is installed: each frame less to unwind through saves about a
// tenth of the cost of a throw.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_VIOLATIONREPORT_H
#define DRT_FRAMEWORK_VIOLATIONREPORT_H

#include "drt/Violation.h"

#include <initializer_list>
#include <string_view>

namespace drt {
namespace violation_detail {
/// The violation being reported on this thread. It lives outside the
/// reporting functions' frames, so that a throwing handler unwinds through
/// no cleanup there; a handler must not return, so one per thread is enough.
ContractViolation &reported();
/// The installed handler (null: the default one).
ViolationHandler installed();
/// Calls \p handler (the default one when null) with reported(), and aborts
/// if it returns.
[[noreturn]] void handle(ViolationHandler handler);
/// Hands reported() to the installed handler. Inlined into its callers: the
/// throwing handler's throw is made in their frame.
[[noreturn, gnu::always_inline]] inline void deliver() {
  ViolationHandler handler = installed();
  if (handler == throwingViolationHandler)
    throw ContractViolationError(reported());
  handle(handler);
}
} // namespace violation_detail

/// Calls the installed handler with a violation of \p kind whose message is
/// \p parts joined; as reportViolation, it never returns. Inlined into its
/// callers, which then throw from their own frame.
[[noreturn, gnu::always_inline]] inline void
reportViolationOf(ViolationKind kind,
                  std::initializer_list<std::string_view> parts) {
  ContractViolation &v = violation_detail::reported();
  v.kind = kind;
  v.message.clear();
  for (std::string_view part : parts)
    v.message += part;
  violation_detail::deliver();
}

} // namespace drt

#endif // DRT_FRAMEWORK_VIOLATIONREPORT_H
