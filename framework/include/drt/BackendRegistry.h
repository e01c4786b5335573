//===- drt/BackendRegistry.h - Backends by name -----------------*- C++ -*-===//
//
// Backends register a name, a factory and their capabilities, so programs (the
// conformance suite above all) create DeviceManagers by name and never depend
// on a concrete backend. DRT_REGISTER_BACKEND registers from a static
// initializer; link backend libraries whole (their CMake targets do) so the
// initializer is kept.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_BACKENDREGISTRY_H
#define DRT_BACKENDREGISTRY_H

#include "drt/DeviceConfig.h"
#include "drt/DeviceManager.h"
#include "drt/Error.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace drt {

/// Creates an uninitialised DeviceManager from a config.
using BackendFactory =
    std::function<std::unique_ptr<DeviceManager>(const DeviceConfig &)>;

/// One registered backend.
struct BackendInfo {
  /// The backend's name ("fake", "opencl", "mutant:double-free").
  std::string name;
  /// One line for listings.
  std::string description;
  /// What its managers declare (the same for every instance).
  Capabilities capabilities;
  BackendFactory factory;
  /// Test-only backends (mutants) are hidden from "all".
  bool testOnly = false;
};

/// The process-wide table of backends.
class BackendRegistry {
public:
  /// The registry.
  static BackendRegistry &instance();

  /// Adds \p info; false (and nothing changes) when the name is taken.
  bool add(BackendInfo info);
  /// The backend named \p name, or nullptr.
  const BackendInfo *find(const std::string &name) const;
  /// Every backend, sorted by name.
  std::vector<BackendInfo> list() const;
  /// Names of every backend that is not test-only, sorted.
  std::vector<std::string> productionNames() const;

  /// Creates and initialises a manager of backend \p name. An unknown name is
  /// InvalidArgument listing the registered backends; a failing init is
  /// returned as is.
  Expected<std::unique_ptr<DeviceManager>> create(const std::string &name,
                                                  const DeviceConfig &config);

private:
  mutable std::mutex mutex_;
  std::vector<BackendInfo> backends_;
};

/// Registers a backend at static-initialisation time.
struct BackendRegistration {
  explicit BackendRegistration(BackendInfo info);
};

} // namespace drt

#define DRT_CONCAT_IMPL(a, b) a##b
#define DRT_CONCAT(a, b) DRT_CONCAT_IMPL(a, b)

/// Registers a backend from a BackendInfo expression, e.g.
/// DRT_REGISTER_BACKEND(drt::BackendInfo{"fake", "...", caps, factory});
#define DRT_REGISTER_BACKEND(...)                                              \
  static ::drt::BackendRegistration DRT_CONCAT(drtBackendRegistration_,        \
                                               __LINE__)(__VA_ARGS__)

#endif // DRT_BACKENDREGISTRY_H
