//===- DeviceManager.cpp - The rules around residency records -------------===//
//
// Every rule of docs/semantics.md that concerns residency records is enforced
// here, once, for every backend: partial views, busy records, moves between
// devices, exactly-once completions, shutdown. Lock order: a record's mutex
// may be held while taking the manager's mutex, never the other way round.
//
//===----------------------------------------------------------------------===//
#include "drt/DeviceManager.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"

#include "HandOff.h"
#include "TensorChecks.h"
#include "TensorStorage.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <thread>
#include <utility>

namespace drt {

namespace {
thread_local unsigned handOffsOnThisThread = 0;

/// The operation whose backend hook this thread is in (its completion's
/// key), for telling a completion that comes back before the hook returns.
thread_local const void *submittingOnThisThread = nullptr;

/// Marks the calling thread as submitting \p operation for its lifetime.
class Submitting {
public:
  explicit Submitting(const void *operation)
      : previous_(std::exchange(submittingOnThisThread, operation)) {}
  ~Submitting() { submittingOnThisThread = previous_; }
  Submitting(const Submitting &) = delete;
  Submitting &operator=(const Submitting &) = delete;

private:
  const void *previous_;
};

/// Orders the beginnings and returns of submissions (checkInlineOrder).
/// Process-wide, not the device's: a submission stamps its return after the
/// backend's hook, which may have completed the operation, and once it has,
/// its caller may destroy the device.
std::atomic<uint64_t> submissionClock{0};
} // namespace

void noteHandOffTo(const DeviceManager &device) {
  if (device.capabilities().asynchronousCompletion)
    ++handOffsOnThisThread;
}

unsigned asynchronousHandOffs() { return handOffsOnThisThread; }

struct DeviceManager::PendingOperation {
  /// The device it runs on: its completion needs nothing else, and so fits
  /// a CompletionCallback without an allocation.
  DeviceManager *device = nullptr;
  /// What the operation is, for messages: "<operation> of <the tensor>"
  /// when operation is set (built only when a message needs it), else
  /// subject.
  const char *operation = nullptr;
  /// The tensor's name when operation is set.
  std::string subject;
  uint64_t bytes = 0;
  CompletionCallback then;
  std::atomic<bool> done{false};
  /// submissionClock when it began (before its hook was called), and when
  /// its hook returned (the largest value until then).
  uint64_t began = 0;
  std::atomic<uint64_t> submitted{std::numeric_limits<uint64_t>::max()};

  std::string what() const {
    if (!operation)
      return subject;
    return std::string(operation) + " of " +
           TensorStorage::describe(subject, bytes);
  }
};

struct DeviceManager::RunState {
  std::shared_ptr<const Function> function;
  CompletionCallback done;
  /// The distinct records of every bound tensor, held busy during the run.
  std::vector<std::shared_ptr<TensorStorage>> held;
  /// Temporary device copies of host inputs.
  std::vector<DeviceLocation> temporaries;
  /// Output records and their locations.
  struct Output {
    std::shared_ptr<TensorStorage> storage;
    DeviceLocation location;
    bool allocatedForRun;
  };
  std::vector<Output> outputs;
  std::vector<RunArgument> arguments;
};

DeviceManager::DeviceManager(DeviceConfig config)
    : config_(std::move(config)) {}

DeviceManager::~DeviceManager() {
  if (!shutdownStarted_.exchange(true)) {
    shutDown_.store(true);
    abandonAll();
  }
}

uint64_t DeviceManager::availableMemory() const {
  uint64_t max = maximumMemory(), used = usedMemory();
  return used >= max ? 0 : max - used;
}

//===----------------------------------------------------------------------===//
// Pending operations.
//===----------------------------------------------------------------------===//

std::shared_ptr<DeviceManager::PendingOperation>
DeviceManager::beginOperation(std::string what, CompletionCallback then) {
  auto op = std::make_shared<PendingOperation>();
  op->device = this;
  op->subject = std::move(what);
  op->then = std::move(then);
  op->began = submissionClock.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(op);
  pendingCount_.store(pending_.size(), std::memory_order_release);
  return op;
}

std::shared_ptr<DeviceManager::PendingOperation>
DeviceManager::beginOperation(const char *operation,
                              const TensorStorage &storage,
                              CompletionCallback then) {
  auto op = std::make_shared<PendingOperation>();
  op->device = this;
  op->operation = operation;
  op->subject = storage.name();
  op->bytes = storage.size();
  op->then = std::move(then);
  op->began = submissionClock.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(op);
  pendingCount_.store(pending_.size(), std::memory_order_release);
  return op;
}

CompletionCallback
DeviceManager::completionFor(std::shared_ptr<PendingOperation> op) {
  return [op = std::move(op)](Error e) {
    DeviceManager &device = *op->device;
    // Inline completion is for a caller that waits (callerWaitsForCompletion):
    // another may hold a lock of its own across the call that its callback
    // takes. Failures found before any work may come back at once.
    if (submittingOnThisThread == op.get() && !e &&
        !callerWaitsForCompletion() &&
        device.capabilities().asynchronousCompletion)
      device.noteBackgroundError(makeError(
          ErrorCode::DeviceError,
          "device '" + device.name() + "' completed " + op->what() +
              " on the thread that submitted it, before the submission "
              "returned, though it declares asynchronous completion and the "
              "caller does not wait (callerWaitsForCompletion() is false)"));
    if (submittingOnThisThread == op.get() && !e &&
        callerWaitsForCompletion() &&
        device.capabilities().asynchronousCompletion)
      device.checkInlineOrder(*op);
    device.finishOperation(op, std::move(e));
  };
}

void DeviceManager::submit(const std::shared_ptr<PendingOperation> &op,
                           FunctionRef<void()> hook) {
  {
    Submitting submitting(op.get());
    hook();
  }
  op->submitted.store(submissionClock.fetch_add(1, std::memory_order_acq_rel),
                      std::memory_order_release);
}

void DeviceManager::checkInlineOrder(const PendingOperation &op) {
  std::string earlier;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &p : pending_)
      if (p.get() != &op &&
          p->submitted.load(std::memory_order_acquire) < op.began &&
          !p->done.load(std::memory_order_acquire)) {
        earlier = p->what();
        break;
      }
  }
  if (!earlier.empty())
    noteBackgroundError(makeError(
        ErrorCode::DeviceError,
        "device '" + name() + "' completed " + op.what() +
            " on the thread that submitted it before completing " + earlier +
            ", submitted earlier: callbacks come in the order of "
            "submissions"));
}

