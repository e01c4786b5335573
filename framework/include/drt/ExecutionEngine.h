//===- drt/ExecutionEngine.h - Compile and run on one backend ---*- C++ -*-===//
#ifndef DRT_EXECUTIONENGINE_H
#define DRT_EXECUTIONENGINE_H

#include "drt/HostManager.h"

#include <string>

namespace drt {

/// The simple way to run a function: one device of a named backend, outputs
/// brought back to host after each run unless told to keep them on device.
class ExecutionEngine {
public:
  /// Creates a device of backend \p backendName; see create() for errors.
  static Expected<std::unique_ptr<ExecutionEngine>>
  create(const std::string &backendName, DeviceConfig config = {});

  /// Adds \p function to the device.
  Error compile(Function function);
  /// Runs network \p name; then, unless keepOutputsOnDevice(), brings its
  /// outputs to host.
  Error run(ExecutionContext &context, const std::string &name);
  /// With \p keep set, run() leaves outputs resident on the device.
  void setKeepOutputsOnDevice(bool keep) { keepOutputsOnDevice_ = keep; }
  /// Whether run() leaves outputs on the device.
  bool keepOutputsOnDevice() const { return keepOutputsOnDevice_; }
  /// The host manager (one device).
  HostManager &hostManager() { return hostManager_; }

private:
  HostManager hostManager_;
  bool keepOutputsOnDevice_ = false;
};

} // namespace drt

#endif // DRT_EXECUTIONENGINE_H
