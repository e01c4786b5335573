//===- drt/Tensor.h - Tensors, views and residency --------------*- C++ -*-===//
//
// A Tensor has a type, host storage (64-byte aligned) and a residency record
// that says where its valid data lives. Views made by getUnowned() share the
// owner's storage AND its residency record; both are reference counted, so a
// view never dangles and device memory is released when the last tensor or
// view referring to it goes away.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_TENSOR_H
#define DRT_TENSOR_H

#include "drt/DeviceLocation.h"
#include "drt/Error.h"
#include "drt/FunctionRef.h"
#include "drt/Type.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace drt {

class DeviceManager;
class HostMemory;
class TensorStorage;

/// Where the valid copy of a record's data lives.
enum class ResidencyState {
  /// Host data valid; no device memory.
  Host,
  /// Valid data only on a device; host access is a violation.
  Device,
  /// Host and device copies are equal; host reads are allowed, the first
  /// mutable host access drops the device copy.
  Mirrored,
  /// The device that held the data is gone; any data access is a violation
  /// until the tensor is refilled from the host.
  Lost,
};

/// The state's name as used in scenario files ("host", "device", ...).
std::string_view residencyStateName(ResidencyState state);

/// A consistent snapshot of a residency record.
struct ResidencySnapshot {
  ResidencyState state = ResidencyState::Host;
  /// The device holding the data (Device and Mirrored), else nullptr.
  DeviceManager *manager = nullptr;
  /// The allocation on that device (Device and Mirrored), else null.
  DeviceLocation location;
  /// True while an asynchronous operation on the record is pending.
  bool busy = false;
  /// The record's version() when the snapshot was read.
  uint64_t version = 0;
};

/// The residency record shared by a tensor and all its views. Only the
/// framework changes it; everyone may observe it.
class ResidencyRecord {
public:
  ResidencyRecord() : version_(freshVersion()) {}
  ResidencyRecord(const ResidencyRecord &) = delete;
  ResidencyRecord &operator=(const ResidencyRecord &) = delete;

  /// The current state, manager, location and busy flag, read atomically.
  /// A record that no operation holds on a device being shut down shows the
  /// state the shutdown gives it (Lost, or Host for a mirrored one) from the
  /// moment the device refuses work, before the shutdown returns.
  ResidencySnapshot snapshot() const;
  /// The current state.
  ResidencyState state() const { return snapshot().state; }
  /// A number that names the record's current state, manager, location
  /// and busy flag, read without the record's lock: every change of those
  /// gives the record a number that no record has had before, so a version
  /// equal to one read earlier means the same record, unchanged since (a
  /// change being made on another thread shows once it is made). It lets an
  /// observer skip reading records that did not change.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  /// Blocks until no asynchronous operation is pending on the record.
  void waitUntilIdle() const;

private:
  friend class DeviceManager;
  friend class Tensor;
  friend class TensorStorage;

