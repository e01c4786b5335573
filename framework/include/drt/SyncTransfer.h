//===- drt/SyncTransfer.h - Blocking wrappers of the callbacks --*- C++ -*-===//
#ifndef DRT_SYNCTRANSFER_H
#define DRT_SYNCTRANSFER_H

#include "drt/DeviceManager.h"

#include <functional>
#include <optional>

namespace drt {

/// Starts \p start with a callback and blocks until that callback has been
/// called; returns the Error it delivered.
Error waitForCompletion(const std::function<void(CompletionCallback)> &start);

/// Blocking DeviceManager::transferToDevice.
Error transferToDeviceSync(DeviceManager &device, Tensor &tensor,
                           std::optional<DeviceLocation> location = {});
/// Blocking DeviceManager::transferFromDevice.
Error transferFromDeviceSync(DeviceManager &device, Tensor &tensor,
                             bool release = true);
/// Blocking DeviceManager::addNetwork.
Error addNetworkSync(DeviceManager &device, Function function);
/// Blocking DeviceManager::evictNetwork.
Error evictNetworkSync(DeviceManager &device, const std::string &name);
/// Blocking DeviceManager::runFunction.
Error runFunctionSync(DeviceManager &device, const std::string &name,
                      ExecutionContext &context);

} // namespace drt

#endif // DRT_SYNCTRANSFER_H