void DeviceManager::finishOperation(const std::shared_ptr<PendingOperation> &op,
                                    Error e) {
  if (op->done.exchange(true)) {
    // After shutdown the framework completes operations itself, so a late
    // completion from the backend is expected; before it, it is a bug.
    if (!shutDown_)
      noteBackgroundError(makeError(ErrorCode::DeviceError,
                                    "device '" + name() + "' completed " +
                                        op->what() + " more than once"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.erase(std::remove(pending_.begin(), pending_.end(), op),
                   pending_.end());
    pendingCount_.store(pending_.size(), std::memory_order_release);
  }
  if (shutDown_ && e.isSuccess())
    e = makeError(ErrorCode::DeviceLost,
                  "device '" + name() + "' was shut down during " + op->what());
  CompletionCallback then = std::move(op->then);
  then(std::move(e));
}

size_t DeviceManager::operationsInFlight() const {
  return pendingCount_.load(std::memory_order_acquire);
}

void DeviceManager::shutdown() {
  if (shutdownStarted_.exchange(true))
    return;
  shutDown_.store(true);
  shutdownBackend();
  abandonAll();
}

void DeviceManager::abandonAll() {
  std::vector<std::shared_ptr<PendingOperation>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left = pending_;
    // The networks go before any pending operation is called back: a
    // program that hears of its operation's end (on another thread than
    // this shutdown's, a backend's worker say) meets a device without them,
    // as the shutdown is one step.
    networks_.clear();
  }
  for (auto &op : left)
    finishOperation(op, makeError(ErrorCode::DeviceLost,
                                  "device '" + name() +
                                      "' was shut down during " + op->what()));
  std::unordered_map<uint64_t, Resident> res;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    res.swap(resident_);
  }
  for (auto &[location, resident] : res) {
    std::shared_ptr<TensorStorage> storage = resident.weak.lock();
    if (!storage)
      continue;
    ResidencyRecord &r = storage->record;
    std::lock_guard<std::mutex> lock(r.mutex_);
    if (r.manager_ != this)
      continue;
    // A mirrored record still has a valid host copy; a device-only one is lost.
    r.place(r.state_ == ResidencyState::Mirrored ? ResidencyState::Host
                                                 : ResidencyState::Lost,
            nullptr, {});
  }
}

Expected<std::shared_ptr<HostMemory>> DeviceManager::pinnedHostMemory() {
  return makeError(ErrorCode::NotSupported,
                   "device '" + name() + "' has no pinned host memory");
}

Error DeviceManager::injectFault(const FaultSpec &) {
  return makeError(ErrorCode::NotSupported,
                   "device '" + name() + "' does not support fault injection");
}

std::vector<Error> DeviceManager::takeBackgroundErrors() {
  std::vector<Error> out;
  if (!anyBackgroundErrors_.load(std::memory_order_acquire))
    return out;
  std::lock_guard<std::mutex> lock(mutex_);
  out.swap(backgroundErrors_);
  anyBackgroundErrors_.store(false, std::memory_order_relaxed);
  return out;
}

void DeviceManager::noteBackgroundError(Error error) {
  std::lock_guard<std::mutex> lock(mutex_);
  backgroundErrors_.push_back(std::move(error));
  anyBackgroundErrors_.store(true, std::memory_order_release);
}

//===----------------------------------------------------------------------===//
// Resident records.
//===----------------------------------------------------------------------===//

bool DeviceManager::registerResident(
    const std::shared_ptr<TensorStorage> &storage, DeviceLocation location) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shutDown_)
    return false;
  resident_[location.value] = {storage.get(), storage};
  return true;
}

