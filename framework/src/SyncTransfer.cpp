//===- SyncTransfer.cpp - Blocking wrappers of the callbacks
//---------------===//
#include "drt/SyncTransfer.h"

#include "HandOff.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

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

/// What a blocking helper waits on. The callback shares it: a callback may
/// still come after the helper has given up on a synchronous device that
/// returned without completing.
struct Waiter {
  std::mutex mutex;
  std::condition_variable called;
  bool done = false;
  Error error;
};

/// Waiters this thread may reuse. A helper can run inside another's start
/// (a run stages its inputs with helpers of their own), so there may be
/// several; a few cover every nesting the framework makes.
thread_local std::vector<std::shared_ptr<Waiter>> idleWaiters;
constexpr size_t MostIdleWaiters = 4;

std::shared_ptr<Waiter> takeWaiter() {
  if (idleWaiters.empty())
    return std::make_shared<Waiter>();
  std::shared_ptr<Waiter> w = std::move(idleWaiters.back());
  idleWaiters.pop_back();
  w->done = false;
  return w;
}

/// Keeps \p w for the thread's next helper when nothing else holds it (a
/// callback kept by the backend may still call it: then it goes).
void keepWaiter(std::shared_ptr<Waiter> w) {
  if (w.use_count() == 1 && idleWaiters.size() < MostIdleWaiters)
    idleWaiters.push_back(std::move(w));
}
} // namespace

bool callerWaitsForCompletion() { return waitingStarts != 0; }

Error waitForCompletion(FunctionRef<void(CompletionCallback)> start) {
  return waitForCompletionOn({}, "", start);
}

Error waitForCompletionOn(std::initializer_list<const DeviceManager *> devices,
                          std::string_view what,
                          FunctionRef<void(CompletionCallback)> start) {
  std::shared_ptr<Waiter> waiter = takeWaiter();
  unsigned handOffs = asynchronousHandOffs();
  {
    WaitingStart waiting;
    start([waiter](Error e) {
      std::lock_guard<std::mutex> lock(waiter->mutex);
      waiter->error = std::move(e);
      waiter->done = true;
      waiter->called.notify_all();
    });
  }
  // Work handed to an asynchronous device on the way (a move of the record
  // from there) completes later, whatever the devices named here declare.
  bool handedOff = asynchronousHandOffs() != handOffs;
  const DeviceManager *first = nullptr;
  bool synchronous = true;
  // A shutdown on another thread completes the operations it abandons on
  // that thread: the backend's own completion of such an operation loses
  // to it, and the call may return before the shutdown has called back.
  bool stopping = false;
  for (const DeviceManager *d : devices) {
    if (!d)
      continue;
    first = first ? first : d;
    synchronous = synchronous && !d->capabilities().asynchronousCompletion;
    stopping = stopping || d->isShutDown();
  }
  std::unique_lock<std::mutex> lock(waiter->mutex);
  if (first && synchronous && !handedOff && !stopping && !waiter->done)
    return makeError(ErrorCode::DeviceError,
                     "device '" + first->name() + "' returned from " +
                         std::string(what) +
                         " without completing it, though it does not declare "
                         "asynchronous completion");
  waiter->called.wait(lock, [&] { return waiter->done; });
  Error e = std::move(waiter->error);
  lock.unlock();
  keepWaiter(std::move(waiter));
  return e;
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
