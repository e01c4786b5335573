//===- drt/DeviceManager.h - One device and its transfer interface -*- C++
//-*-===//
//
// A DeviceManager is one accelerator. Its public interface is the contract of
// docs/semantics.md: the transfer interface (transferToDevice,
// transferFromDevice, releaseDeviceTensor), networks and runs, memory
// accounting, shutdown. The framework implements the rules around residency
// records here, once, for every backend; a backend implements the protected
// hooks (allocate, free, copy, execute, ...) and its own accounting.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_DEVICEMANAGER_H
#define DRT_DEVICEMANAGER_H

#include "drt/DeviceConfig.h"
#include "drt/DeviceLocation.h"
#include "drt/Error.h"
#include "drt/ExecutionContext.h"
#include "drt/Function.h"
#include "drt/FunctionRef.h"
#include "drt/HostMemory.h"
#include "drt/PathUse.h"
#include "drt/Tensor.h"

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace drt {

/// Called exactly once when an asynchronous operation completes, after the
/// residency record has been updated, with the operation's outcome.
using CompletionCallback = std::function<void(Error)>;

/// One argument of a compiled run: the allocation and the byte offset of the
/// placeholder's data in it (non-zero for views of a resident tensor). Only
/// an input can be a view at an offset: the framework refuses an output
/// bound to part of a record, or to a record another argument shares, so
/// an output's offset is 0 and its allocation is no other argument's.
struct RunArgument {
  DeviceLocation location;
  uint64_t offsetBytes = 0;
};

/// A device. Public calls may be made from any thread, except that runFunction
/// and the synchronous helpers block and so must not be called from inside a
/// completion callback.
class DeviceManager {
public:
  explicit DeviceManager(DeviceConfig config);
  /// Derived classes must call shutdown() in their own destructor, while their
  /// members still exist.
  virtual ~DeviceManager();
  DeviceManager(const DeviceManager &) = delete;
  DeviceManager &operator=(const DeviceManager &) = delete;

  /// Initialises the device (driver handles, kernels). Must succeed before any
  /// other call.
  virtual Error init() = 0;
  /// What the backend declares it supports.
  virtual Capabilities capabilities() const = 0;
  /// The configuration it was created with.
  const DeviceConfig &config() const { return config_; }
  /// The device's name in messages.
  const std::string &name() const { return config_.name; }
  /// A one-line description of the real device behind it.
  virtual std::string description() const { return name(); }

  /// Device memory this manager may use (the budget), in bytes.
  virtual uint64_t maximumMemory() const = 0;
  /// Logical bytes in use: the exact sizes of live allocations.
  virtual uint64_t usedMemory() const = 0;
  /// maximumMemory() - usedMemory().
  uint64_t availableMemory() const;
  /// Physical bytes in use (alignment, pools): the backend's own measure.
  virtual uint64_t physicalMemoryInUse() const = 0;
  /// Number of live allocations.
  virtual size_t liveAllocations() const = 0;
  /// Counters of allocations, transfers, copies and runs.
  virtual DeviceStats stats() const = 0;
  /// The internal paths this device's work may take in its configuration,
  /// with how often it took each and how often two uses overlapped
  /// (drt/PathUse.h): a path not listed cannot be taken here. Empty (the
  /// default) for a backend that reports none.
  virtual std::vector<PathUse> pathUses() const { return {}; }
  /// Host memory this device DMAs directly, for tensors created with it
  /// (Tensor::create(type, name, memory)): their transfers to and from this
  /// device need no staging copy. NotSupported when the backend has none
  /// (the default); DeviceLost after shutdown.
  virtual Expected<std::shared_ptr<HostMemory>> pinnedHostMemory();

  //===--------------------------------------------------------------------===//
  // The transfer interface.
  //===--------------------------------------------------------------------===//

  /// Makes \p tensor's record resident on this device. With no \p location the
  /// backend allocates; a given location (from allocateDeviceMemory, of exactly
  /// the storage's size) is taken over on success. A tensor resident on
  /// another device is moved through the host; one already resident here
  /// moves nothing. Errors: InvalidArgument for a partial view or a bad
  /// location, OutOfMemory, NotSupported without resident tensors,
  /// DeviceLost for a Lost record or a shut-down device, DeviceError.
  void transferToDevice(Tensor &tensor, std::optional<DeviceLocation> location,
                        CompletionCallback done);
  /// Copies \p tensor's data from this device to host. With \p release the
  /// device copy is freed and the record becomes Host, else it becomes
  /// Mirrored. Success without work when the record is Host.
  void transferFromDevice(Tensor &tensor, bool release,
                          CompletionCallback done);
  /// Frees \p tensor's device copy without copying back; the record becomes
  /// Host with unspecified contents. Idempotent: a Host record is a success.
  /// A Lost record becomes Host too. Waits for a pending operation first.
  Error releaseDeviceTensor(Tensor &tensor);
  /// Allocates \p bytes of device memory for a later transferToDevice.
  Expected<DeviceLocation> allocateDeviceMemory(uint64_t bytes);
  /// Frees a location from allocateDeviceMemory that no tensor took over.
  /// A stale, unknown or double-released location is InvalidArgument and never
  /// reaches the driver.
  Error releaseDeviceMemory(DeviceLocation location);

  //===--------------------------------------------------------------------===//
  // Networks and runs.
  //===--------------------------------------------------------------------===//

  /// Verifies and prepares \p function under its name. InvalidArgument for a
  /// malformed function or a name already added.
  void addNetwork(Function function, CompletionCallback done);
  /// Removes the network \p name; InvalidArgument when unknown.
  void evictNetwork(const std::string &name, CompletionCallback done);
  /// True when a network named \p name was added and not evicted.
  bool hasNetwork(const std::string &name) const;
  /// The output placeholder names of network \p name (empty when unknown).
  std::vector<std::string> outputsOf(const std::string &name) const;
  /// Runs network \p name on the tensors bound in \p context. Inputs resident
  /// here are used in place, inputs on another device are moved here, host
  /// inputs are copied into temporary device memory. Outputs stay resident
  /// here (Device) unless the config says copyDeviceTensorsToHost. Blocks
  /// while it stages inputs; completes asynchronously.
  void runFunction(const std::string &name, ExecutionContext &context,
                   CompletionCallback done);

  //===--------------------------------------------------------------------===//
  // Lifecycle and faults.
  //===--------------------------------------------------------------------===//

  /// Shuts the device down: every operation in flight completes exactly once
  /// with DeviceLost, every record resident here becomes Lost, all device
  /// memory is freed. Idempotent.
  void shutdown();
  /// True after shutdown().
  bool isShutDown() const { return shutDown_.load(); }
  /// Plans a fault (see FaultSpec). NotSupported unless the backend declares
  /// faultInjection.
  virtual Error injectFault(const FaultSpec &fault);
  /// Failures of work the framework did on its own (releases from destructors
  /// and from dropping Mirrored copies), taken out of the manager. A correct
  /// backend leaves this empty.
  std::vector<Error> takeBackgroundErrors();
  /// Number of operations started and not yet completed.
  size_t operationsInFlight() const;

protected:
  /// Refuses work from now on, as a shutdown does, before shutdown() runs:
  /// a backend that loses the device inside an operation calls it where it
  /// decides the loss (FaultPlan::strike's onDeviceLost), so that no
  /// operation of another thread counted after that one succeeds.
  void refuseWork() { shutDown_.store(true); }
  /// Allocates \p bytes, enforcing the budget: OutOfMemory naming the sizes.
  virtual Expected<DeviceLocation> allocate(uint64_t bytes) = 0;
  /// Frees \p location; InvalidArgument when stale or unknown.
  virtual Error free(DeviceLocation location) = 0;
  /// The size of the allocation at \p location; InvalidArgument when stale.
  virtual Expected<uint64_t> allocationSize(DeviceLocation location) const = 0;
  /// Copies \p bytes from host \p src to the start of \p dst (the framework
  /// copies whole allocations: \p bytes is \p dst's size). \p src stays
  /// valid and unchanged until \p done is called, exactly once.
  virtual void copyToDevice(DeviceLocation dst, const std::byte *src,
                            uint64_t bytes, CompletionCallback done) = 0;
  /// Copies \p bytes (\p src's size) from the start of \p src to host \p
  /// dst; the data must be in \p dst when \p done is called, exactly once.
  virtual void copyFromDevice(DeviceLocation src, std::byte *dst,
                              uint64_t bytes, CompletionCallback done) = 0;
  /// Prepares a verified function (kernels were built at init). Never
  /// called while a compileFunction or evictFunction of the same name runs.
  virtual Error compileFunction(const Function &function) = 0;
  /// Forgets a function prepared by compileFunction. Never called while a
  /// compileFunction or evictFunction of the same name runs.
  virtual void evictFunction(const std::string &name) = 0;
  /// Executes \p function with one argument per placeholder, in placeholder
  /// order, and calls \p done exactly once when its outputs are in place.
  /// \p function stays valid until \p done is called, also when its network
  /// is evicted meanwhile.
  virtual void execute(const Function &function,
                       std::vector<RunArgument> arguments,
                       CompletionCallback done) = 0;
  /// Stops the backend: waits for or cancels its work and frees all device
  /// memory. A pending operation's callback may be called here (once) or
  /// not at all: when this returns, the framework completes every operation
  /// still pending with DeviceLost, and ignores a callback that comes later.
  /// May run on a thread of the backend's own (a shutdown from inside a
  /// completion callback): such a thread must not wait for itself. The
  /// framework does not call evictFunction for the networks still placed:
  /// what compileFunction prepared (compiled code a process shares between
  /// devices included) is released here.
  virtual void shutdownBackend() = 0;

private:
  struct PendingOperation;
  struct RunState;

  std::shared_ptr<PendingOperation> beginOperation(std::string what,
                                                   CompletionCallback then);
  std::shared_ptr<PendingOperation> beginOperation(const char *operation,
                                                   const TensorStorage &storage,
                                                   CompletionCallback then);
  CompletionCallback completionFor(std::shared_ptr<PendingOperation> op);
  /// Calls \p hook, the backend hook that submits \p op, marking the
  /// thread as submitting it, and stamps when the submission returned. It
  /// touches nothing of this device after the hook returns, and its callers
  /// return at once: the hook may have completed \p op, and once the last
  /// operation of a device has completed, the device may be destroyed, also
  /// while a hook called on another device's thread has yet to return.
  void submit(const std::shared_ptr<PendingOperation> &op,
              FunctionRef<void()> hook);
  /// For \p op completed successfully on its submitting thread for a caller
  /// that waits (a failure found before any work may come back at once):
  /// a background error when an operation whose submission returned before
  /// \p op's began is still uncompleted (semantics §4: an inline
  /// completion must not overtake earlier ones).
  void checkInlineOrder(const PendingOperation &op);
  void finishOperation(const std::shared_ptr<PendingOperation> &op, Error e);
  void abandonAll();
  bool registerResident(const std::shared_ptr<TensorStorage> &storage,
                        DeviceLocation location);
  void unregisterResident(const TensorStorage *storage,
                          DeviceLocation location);
  /// Frees \p location, the device copy of \p storage that its record has
  /// just let go, and then unregisters it: while the device frees it, a
  /// program's releaseDeviceMemory of it is refused, as in program order
  /// the location is already gone.
  Error releaseResident(DeviceLocation location, const TensorStorage &storage);
  void noteBackgroundError(Error error);
  Error releaseFromRecord(DeviceLocation location,
                          const TensorStorage &storage);
  Error releaseFromRecord(DeviceLocation location, std::string_view what);
  Error releaseFailure(Error e, std::string_view what,
                       DeviceLocation location) const;
  Error checkTransferable(const Tensor &tensor, const char *operation) const;
  /// DeviceLost: \p what found this device shut down.
  Error shutDownError(const std::string &what) const;
  void moveHere(std::shared_ptr<TensorStorage> storage,
                std::optional<DeviceLocation> location,
                CompletionCallback done);
  void upload(std::shared_ptr<TensorStorage> storage,
              std::optional<DeviceLocation> location, CompletionCallback done);
  /// transferFromDevice of a full tensor's record; \p tensor, when given,
  /// names it in messages (else the storage does).
  void bringHome(std::shared_ptr<TensorStorage> storage, bool release,
                 const Tensor *tensor, CompletionCallback done);
  void fetchToHost(std::shared_ptr<TensorStorage> storage,
                   DeviceLocation location, bool release,
                   CompletionCallback done);
  Error stageRun(RunState &run, ExecutionContext &context);
  void finishRun(std::shared_ptr<RunState> run, Error error);

  friend class TensorStorage;
  friend class Tensor;

  DeviceConfig config_;
  std::atomic<bool> shutDown_{false};
  /// Set by the first shutdown() (shutDown_ may be set before it, by
  /// refuseWork()).
  std::atomic<bool> shutdownStarted_{false};

  /// A record resident here.
  struct Resident {
    const TensorStorage *storage;
    std::weak_ptr<TensorStorage> weak;
    /// The record has let the location go and the device is freeing it
    /// (releaseResident): no record's any more, and no program's either.
    bool releasing = false;
  };

  mutable std::mutex mutex_;
  /// The records resident here, by the value of their location.
  std::unordered_map<uint64_t, Resident> resident_;
  std::vector<std::shared_ptr<PendingOperation>> pending_;
  std::vector<Error> backgroundErrors_;
  /// The networks added here; a null entry while an add or an evict of that
  /// name calls the backend (other adds and evicts of the name wait).
  std::map<std::string, std::shared_ptr<const Function>> networks_;
  /// pending_.size() and !backgroundErrors_.empty(), written under mutex_:
  /// a harness asks for both after every step, mostly to hear "none", which
  /// these answer without the lock.
  std::atomic<size_t> pendingCount_{0};
  std::atomic<bool> anyBackgroundErrors_{false};
};

} // namespace drt

#endif // DRT_DEVICEMANAGER_H