void DeviceManager::unregisterResident(const TensorStorage *storage,
                                       DeviceLocation location) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = resident_.find(location.value);
  if (it != resident_.end() && it->second.storage == storage)
    resident_.erase(it);
}

Error DeviceManager::releaseResident(DeviceLocation location,
                                     const TensorStorage &storage) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = resident_.find(location.value);
    if (it != resident_.end() && it->second.storage == &storage)
      it->second.releasing = true;
  }
  Error e = releaseFromRecord(location, storage);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = resident_.find(location.value);
  if (it != resident_.end() && it->second.storage == &storage &&
      it->second.releasing)
    resident_.erase(it);
  return e;
}

Error DeviceManager::releaseFromRecord(DeviceLocation location,
                                       const TensorStorage &storage) {
  Error e = free(location);
  if (e.isSuccess() || shutDown_)
    return Error::success();
  // Described only now: a release that succeeds needs no text.
  return releaseFailure(std::move(e), storage.describe(), location);
}

Error DeviceManager::releaseFromRecord(DeviceLocation location,
                                       std::string_view what) {
  Error e = free(location);
  if (e.isSuccess() || shutDown_)
    return Error::success();
  return releaseFailure(std::move(e), what, location);
}

Error DeviceManager::releaseFailure(Error e, std::string_view what,
                                    DeviceLocation location) const {
  return makeError(e.code(), "releasing the device copy of " +
                                 std::string(what) + " at " +
                                 location.toString() + " on device '" + name() +
                                 "': " + e.message());
}

Error DeviceManager::checkTransferable(const Tensor &tensor,
                                       const char *operation) const {
  if (!tensor.coversStorage())
    return makeError(ErrorCode::InvalidArgument,
                     std::string(operation) + " of " + tensor.describe() +
                         " on device '" + name() +
                         "': a partial view cannot move residency; transfer "
                         "its owner or a full view");
  // A device with resident tensors decides a shutdown in moveHere, once
  // the record is held and what was in flight on it has completed (program
  // order): a record resident on another device is read back (or its
  // mirror dropped) before the upload finds this device shut down
  // (semantics, section 3), so a shutdown on another thread in the middle
  // of the move leaves what one before it would.
  if (shutDown_ && !capabilities().residentTensors)
    return shutDownError(std::string(operation) + " of " + tensor.describe());
  return Error::success();
}

Error DeviceManager::shutDownError(const std::string &what) const {
  return makeError(ErrorCode::DeviceLost,
                   what + ": device '" + name() + "' is shut down");
}

//===----------------------------------------------------------------------===//
// Transfers.
//===----------------------------------------------------------------------===//

void DeviceManager::transferToDevice(Tensor &tensor,
                                     std::optional<DeviceLocation> location,
                                     CompletionCallback done) {
  tensor.requireNonEmpty("transferToDevice");
  if (Error e = checkTransferable(tensor, "transferToDevice"))
    return done(std::move(e));
  if (!capabilities().residentTensors)
    return done(makeError(ErrorCode::NotSupported,
                          "transferToDevice of " + tensor.describe() +
                              ": device '" + name() +
                              "' does not keep tensors resident"));
  std::shared_ptr<TensorStorage> storage = tensor.storage_;
  {
    std::unique_lock<std::mutex> lock(storage->record.mutex_);
    storage->record.acquire(lock);
  }
  // A given location is the tensor's from this call on (semantics §3),
  // though the upload into it may come only after the record is read back
  // from another device: a free of it, or another tensor's takeover, in the
  // meantime is refused. A location the upload will refuse (another
  // tensor's, not live, of another size) stays the caller's: the upload
  // refuses it after the checks that come first.
  bool reserved = false;
  if (location) {
    Expected<uint64_t> size = allocationSize(*location);
    if (size && *size == storage->size()) {
      std::lock_guard<std::mutex> lock(mutex_);
      reserved =
          resident_
              .try_emplace(location->value, Resident{storage.get(), storage})
              .second;
    }
  }
  // No reference may outlive the callback on this thread's stack, so each
  // continuation owns its own and the caller keeps none.
  std::shared_ptr<TensorStorage> forMove = storage;
  moveHere(std::move(forMove), location,
           [this, storage = std::move(storage), location, reserved,
            done = std::move(done)](Error e) mutable {
             if (e && reserved)
               unregisterResident(storage.get(), *location);
             storage->record.releaseBusy();
             // Drop the reference first: if it is the last one, the device
             // copy is released before the caller hears of completion.
             storage.reset();
             done(std::move(e));
           });
}

namespace {
/// Calls \p done with \p e once \p storage's reference is gone. A move's
/// upload runs on the thread that completed the read-back from the other
/// device: a reference that thread kept across the callback could be the
/// record's last once the program drops its tensors, and would release the
/// device copy after the program heard of the outcome and went on.
void callBackWithout(std::shared_ptr<TensorStorage> &storage,
                     CompletionCallback &done, Error e) {
  storage.reset();
  done(std::move(e));
}
} // namespace

