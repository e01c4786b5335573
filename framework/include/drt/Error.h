//===- drt/Error.h - Recoverable failures as values -------------*- C++ -*-===//
//
// Recoverable failures (out of memory, bad arguments, driver failures, lost
// devices) travel as values: an Error with a code and a message that names the
// tensor, the device and the sizes involved. Contract violations are not
// Errors; they go to the violation handler (see drt/Violation.h).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_ERROR_H
#define DRT_ERROR_H

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace drt {

/// The kinds of recoverable failure. Success is the absence of a failure.
enum class ErrorCode {
  Success,
  OutOfMemory,
  InvalidArgument,
  NotSupported,
  DeviceError,
  DeviceLost,
};

/// Returns the code's name as it appears in messages and scenario files
/// ("OutOfMemory", ...).
std::string_view errorCodeName(ErrorCode code);

/// Parses a name produced by errorCodeName; std::nullopt for any other text.
std::optional<ErrorCode> parseErrorCode(std::string_view name);

/// A success or a failure with a code and a human-readable message.
///
/// Like llvm::Error, a failure converts to true: `if (Error e = f()) return
/// e;`. An Error returned and dropped unread is a compiler warning: a
/// failure is handled or passed on, never lost.
class [[nodiscard]] Error {
public:
  /// Constructs a success.
  Error() = default;
  /// Constructs a failure; \p code must not be Success.
  Error(ErrorCode code, std::string message)
      : code_(code), message_(std::move(message)) {
    assert(code != ErrorCode::Success && "use Error::success()");
  }

  /// Returns a success value.
  static Error success() { return Error(); }

  /// True when this is a failure.
  explicit operator bool() const { return code_ != ErrorCode::Success; }
  /// True when this is a success.
  bool isSuccess() const { return code_ == ErrorCode::Success; }
  /// The failure's code (Success for a success).
  ErrorCode code() const { return code_; }
  /// The failure's message (empty for a success).
  const std::string &message() const { return message_; }
  /// "Code: message", or "Success".
  std::string toString() const;

private:
  ErrorCode code_ = ErrorCode::Success;
  std::string message_;
};

/// Builds a failure from a code and a message.
inline Error makeError(ErrorCode code, std::string message) {
  return Error(code, std::move(message));
}

/// Either a value of type T or a failure.
template <typename T> class Expected {
public:
  /// Holds a value.
  Expected(T value) : storage_(std::move(value)) {}
  /// Holds a failure; \p error must be a failure.
  Expected(Error error) : storage_(std::move(error)) {
    assert(std::get<Error>(storage_) && "Expected built from a success");
  }

  /// True when a value is held.
  explicit operator bool() const { return hasValue(); }
  /// True when a value is held.
  bool hasValue() const { return std::holds_alternative<T>(storage_); }

  /// The held value; only valid when hasValue().
  T &get() {
    assert(hasValue());
    return std::get<T>(storage_);
  }
  /// The held value; only valid when hasValue().
  const T &get() const {
    assert(hasValue());
    return std::get<T>(storage_);
  }
  T &operator*() { return get(); }
  const T &operator*() const { return get(); }
  T *operator->() { return &get(); }
  const T *operator->() const { return &get(); }

  /// The held failure, or a success when a value is held.
  Error takeError() const {
    if (hasValue())
      return Error::success();
    return std::get<Error>(storage_);
  }

private:
  std::variant<T, Error> storage_;
};

} // namespace drt

#endif // DRT_ERROR_H
