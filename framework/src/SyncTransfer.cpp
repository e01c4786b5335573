//===- SyncTransfer.cpp - Blocking wrappers of the callbacks
//---------------===//
#include "drt/SyncTransfer.h"

#include "HandOff.h"

#include <chrono>
#include <future>

namespace drt {

namespace {
/// Blocking helpers the calling thread is inside of, starting their work.
thread_local unsigned waitingStarts = 0;

/// Counts the calling thread into waitingStarts for its lifetime (start may
/// throw: a test's violation handler throws).
struct WaitingStart {
  WaitingStart() { ++waitingStarts; }
  ~WaitingStart() { --waitingStarts; }
  WaitingStart(const WaitingStart &) = delete;
  WaitingStart &operator=(const WaitingStart &) = delete;
};
} // namespace

bool callerWaitsForCompletion() { return waitingStarts != 0; }

Error waitForCompletion(const std::function<void(CompletionCallback)> &start) {
  return waitForCompletionOn({}, "", start);
}

Error waitForCompletionOn(
    std::initializer_list<const DeviceManager *> devices, std::string_view what,
    const std::function<void(CompletionCallback)> &start) {
  auto promise = std::make_shared<std::promise<Error>>();
  std::future<Error> result = promise->get_future();
  unsigned handOffs = asynchronousHandOffs();
  {
    WaitingStart waiting;
    start([promise](Error e) { promise->set_value(std::move(e)); });
  }
  // Work handed to an asynchronous device on the way (a move of the record
  // from there) completes later, whatever the devices named here declare.
  bool handedOff = asynchronousHandOffs() != handOffs;
  const DeviceManager *first = nullptr;
  bool synchronous = true;
  for (const DeviceManager *d : devices) {
    if (!d)
      continue;
    first = first ? first : d;
    synchronous = synchronous && !d->capabilities().asynchronousCompletion;
  }
  if (first && synchronous && !handedOff &&
      result.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return makeError(ErrorCode::DeviceError,
                     "device '" + first->name() + "' returned from " +
                         std::string(what) +
                         " without completing it, though it does not declare "
                         "asynchronous completion");
  return result.get();
}

Error transferToDeviceSync(DeviceManager &device, Tensor &tensor,
                           std::optional<DeviceLocation> location) {
  // A tensor resident elsewhere moves from that device too.
  const DeviceManager *from =
      tensor.isEmpty() ? nullptr : tensor.residencySnapshot().manager;
  return waitForCompletionOn(
      {&device, from}, "transferToDevice", [&](CompletionCallback done) {
        device.transferToDevice(tensor, location, std::move(done));
      });
}

Error transferFromDeviceSync(DeviceManager &device, Tensor &tensor,
                             bool release) {
  return waitForCompletionOn(
      {&device}, "transferFromDevice", [&](CompletionCallback done) {
        device.transferFromDevice(tensor, release, std::move(done));
      });
}

Error addNetworkSync(DeviceManager &device, Function function) {
  return waitForCompletionOn(
      {&device}, "addNetwork", [&](CompletionCallback done) {
        device.addNetwork(std::move(function), std::move(done));
      });
}

Error evictNetworkSync(DeviceManager &device, const std::string &name) {
  return waitForCompletionOn({&device}, "evictNetwork",
                             [&](CompletionCallback done) {
                               device.evictNetwork(name, std::move(done));
                             });
}

Error runFunctionSync(DeviceManager &device, const std::string &name,
                      ExecutionContext &context) {
  // Staging has moved inputs from other devices before runFunction returns.
  return waitForCompletionOn(
      {&device}, "runFunction", [&](CompletionCallback done) {
        device.runFunction(name, context, std::move(done));
      });
}

} // namespace drt