void DeviceManager::moveHere(std::shared_ptr<TensorStorage> storage,
                             std::optional<DeviceLocation> location,
                             CompletionCallback done) {
  ResidencyRecord &r = storage->record;
  std::unique_lock<std::mutex> lock(r.mutex_);
  switch (r.state_) {
  case ResidencyState::Lost:
    lock.unlock();
    return callBackWithout(
        storage, done,
        makeError(ErrorCode::DeviceLost,
                  "transferToDevice of " + storage->describe() +
                      " to device '" + name() +
                      "': its device was lost; refill it from the host "
                      "first"));
  case ResidencyState::Device:
  case ResidencyState::Mirrored: {
    if (r.manager_ == this) {
      DeviceLocation current = r.location_;
      lock.unlock();
      if (location && *location != current)
        return callBackWithout(
            storage, done,
            makeError(ErrorCode::InvalidArgument,
                      "transferToDevice of " + storage->describe() +
                          ": already resident on device '" + name() + "' at " +
                          current.toString() + ", cannot take over " +
                          location->toString()));
      return callBackWithout(storage, done, Error::success());
    }
    DeviceManager *other = r.manager_;
    DeviceLocation old = r.location_;
    if (r.state_ == ResidencyState::Mirrored) {
      // The host copy is valid: drop the other device's copy and upload.
      r.place(ResidencyState::Host, nullptr, {});
      lock.unlock();
      if (Error e = other->releaseResident(old, *storage))
        other->noteBackgroundError(std::move(e));
      return upload(std::move(storage), location, std::move(done));
    }
    lock.unlock();
    std::shared_ptr<TensorStorage> forFetch = storage;
    noteHandOffTo(*other);
    other->fetchToHost(std::move(forFetch), old, /*release=*/true,
                       [this, storage = std::move(storage), location,
                        done = std::move(done)](Error e) mutable {
                         if (e)
                           return callBackWithout(storage, done, std::move(e));
                         upload(std::move(storage), location, std::move(done));
                       });
    return;
  }
  case ResidencyState::Host:
    lock.unlock();
    return upload(std::move(storage), location, std::move(done));
  }
}

void DeviceManager::upload(std::shared_ptr<TensorStorage> storage,
                           std::optional<DeviceLocation> location,
                           CompletionCallback done) {
  if (shutDown_)
    return callBackWithout(
        storage, done,
        shutDownError("transferToDevice of " + storage->describe()));
  uint64_t bytes = storage->size();
  // Messages name the tensor; its description is built only for them.
  auto what = [&storage] { return storage->describe(); };
  DeviceLocation target;
  bool allocated = false;
  if (location) {
    // The location is the tensor's from the moment the takeover is asked
    // for, not from when its upload completes: in program order a free of
    // it, or another tensor's takeover, comes after this one, whether or
    // not the upload has completed yet. Given back if the upload fails. One
    // it refuses (not live, or of another size) is never taken, not even
    // for a moment: it stays the caller's, whose free of it may come
    // while this upload runs on a completion thread.
    Expected<uint64_t> size = allocationSize(*location);
    bool fits = size && *size == bytes;
    bool taken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto held = resident_.find(location->value);
      if (held == resident_.end() && fits)
        held =
            resident_
                .try_emplace(location->value, Resident{storage.get(), storage})
                .first;
      // Reserved by this tensor's transferToDevice, or held by another.
      taken = held != resident_.end() && held->second.storage != storage.get();
    }
    // Called back without the lock: the callback may take a record's lock,
    // and a completion holding one takes this one (registerResident).
    if (taken)
      return callBackWithout(
          storage, done,
          makeError(ErrorCode::InvalidArgument,
                    "transferToDevice of " + what() + ": location " +
                        location->toString() + " on device '" + name() +
                        "' belongs to another tensor"));
    auto refuse = [&](std::string why) {
      callBackWithout(storage, done,
                      makeError(ErrorCode::InvalidArgument,
                                "transferToDevice of " + what() +
                                    ": location " + location->toString() +
                                    std::move(why)));
    };
    if (!size)
      return refuse(" is not a live allocation of device '" + name() + "'");
    if (*size != bytes)
      return refuse(" on device '" + name() + "' holds " +
                    std::to_string(*size) + " bytes, the tensor needs " +
                    std::to_string(bytes));
    target = *location;
  } else {
    Expected<DeviceLocation> fresh = allocate(bytes);
    if (!fresh)
      return callBackWithout(storage, done, fresh.takeError());
    target = *fresh;
    allocated = true;
  }
  const std::byte *source = storage->data();
  // The storage may have moved into the continuation before the other
  // arguments are evaluated: the operation names it through a reference.
  const TensorStorage &subject = *storage;
  auto op = beginOperation(
      "transferToDevice", subject,
      [this, storage = std::move(storage), target, allocated,
       done = std::move(done)](Error e) mutable {
        if (e.isSuccess()) {
          ResidencyRecord &r = storage->record;
          std::unique_lock<std::mutex> lock(r.mutex_);
          if (registerResident(storage, target)) {
            r.place(ResidencyState::Device, this, target);
            storage->markHostStale();
            lock.unlock();
            storage.reset();
            return done(Error::success());
          }
          e = makeError(ErrorCode::DeviceLost,
                        "device '" + name() +
                            "' was shut down during transferToDevice of " +
                            storage->describe());
        }
        if (allocated) {
          if (Error fe = releaseFromRecord(target, *storage))
            noteBackgroundError(std::move(fe));
        } else {
          // The taken-over location is the program's again.
          unregisterResident(storage.get(), target);
        }
        storage.reset();
        done(std::move(e));
      });
  submit(op, [&] { copyToDevice(target, source, bytes, completionFor(op)); });
}