  /// Waits (under \p lock of mutex_) until idle. A record then left
  /// Device or Mirrored on a device being shut down takes the state the
  /// shutdown gives it (Lost, or Host) at once: from the moment a shutdown
  /// starts refusing work, no one may see the device's records as they
  /// were, or a history of a refusal then an observation of that state has
  /// no order (semantics, section 6).
  void waitUntilIdleLocked(std::unique_lock<std::mutex> &lock) {
    idle_.wait(lock, [&] { return !busy(); });
    settleIfShutDown();
  }
  /// The shutdown's change of a record resident (Device or Mirrored) on a
  /// device shut down; nothing for any other.
  void settleIfShutDown();
  /// Waits (under \p lock of mutex_) until idle, then marks the record busy.
  void acquire(std::unique_lock<std::mutex> &lock) {
    waitUntilIdleLocked(lock);
    setBusy(true);
  }
  /// acquire() for a run on \p manager. With \p mayJoin, a record resident
  /// on \p manager and busy only with runs on it is joined at once: the
  /// device performs runs in the order they are issued, and a run leaves
  /// such a record resident where it is whatever its outcome (unless the
  /// device is lost, when the joining run fails as it would after them), so
  /// the run stages what it would stage after them.
  void acquireForRun(std::unique_lock<std::mutex> &lock, DeviceManager *manager,
                     bool mayJoin) {
    if (mayJoin && holds_ && heldByRunsOf_ == manager && manager_ == manager &&
        (state_ == ResidencyState::Device ||
         state_ == ResidencyState::Mirrored)) {
      ++holds_;
      changed();
      return;
    }
    waitUntilIdleLocked(lock);
    setBusy(true);
    heldByRunsOf_ = manager;
  }
  /// Ends one operation's hold; the last one wakes the waiters.
  void releaseBusy() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      setBusy(false);
      if (busy())
        return;
    }
    idle_.notify_all();
  }
  bool busy() const { return holds_ != 0; }
  /// The only writers of the fields below (under mutex_): each change
  /// counts in version_.
  void place(ResidencyState state, DeviceManager *manager,
             DeviceLocation location) {
    state_ = state;
    manager_ = manager;
    location_ = location;
    changed();
  }
  void setState(ResidencyState state) {
    state_ = state;
    changed();
  }
  /// Starts (true) or ends (false) one operation's hold on the record.
  void setBusy(bool busy) {
    if (busy) {
      ++holds_;
      heldByRunsOf_ = nullptr;
    } else if (--holds_ == 0) {
      heldByRunsOf_ = nullptr;
    }
    changed();
  }
  /// place() and setBusy(true) as one change: a state between the two,
  /// which lock-free host access could act on, is never published.
  void placeBusy(ResidencyState state, DeviceManager *manager,
                 DeviceLocation location) {
    state_ = state;
    manager_ = manager;
    location_ = location;
    ++holds_;
    heldByRunsOf_ = nullptr;
    changed();
  }
  void changed() {
    hostAccess_.store(
        holds_ ? 0
        : state_ == ResidencyState::Host
            ? HostReadable | HostWritable
            : (state_ == ResidencyState::Mirrored ? HostReadable : 0),
        std::memory_order_release);
    version_.store(freshVersion(), std::memory_order_release);
  }
  /// Bits of hostAccess_: what host access needs no lock (no wait, no
  /// violation, no change of state) while the record holds still.
  static constexpr uint8_t HostReadable = 1, HostWritable = 2;
  /// Reads hostAccess_ for a host access made without the lock: a set bit,
  /// read with acquire, also makes visible the host bytes an operation
  /// wrote before it released the record.
  uint8_t hostAccess() const {
    return hostAccess_.load(std::memory_order_acquire);
  }
  /// A version no record has had (process-wide).
  static uint64_t freshVersion();

  mutable std::mutex mutex_;
  mutable std::condition_variable idle_;
  ResidencyState state_ = ResidencyState::Host;
  DeviceManager *manager_ = nullptr;
  DeviceLocation location_;
  /// Operations holding the record busy: one, or several runs joined by
  /// acquireForRun().
  unsigned holds_ = 0;
  /// The manager whose runs are all the record's holders, else nullptr.
  DeviceManager *heldByRunsOf_ = nullptr;
  std::atomic<uint64_t> version_;
  /// HostReadable and HostWritable of the fields above, kept by changed():
  /// host reads and writes, the most frequent calls on a record, skip the
  /// lock when nothing can stop them.
  std::atomic<uint8_t> hostAccess_{HostReadable | HostWritable};
};

/// A tensor: movable, not copyable. A moved-from tensor is empty; using it
/// (other than assigning to it, destroying it or asking isEmpty()) is a
/// violation.
class Tensor {
public:
  /// An empty tensor.
  Tensor() = default;
  /// A zero-filled host tensor. An invalid type (no elements, or a size that
  /// overflows) is a violation; use create() to get an Error instead.
  Tensor(ElemKind kind, std::vector<size_t> dims, std::string name = {});
  /// A zero-filled host tensor of \p type (see above).
  explicit Tensor(Type type, std::string name = {});
  /// A host tensor of \p type (see above) whose bytes are what \p fill
  /// writes into the span it is given, all of whose bytes it must write:
  /// the storage is not zero-filled first, which spares a creator that sets
  /// every byte (a pattern, a copy) a pass over the memory.
  Tensor(Type type, std::string name,
         FunctionRef<void(std::span<std::byte>)> fill);
  /// Creates a zero-filled host tensor, or InvalidArgument naming the tensor
  /// and the size when \p type has no elements or its size is impossible.
  static Expected<Tensor> create(Type type, std::string name = {});
  /// As create(type, name), with host storage from \p memory (pinned
  /// memory from DeviceManager::pinnedHostMemory; null: pageable). The
  /// residency rules are the same for every kind of storage; an allocation
  /// \p memory refuses is its Error (OutOfMemory) naming the tensor.
  static Expected<Tensor> create(Type type, std::string name,
                                 std::shared_ptr<HostMemory> memory);

  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
  /// Takes over \p other's storage and record; \p other becomes empty.
  Tensor(Tensor &&other) noexcept;
  /// Drops this tensor's reference (releasing device memory if it was the
  /// last one) and takes over \p other's. Self-move is a no-op.
  Tensor &operator=(Tensor &&other) noexcept;
  /// Drops this tensor's reference; the last reference releases device memory.
  ~Tensor();

