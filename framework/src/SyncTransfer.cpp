//===- SyncTransfer.cpp - Blocking wrappers of the callbacks
//---------------===//
#include "drt/SyncTransfer.h"

#include <future>

namespace drt {

Error waitForCompletion(const std::function<void(CompletionCallback)> &start) {
  auto promise = std::make_shared<std::promise<Error>>();
  std::future<Error> result = promise->get_future();
  start([promise](Error e) { promise->set_value(std::move(e)); });
  return result.get();
}

Error transferToDeviceSync(DeviceManager &device, Tensor &tensor,
                           std::optional<DeviceLocation> location) {
  return waitForCompletion([&](CompletionCallback done) {
    device.transferToDevice(tensor, location, std::move(done));
  });
}

Error transferFromDeviceSync(DeviceManager &device, Tensor &tensor,
                             bool release) {
  return waitForCompletion([&](CompletionCallback done) {
    device.transferFromDevice(tensor, release, std::move(done));
  });
}

Error addNetworkSync(DeviceManager &device, Function function) {
  return waitForCompletion([&](CompletionCallback done) {
    device.addNetwork(std::move(function), std::move(done));
  });
}

Error evictNetworkSync(DeviceManager &device, const std::string &name) {
  return waitForCompletion([&](CompletionCallback done) {
    device.evictNetwork(name, std::move(done));
  });
}

Error runFunctionSync(DeviceManager &device, const std::string &name,
                      ExecutionContext &context) {
  return waitForCompletion([&](CompletionCallback done) {
    device.runFunction(name, context, std::move(done));
  });
}

} // namespace drt