void DeviceManager::fetchToHost(std::shared_ptr<TensorStorage> storage,
                                DeviceLocation location, bool release,
                                CompletionCallback done) {
  std::byte *destination = storage->data();
  uint64_t bytes = storage->size();
  // The storage may have moved into the continuation before the other
  // arguments are evaluated: the operation names it through a reference.
  const TensorStorage &subject = *storage;
  auto op = beginOperation(
      "transferFromDevice", subject,
      [this, storage = std::move(storage), location, release,
       done = std::move(done)](Error e) mutable {
        // The backend is done with the host bytes, whatever the outcome.
        if (std::string damage = storage->takeGuardDamage(); !damage.empty())
          noteBackgroundError(makeError(
              ErrorCode::DeviceError, "copyFromDevice of device '" + name() +
                                          "' wrote outside the host bytes of " +
                                          storage->describe() + ": " + damage));
        ResidencyRecord &r = storage->record;
        std::unique_lock<std::mutex> lock(r.mutex_);
        bool stillHere = r.manager_ == this && r.location_ == location;
        if (e.isSuccess() && !stillHere)
          e = makeError(ErrorCode::DeviceLost,
                        "device '" + name() +
                            "' was shut down during transferFromDevice of " +
                            storage->describe());
        if (e) {
          if (e.code() == ErrorCode::DeviceLost && stillHere) {
            r.place(ResidencyState::Lost, nullptr, {});
            lock.unlock();
            unregisterResident(storage.get(), location);
          }
          if (lock.owns_lock())
            lock.unlock();
          storage.reset();
          return done(std::move(e));
        }
        if (!release) {
          r.setState(ResidencyState::Mirrored);
          lock.unlock();
          storage.reset();
          return done(Error::success());
        }
        r.place(ResidencyState::Host, nullptr, {});
        lock.unlock();
        Error released = releaseResident(location, *storage);
        storage.reset();
        done(std::move(released));
      });
  submit(op, [&] {
    copyFromDevice(location, destination, bytes, completionFor(op));
  });
}

void DeviceManager::transferFromDevice(Tensor &tensor, bool release,
                                       CompletionCallback done) {
  tensor.requireNonEmpty("transferFromDevice");
  if (!tensor.coversStorage())
    return done(makeError(ErrorCode::InvalidArgument,
                          "transferFromDevice of " + tensor.describe() +
                              ": a partial view cannot move residency; "
                              "transfer its owner or a full view"));
  bringHome(tensor.storage_, release, &tensor, std::move(done));
}

void DeviceManager::bringHome(std::shared_ptr<TensorStorage> storage,
                              bool release, const Tensor *tensor,
                              CompletionCallback done) {
  auto describe = [&] {
    return tensor ? tensor->describe() : storage->describe();
  };
  ResidencyRecord &r = storage->record;
  std::unique_lock<std::mutex> lock(r.mutex_);
  r.waitUntilIdleLocked(lock);
  switch (r.state_) {
  case ResidencyState::Host:
    lock.unlock();
    return done(Error::success());
  case ResidencyState::Lost:
    lock.unlock();
    return done(makeError(ErrorCode::DeviceLost, "transferFromDevice of " +
                                                     describe() +
                                                     ": its device was lost"));
  case ResidencyState::Device:
  case ResidencyState::Mirrored:
    break;
  }
  if (r.manager_ != this) {
    std::string other = r.manager_->name();
    lock.unlock();
    return done(makeError(ErrorCode::InvalidArgument,
                          "transferFromDevice of " + describe() +
                              " from device '" + name() +
                              "': it is resident on device '" + other + "'"));
  }
  DeviceLocation location = r.location_;
  if (r.state_ == ResidencyState::Mirrored) {
    if (!release) {
      lock.unlock();
      return done(Error::success());
    }
    r.place(ResidencyState::Host, nullptr, {});
    lock.unlock();
    return done(releaseResident(location, *storage));
  }
  r.setBusy(true);
  lock.unlock();
  std::shared_ptr<TensorStorage> forFetch = storage;
  fetchToHost(
      std::move(forFetch), location, release,
      [storage = std::move(storage), done = std::move(done)](Error e) mutable {
        storage->record.releaseBusy();
        storage.reset();
        done(std::move(e));
      });
}

