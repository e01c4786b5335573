//===- HostManager.cpp - Several devices, networks and runs ---------------===//
#include "drt/HostManager.h"
#include "drt/BackendRegistry.h"
#include "drt/ExecutionEngine.h"
#include "drt/SyncTransfer.h"

namespace drt {

HostManager::~HostManager() {
  for (auto &d : devices_)
    d->shutdown();
}

size_t HostManager::addDevice(std::unique_ptr<DeviceManager> device) {
  devices_.push_back(std::move(device));
  return devices_.size() - 1;
}

Error HostManager::addNetwork(Function function, int deviceIndex) {
  if (devices_.empty())
    return makeError(ErrorCode::InvalidArgument,
                     "addNetwork '" + function.name() + "': no devices");
  if (placement_.count(function.name()))
    return makeError(ErrorCode::InvalidArgument, "addNetwork: network '" +
                                                     function.name() +
                                                     "' already added");
  size_t index = 0;
  if (deviceIndex >= 0) {
    if (size_t(deviceIndex) >= devices_.size())
      return makeError(ErrorCode::InvalidArgument,
                       "addNetwork '" + function.name() + "': device index " +
                           std::to_string(deviceIndex) + " of " +
                           std::to_string(devices_.size()));
    index = size_t(deviceIndex);
  } else {
    for (size_t i = 1; i < devices_.size(); ++i)
      if (devices_[i]->availableMemory() > devices_[index]->availableMemory())
        index = i;
  }
  std::string name = function.name();
  if (Error e = addNetworkSync(*devices_[index], std::move(function)))
    return e;
  placement_[name] = index;
  return Error::success();
}

Error HostManager::evictNetwork(const std::string &name) {
  auto it = placement_.find(name);
  if (it == placement_.end())
    return makeError(ErrorCode::InvalidArgument,
                     "evictNetwork: unknown network '" + name + "'");
  Error e = evictNetworkSync(*devices_[it->second], name);
  placement_.erase(it);
  return e;
}

DeviceManager *HostManager::deviceOf(const std::string &name) const {
  auto it = placement_.find(name);
  return it == placement_.end() ? nullptr : devices_[it->second].get();
}

Error HostManager::runNetwork(const std::string &name,
                              ExecutionContext &context) {
  DeviceManager *device = deviceOf(name);
  if (!device)
    return makeError(ErrorCode::InvalidArgument,
                     "runNetwork: unknown network '" + name + "'");
  return runFunctionSync(*device, name, context);
}

Error HostManager::ensureOutputsAvailable(ExecutionContext &context) {
  DeviceManager *device = deviceOf(context.lastNetwork());
  if (!device)
    return makeError(ErrorCode::InvalidArgument,
                     "ensureOutputsAvailable: the context was not run with a "
                     "network of this host manager");
  // The function is known to its device; outputs are the placeholders its
  // nodes write. Every bound tensor that is resident is an output or an input
  // the caller placed; only outputs are brought back.
  Error first;
  for (const std::string &out : device->outputsOf(context.lastNetwork())) {
    Tensor *t = context.bindings().get(out);
    if (!t || t->isEmpty())
      continue;
    Error e = t->ensureOnHost();
    if (e && first.isSuccess())
      first = std::move(e);
  }
  return first;
}

Expected<std::unique_ptr<ExecutionEngine>>
ExecutionEngine::create(const std::string &backendName, DeviceConfig config) {
  auto device = BackendRegistry::instance().create(backendName, config);
  if (!device)
    return device.takeError();
  auto engine = std::make_unique<ExecutionEngine>();
  engine->hostManager_.addDevice(std::move(*device));
  return engine;
}

Error ExecutionEngine::compile(Function function) {
  return hostManager_.addNetwork(std::move(function), 0);
}

Error ExecutionEngine::run(ExecutionContext &context, const std::string &name) {
  if (Error e = hostManager_.runNetwork(name, context))
    return e;
  if (keepOutputsOnDevice_)
    return Error::success();
  return hostManager_.ensureOutputsAvailable(context);
}

} // namespace drt
