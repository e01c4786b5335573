//===- drt/Violation.h - Contract violations and their handler --*- C++ -*-===//
//
// A contract violation is a caller's bug (reading host data of a tensor that
// lives on a device, using a moved-from tensor), not a recoverable failure.
// Violations go to a process-wide handler: by default it prints a clear message
// and aborts. Tests install a handler that throws ContractViolationError, so a
// harness can check violations without death tests (fork() after POCL starts
// hangs the child).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_VIOLATION_H
#define DRT_VIOLATION_H

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace drt {

/// The rules of the contract whose breach is a violation.
enum class ViolationKind {
  /// Host data of a tensor whose valid copy is only on a device was accessed.
  HostAccessWhileOnDevice,
  /// Host data of a tensor whose device was lost was accessed.
  HostAccessWhileLost,
  /// A moved-from (empty) tensor was used.
  UseOfMovedFrom,
  /// A view was requested outside its owner's storage.
  ViewOutOfBounds,
  /// A tensor was constructed with no elements or an impossible size.
  InvalidTensorType,
};

/// The kind's name as used in scenario files ("host-access-while-device", ...).
std::string_view violationKindName(ViolationKind kind);
/// Parses a name produced by violationKindName.
std::optional<ViolationKind> parseViolationKind(std::string_view name);

/// What the handler is told about a violation.
struct ContractViolation {
  ViolationKind kind;
  std::string message;
};

/// The exception thrown by throwingViolationHandler.
class ContractViolationError : public std::logic_error {
public:
  explicit ContractViolationError(const ContractViolation &violation)
      : std::logic_error(violation.message), kind_(violation.kind) {}
  /// Which rule was broken.
  ViolationKind kind() const { return kind_; }

private:
  ViolationKind kind_;
};

/// A violation handler. It must not return: it aborts or throws. If it does
/// return, reportViolation aborts.
using ViolationHandler = void (*)(const ContractViolation &);

/// Installs \p handler process-wide (nullptr restores the default) and returns
/// the previous one.
ViolationHandler setViolationHandler(ViolationHandler handler);

/// The default handler: prints "drt: contract violation: ..." and aborts.
[[noreturn]] void abortingViolationHandler(const ContractViolation &violation);

/// A handler that throws ContractViolationError.
[[noreturn]] void throwingViolationHandler(const ContractViolation &violation);

/// Calls the installed handler. Never returns.
[[noreturn]] void reportViolation(ViolationKind kind, std::string message);

/// Installs throwingViolationHandler for the lifetime of the object.
class ScopedThrowingViolationHandler {
public:
  ScopedThrowingViolationHandler()
      : previous_(setViolationHandler(throwingViolationHandler)) {}
  ~ScopedThrowingViolationHandler() { setViolationHandler(previous_); }
  ScopedThrowingViolationHandler(const ScopedThrowingViolationHandler &) =
      delete;
  ScopedThrowingViolationHandler &
  operator=(const ScopedThrowingViolationHandler &) = delete;

private:
  ViolationHandler previous_;
};

} // namespace drt

#endif // DRT_VIOLATION_H