Error DeviceManager::releaseDeviceTensor(Tensor &tensor) {
  tensor.requireNonEmpty("releaseDeviceTensor");
  if (!tensor.coversStorage())
    return makeError(ErrorCode::InvalidArgument,
                     "releaseDeviceTensor of " + tensor.describe() +
                         ": a partial view cannot release residency");
  std::shared_ptr<TensorStorage> storage = tensor.storage_;
  ResidencyRecord &r = storage->record;
  std::unique_lock<std::mutex> lock(r.mutex_);
  r.waitUntilIdleLocked(lock);
  switch (r.state_) {
  case ResidencyState::Host:
    return Error::success();
  case ResidencyState::Lost:
    r.setState(ResidencyState::Host);
    return Error::success();
  case ResidencyState::Device:
  case ResidencyState::Mirrored:
    break;
  }
  if (r.manager_ != this)
    return makeError(ErrorCode::InvalidArgument,
                     "releaseDeviceTensor of " + tensor.describe() +
                         " on device '" + name() +
                         "': it is resident on device '" + r.manager_->name() +
                         "'");
  DeviceLocation location = r.location_;
  r.place(ResidencyState::Host, nullptr, {});
  lock.unlock();
  return releaseResident(location, *storage);
}

Expected<DeviceLocation> DeviceManager::allocateDeviceMemory(uint64_t bytes) {
  if (shutDown_)
    return makeError(ErrorCode::DeviceLost,
                     "allocateDeviceMemory(" + std::to_string(bytes) +
                         "): device '" + name() + "' is shut down");
  if (bytes == 0)
    return makeError(ErrorCode::InvalidArgument,
                     "allocateDeviceMemory on device '" + name() + "': size 0");
  if (!capabilities().residentTensors)
    return makeError(ErrorCode::NotSupported,
                     "allocateDeviceMemory on device '" + name() +
                         "': the device does not keep tensors resident");
  Expected<DeviceLocation> location = allocate(bytes);
  if (location) {
    // A device that hands out a value again has freed it: a record's
    // release of it that has yet to unregister it must not make the new
    // allocation look like a tensor's.
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = resident_.find(location->value);
    if (it != resident_.end() && it->second.releasing)
      resident_.erase(it);
  }
  return location;
}

Error DeviceManager::releaseDeviceMemory(DeviceLocation location) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = resident_.find(location.value); it != resident_.end())
      return makeError(ErrorCode::InvalidArgument,
                       "releaseDeviceMemory(" + location.toString() +
                           ") on device '" + name() +
                           (it->second.releasing
                                ? "': the location was a tensor's device "
                                  "copy, released since"
                                : "': the location belongs to a tensor; "
                                  "release the tensor instead"));
  }
  if (shutDown_)
    return makeError(ErrorCode::InvalidArgument,
                     "releaseDeviceMemory(" + location.toString() +
                         "): device '" + name() +
                         "' is shut down and its locations are gone");
  if (Error e = free(location))
    return makeError(e.code(), "releaseDeviceMemory(" + location.toString() +
                                   ") on device '" + name() +
                                   "': " + e.message());
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Networks and runs.
//===----------------------------------------------------------------------===//

namespace {
/// Returns, holding \p lock, once no add or evict of network \p name is
/// under way on the device whose networks are \p networks (such a change
/// holds a null entry while it calls the backend). Changes are short
/// (a compile, an evict), so the wait yields rather than sleeps.
std::map<std::string, std::shared_ptr<const Function>>::iterator
settledNetwork(std::map<std::string, std::shared_ptr<const Function>> &networks,
               std::unique_lock<std::mutex> &lock, const std::string &name) {
  for (;;) {
    auto it = networks.find(name);
    if (it == networks.end() || it->second)
      return it;
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
}
} // namespace

void DeviceManager::addNetwork(Function function, CompletionCallback done) {
  if (shutDown_)
    return done(makeError(ErrorCode::DeviceLost,
                          "addNetwork '" + function.name() + "': device '" +
                              name() + "' is shut down"));
  if (Error e = function.verify())
    return done(std::move(e));
  // The name is taken (a null entry) before the backend compiles, so that
  // an add or evict of the same name on another thread waits for this one
  // instead of interleaving its backend calls with it: an evict whose
  // evictFunction() came after this compile would drop the new network's
  // code.
  const std::string key = function.name();
  bool present;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    present = settledNetwork(networks_, lock, key) != networks_.end();
    if (!present)
      networks_[key] = nullptr;
  }
  if (present)
    return done(makeError(ErrorCode::InvalidArgument,
                          "addNetwork: network '" + key +
                              "' is already on device '" + name() + "'"));
  if (Error e = compileFunction(function)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = networks_.find(key); it != networks_.end() && !it->second)
        networks_.erase(it);
    }
    return done(std::move(e));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    networks_[key] = std::make_shared<const Function>(std::move(function));
  }
  done(Error::success());
}

void DeviceManager::evictNetwork(const std::string &name,
                                 CompletionCallback done) {
  // The entry stays, null, while the backend evicts (see addNetwork):
  // runs and lookups no longer find the network, and an add of the name
  // waits until evictFunction() has returned.
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = settledNetwork(networks_, lock, name);
    if (it == networks_.end()) {
      lock.unlock();
      return done(makeError(ErrorCode::InvalidArgument,
                            "evictNetwork: no network '" + name +
                                "' on device '" + this->name() + "'"));
    }
    it->second = nullptr;
  }
  evictFunction(name);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = networks_.find(name); it != networks_.end() && !it->second)
      networks_.erase(it);
  }
  done(Error::success());
}

