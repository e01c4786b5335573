//===- Violation.cpp - The violation handler ------------------------------===//
#include "drt/Violation.h"

#include "ViolationReport.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace drt {

namespace {
std::atomic<ViolationHandler> currentHandler{nullptr};

/// The violation being reported on this thread. It lives outside the
/// reporting functions' frames, so that a throwing handler unwinds through
/// no cleanup there (each one stops the unwinding and resumes it, at about
/// the cost of the throw itself); a handler is handed this object and must
/// not return, so one per thread is enough.
thread_local ContractViolation reported{ViolationKind::UseOfMovedFrom, {}};

/// Hands reported to the installed handler, or aborts. Inlined into its
/// callers: a frame less to unwind through.
[[noreturn, gnu::always_inline]] inline void handleReported() {
  ViolationHandler handler = currentHandler.load();
  if (handler)
    handler(reported);
  // A handler that returns cannot be honoured: the caller cannot go on.
  abortingViolationHandler(reported);
}
} // namespace

std::string_view violationKindName(ViolationKind kind) {
  switch (kind) {
  case ViolationKind::HostAccessWhileOnDevice:
    return "host-access-while-device";
  case ViolationKind::HostAccessWhileLost:
    return "host-access-while-lost";
  case ViolationKind::UseOfMovedFrom:
    return "use-of-moved-from";
  case ViolationKind::ViewOutOfBounds:
    return "view-out-of-bounds";
  case ViolationKind::InvalidTensorType:
    return "invalid-tensor-type";
  }
  return "?";
}

std::optional<ViolationKind> parseViolationKind(std::string_view name) {
  static constexpr std::array<ViolationKind, 5> all = {
      ViolationKind::HostAccessWhileOnDevice,
      ViolationKind::HostAccessWhileLost, ViolationKind::UseOfMovedFrom,
      ViolationKind::ViewOutOfBounds, ViolationKind::InvalidTensorType};
  for (ViolationKind k : all)
    if (violationKindName(k) == name)
      return k;
  return std::nullopt;
}

ViolationHandler setViolationHandler(ViolationHandler handler) {
  return currentHandler.exchange(handler);
}

void abortingViolationHandler(const ContractViolation &violation) {
  std::fprintf(stderr, "drt: contract violation (%s): %s\n",
               std::string(violationKindName(violation.kind)).c_str(),
               violation.message.c_str());
  std::fflush(stderr);
  std::abort();
}

void throwingViolationHandler(const ContractViolation &violation) {
  throw ContractViolationError(violation);
}

void reportViolation(ViolationKind kind, std::string message) {
  reported.kind = kind;
  reported.message = std::move(message);
  handleReported();
}

void reportViolationOf(ViolationKind kind,
                       std::initializer_list<std::string_view> parts) {
  reported.kind = kind;
  reported.message.clear();
  for (std::string_view part : parts)
    reported.message += part;
  handleReported();
}

} // namespace drt
