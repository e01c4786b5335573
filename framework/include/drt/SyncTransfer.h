//===- drt/SyncTransfer.h - Blocking wrappers of the callbacks --*- C++ -*-===//
#ifndef DRT_SYNCTRANSFER_H
#define DRT_SYNCTRANSFER_H

#include "drt/DeviceManager.h"
#include "drt/FunctionRef.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace drt {

/// Starts \p start with a callback and blocks until that callback has been
/// called; returns the Error it delivered. \p start is called before this
/// returns and not kept; what the helper waits on is reused by the thread's
/// next helper once the callback is gone, so that a blocking call allocates
/// nothing of its own.
Error waitForCompletion(FunctionRef<void(CompletionCallback)> start);

/// As waitForCompletion, for work that involves only \p devices (null
/// entries are ignored). When none of them declares asynchronous completion
/// and the framework hands no part of the work to a device that does (as it
/// does when it moves a record resident there), and none is being shut
/// down (a shutdown calls back the work it abandons on its own thread),
/// work that has not called back by the time \p start returns never will:
/// DeviceError naming the first device and \p what is returned instead of
/// blocking for ever.
Error waitForCompletionOn(std::initializer_list<const DeviceManager *> devices,
                          std::string_view what,
                          FunctionRef<void(CompletionCallback)> start);

/// True on a thread that is starting work inside waitForCompletion or
/// waitForCompletionOn (every blocking helper below), which then waits for
/// it. A backend may complete such work on the calling thread before
/// returning, calling its callback there, instead of handing the completion
/// to a thread of its own: the caller blocks either way, and the hop between
/// threads is most of the fixed cost of a small synchronous transfer.
bool callerWaitsForCompletion();

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