bool DeviceManager::hasNetwork(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = networks_.find(name);
  return it != networks_.end() && it->second;
}

std::vector<std::string>
DeviceManager::outputsOf(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = networks_.find(name);
  if (it == networks_.end() || !it->second)
    return {};
  return it->second->outputNames();
}

void DeviceManager::runFunction(const std::string &name,
                                ExecutionContext &context,
                                CompletionCallback done) {
  if (shutDown_)
    return done(makeError(ErrorCode::DeviceLost,
                          "run of network '" + name + "': device '" +
                              this->name() + "' is shut down"));
  auto run = std::make_shared<RunState>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = networks_.find(name); it != networks_.end())
      run->function = it->second;
  }
  if (!run->function)
    return done(makeError(ErrorCode::InvalidArgument,
                          "run: no network '" + name + "' on device '" +
                              this->name() + "'"));
  context.setLastNetwork(name);
  run->done = std::move(done);
  if (Error e = stageRun(*run, context))
    return finishRun(run, std::move(e));
  auto op =
      beginOperation("run of network '" + name + "'",
                     [this, run](Error e) { finishRun(run, std::move(e)); });
  submit(op,
         [&] { execute(*run->function, run->arguments, completionFor(op)); });
}

Error DeviceManager::stageRun(RunState &run, ExecutionContext &context) {
  const Function &fn = *run.function;
  const auto &placeholders = fn.placeholders();
  std::string where =
      "run of network '" + fn.name() + "' on device '" + name() + "'";
  std::vector<Tensor *> bound(placeholders.size());
  for (size_t i = 0; i < placeholders.size(); ++i) {
    const Placeholder &p = placeholders[i];
    Tensor *t = context.bindings().get(p.name);
    if (!t)
      return makeError(ErrorCode::InvalidArgument,
                       where + ": placeholder '" + p.name + "' is not bound");
    t->requireNonEmpty("runFunction");
    if (t->type() != p.type)
      return makeError(ErrorCode::InvalidArgument,
                       where + ": placeholder '" + p.name + "' is " +
                           p.type.toString() + ", the bound " + t->describe() +
                           " is not");
    bound[i] = t;
  }
  for (size_t i = 0; i < placeholders.size(); ++i) {
    if (!fn.isOutput(placeholders[i].name))
      continue;
    if (!bound[i]->coversStorage())
      return makeError(ErrorCode::InvalidArgument,
                       where + ": output '" + placeholders[i].name +
                           "' is bound to a partial view");
    for (size_t j = 0; j < placeholders.size(); ++j)
      if (j != i && bound[j]->sharesResidencyWith(*bound[i]))
        return makeError(ErrorCode::InvalidArgument,
                         where + ": output '" + placeholders[i].name +
                             "' shares its storage with placeholder '" +
                             placeholders[j].name + "'");
  }
  // Hold every distinct record busy for the whole run. A device that
  // performs runs in order lets a run join earlier ones on its resident
  // records instead of waiting for them, unless its outputs come back to
  // the host (which changes what the next run finds).
  Capabilities caps = capabilities();
  bool keepsResident = caps.residentTensors;
  bool mayJoin =
      caps.inOrderRuns && keepsResident && !config_.copyDeviceTensorsToHost;
  // A run waits for one record while it holds others: every run takes its
  // records in one order (their addresses), so that two runs on other
  // threads that bind the same records in other orders never wait for
  // each other in a cycle.
  std::vector<std::shared_ptr<TensorStorage>> records;
  for (Tensor *t : bound)
    records.push_back(t->storage_);
  std::sort(records.begin(), records.end(),
            [](const std::shared_ptr<TensorStorage> &a,
               const std::shared_ptr<TensorStorage> &b) {
              return std::less<const TensorStorage *>()(a.get(), b.get());
            });
  records.erase(std::unique(records.begin(), records.end()), records.end());
  for (std::shared_ptr<TensorStorage> &storage : records) {
    std::unique_lock<std::mutex> lock(storage->record.mutex_);
    storage->record.acquireForRun(lock, this, mayJoin);
    run.held.push_back(std::move(storage));
  }

  run.arguments.resize(placeholders.size());
  for (size_t i = 0; i < placeholders.size(); ++i) {
    Tensor &t = *bound[i];
    std::shared_ptr<TensorStorage> storage = t.storage_;
    ResidencySnapshot s = storage->record.snapshot();
    if (fn.isOutput(placeholders[i].name)) {
      if ((s.state == ResidencyState::Device ||
           s.state == ResidencyState::Mirrored) &&
          s.manager == this) {
        run.outputs.push_back({storage, s.location, false});
        run.arguments[i] = {s.location, 0};
        continue;
      }
      if (s.state == ResidencyState::Device ||
          s.state == ResidencyState::Mirrored) {
        // The run overwrites the output: its copy elsewhere is dropped.
        {
          std::lock_guard<std::mutex> lock(storage->record.mutex_);
          storage->record.place(ResidencyState::Host, nullptr, {});
        }
        if (Error e = s.manager->releaseResident(s.location, *storage))
          s.manager->noteBackgroundError(std::move(e));
      }
      Expected<DeviceLocation> loc = allocate(storage->size());
      if (!loc)
        return loc.takeError();
      run.outputs.push_back({storage, *loc, true});
      run.arguments[i] = {*loc, 0};
      continue;
    }
    if (s.state == ResidencyState::Lost)
      return makeError(ErrorCode::DeviceLost,
                       where + ": input '" + placeholders[i].name + "' (" +
                           t.describe() + ") was lost with its device");
    if (s.state == ResidencyState::Device && s.manager != this) {
      // Inputs on another device move here (or, without resident tensors,
      // come back to host and are copied in below).
      // Never blocks for ever on synchronous devices that drop a completion.
      Error e = waitForCompletionOn(
          {this, s.manager},
          "the move of input '" + placeholders[i].name + "' for " + where,
          [&](CompletionCallback cb) {
            if (keepsResident)
              moveHere(storage, std::nullopt, std::move(cb));
            else
              s.manager->fetchToHost(storage, s.location, true, std::move(cb));
          });
      if (e)
        return e;
      s = storage->record.snapshot();
    }
    if ((s.state == ResidencyState::Device ||
         s.state == ResidencyState::Mirrored) &&
        s.manager == this) {
      run.arguments[i] = {s.location, t.offsetInBytes()};
      continue;
    }
    Expected<DeviceLocation> temp = allocate(t.sizeInBytes());
    if (!temp)
      return temp.takeError();
    run.temporaries.push_back(*temp);
    std::string copyIn =
        "copy-in of input '" + placeholders[i].name + "' for " + where;
    Error e = waitForCompletionOn({this}, copyIn, [&](CompletionCallback cb) {
      auto op = beginOperation(copyIn, std::move(cb));
      submit(op, [&] {
        copyToDevice(*temp, storage->data() + t.offsetInBytes(),
                     t.sizeInBytes(), completionFor(op));
      });
    });
    if (e)
      return e;
    run.arguments[i] = {*temp, 0};
  }
  return Error::success();
}

