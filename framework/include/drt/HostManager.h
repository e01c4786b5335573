//===- drt/HostManager.h - Several devices, networks and runs ---*- C++ -*-===//
#ifndef DRT_HOSTMANAGER_H
#define DRT_HOSTMANAGER_H

#include "drt/DeviceManager.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace drt {

/// Owns several devices, places networks on them and runs them.
class HostManager {
public:
  HostManager() = default;
  /// Shuts every device down.
  ~HostManager();

  /// Takes over an initialised device; returns its index.
  size_t addDevice(std::unique_ptr<DeviceManager> device);
  /// Number of devices.
  size_t numDevices() const { return devices_.size(); }
  /// The device at \p index.
  DeviceManager &device(size_t index) { return *devices_.at(index); }

  /// Adds \p function to device \p deviceIndex, or, when negative, to the
  /// device with the most available memory. InvalidArgument for a bad index
  /// or a name already added.
  Error addNetwork(Function function, int deviceIndex = -1);
  /// Removes network \p name from its device.
  Error evictNetwork(const std::string &name);
  /// The device that runs network \p name, or nullptr.
  DeviceManager *deviceOf(const std::string &name) const;
  /// Runs network \p name and waits. Outputs stay where the device leaves
  /// them (resident, unless its config copies them to host).
  Error runNetwork(const std::string &name, ExecutionContext &context);
  /// Brings every output of \p context's last network to host (releasing
  /// the device copies). Inputs are left where they are.
  Error ensureOutputsAvailable(ExecutionContext &context);

private:
  std::vector<std::unique_ptr<DeviceManager>> devices_;
  std::map<std::string, size_t> placement_;
};

} // namespace drt

#endif // DRT_HOSTMANAGER_H
