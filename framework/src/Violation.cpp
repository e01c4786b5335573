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

thread_local ContractViolation reportedViolation{ViolationKind::UseOfMovedFrom,
                                                 {}};
} // namespace

ContractViolation &violation_detail::reported() { return reportedViolation; }

ViolationHandler violation_detail::installed() { return currentHandler.load(); }

void violation_detail::handle(ViolationHandler handler) {
  if (handler)
    handler(reportedViolation);
  // A handler that returns cannot be honoured: the caller cannot go on.
  abortingViolationHandler(reportedViolation);
}

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
  ContractViolation &v = violation_detail::reported();
  v.kind = kind;
  v.message = std::move(message);
  violation_detail::deliver();
}

} // namespace drt