  /// True for a default-constructed or moved-from tensor.
  bool isEmpty() const { return storage_ == nullptr; }
  /// The tensor's type (empty dims for an empty tensor).
  const Type &type() const { return type_; }
  /// The tensor's element kind.
  ElemKind elemKind() const { return type_.kind; }
  /// The tensor's shape.
  const std::vector<size_t> &dims() const { return type_.dims; }
  /// Bytes covered by this tensor (a view covers part of its storage).
  size_t sizeInBytes() const { return isEmpty() ? 0 : type_.sizeInBytes(); }
  /// The name used in messages.
  const std::string &name() const { return name_; }
  /// Renames the tensor (views get their own names).
  void setName(std::string name) { name_ = std::move(name); }

  /// True when the host storage is pinned memory a device DMAs directly
  /// (views share their owner's storage, and so its kind).
  bool isPinned() const;

  /// True for a tensor made by getUnowned().
  bool isView() const { return isView_; }
  /// Byte offset of this tensor within its storage.
  size_t offsetInBytes() const { return offset_; }
  /// Bytes of the storage shared with views (the unit that moves to devices).
  size_t storageSizeInBytes() const;
  /// True when this tensor covers its whole storage (an owner or a full view):
  /// only such tensors may be transferred or released.
  bool coversStorage() const;

  /// A view of \p dims elements starting \p offsetElements elements into this
  /// tensor. It shares this tensor's storage and residency record. A view
  /// outside this tensor is a ViewOutOfBounds violation.
  Tensor getUnowned(std::vector<size_t> dims, size_t offsetElements = 0) const;
  /// An independent copy: new pageable storage, new Host record, contents
  /// copied. Needs host-readable data (Host or Mirrored), else a violation.
  Tensor clone() const;

  /// The shared residency record; a violation for an empty tensor.
  const ResidencyRecord &residency() const;
  /// Shorthand for residency().snapshot().
  ResidencySnapshot residencySnapshot() const { return residency().snapshot(); }
  /// True when this tensor and \p other share one residency record.
  bool sharesResidencyWith(const Tensor &other) const;

  /// Read access to host data: allowed when Host or Mirrored (waiting for a
  /// pending operation first), a violation when Device or Lost.
  std::span<const std::byte> hostBytes() const;
  /// Write access to host data: allowed when Host; when Mirrored the device
  /// copy is released first and the record becomes Host; a violation when
  /// Device or Lost.
  std::span<std::byte> mutableHostBytes();
  /// Typed read access (see hostBytes()); T must match the element size.
  template <typename T> std::span<const T> hostData() const {
    auto b = hostBytes();
    return {reinterpret_cast<const T *>(b.data()), b.size() / sizeof(T)};
  }
  /// Typed write access (see mutableHostBytes()).
  template <typename T> std::span<T> mutableHostData() {
    auto b = mutableHostBytes();
    return {reinterpret_cast<T *>(b.data()), b.size() / sizeof(T)};
  }
  /// Overwrites this tensor's host data with \p bytes, which must be exactly
  /// sizeInBytes() long. Allowed when Host, Mirrored (device copy released) or
  /// Lost (the record becomes Host: this is how a lost tensor is refilled; a
  /// partial view cannot refill a lost record). A violation when Device.
  Error refillFromHost(std::span<const std::byte> bytes);

  /// Transfers this tensor's data back to host memory, releasing the device
  /// copy, and waits. Success when already on host.
  Error ensureOnHost();

private:
  friend class DeviceManager;
  friend class TensorStorage;

  /// Reports UseOfMovedFrom for \p operation on an empty tensor. Defined,
  /// inline, in the framework's sources only (TensorChecks.h).
  inline void requireNonEmpty(const char *operation) const;
  std::string describe() const;
  /// Checks type_ (a violation when invalid) and gives the tensor pageable
  /// storage for it, zero-filled when \p zeroed.
  void makeHostStorage(bool zeroed);

  std::shared_ptr<TensorStorage> storage_;
  Type type_;
  size_t offset_ = 0;
  bool isView_ = false;
  std::string name_;
};

} // namespace drt

#endif // DRT_TENSOR_H