void DeviceManager::finishRun(std::shared_ptr<RunState> run, Error error) {
  for (DeviceLocation temp : run->temporaries)
    if (Error e = releaseFromRecord(temp, "a run's input copy"))
      noteBackgroundError(std::move(e));
  if (error.isSuccess()) {
    for (auto &out : run->outputs) {
      ResidencyRecord &r = out.storage->record;
      std::unique_lock<std::mutex> lock(r.mutex_);
      if (!registerResident(out.storage, out.location)) {
        error = makeError(ErrorCode::DeviceLost,
                          "device '" + name() + "' was shut down during a run");
        break;
      }
      r.place(ResidencyState::Device, this, out.location);
      out.storage->markHostStale();
    }
  }
  if (error) {
    for (auto &out : run->outputs) {
      ResidencyRecord &r = out.storage->record;
      std::unique_lock<std::mutex> lock(r.mutex_);
      if (!out.allocatedForRun) {
        // The run may have written part of it: the host copy is stale.
        if (r.state_ == ResidencyState::Mirrored) {
          r.setState(ResidencyState::Device);
          out.storage->markHostStale();
        }
        continue;
      }
      if (r.state_ == ResidencyState::Device)
        continue;
      lock.unlock();
      if (Error e = releaseFromRecord(out.location, *out.storage))
        noteBackgroundError(std::move(e));
    }
  }
  for (auto &held : run->held)
    held->record.releaseBusy();
  bool toHost =
      config_.copyDeviceTensorsToHost || !capabilities().residentTensors;
  if (error || !toHost || run->outputs.empty()) {
    CompletionCallback done = std::move(run->done);
    run->held.clear();
    run->outputs.clear();
    return done(std::move(error));
  }
  // Bring every output back, then report once.
  struct Gather {
    std::mutex mutex;
    size_t left;
    Error first;
    CompletionCallback done;
  };
  auto gather = std::make_shared<Gather>();
  gather->left = run->outputs.size();
  gather->done = std::move(run->done);
  // By record, not by tensor: the program may destroy its tensors while
  // the run is in flight.
  std::vector<std::shared_ptr<TensorStorage>> outputs;
  for (auto &out : run->outputs)
    outputs.push_back(std::move(out.storage));
  run->held.clear();
  run->outputs.clear();
  for (auto &out : outputs)
    bringHome(std::move(out), /*release=*/true, nullptr, [gather](Error e) {
      std::unique_lock<std::mutex> lock(gather->mutex);
      if (e && gather->first.isSuccess())
        gather->first = std::move(e);
      if (--gather->left)
        return;
      Error result = std::move(gather->first);
      lock.unlock();
      gather->done(std::move(result));
    });
}

} // namespace drt
