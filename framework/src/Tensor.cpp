//===- Tensor.cpp - Tensors, views and host access
//-------------------------===//
#include "drt/Tensor.h"
#include "drt/DeviceManager.h"
#include "drt/HostMemory.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"

#include "TensorChecks.h"
#include "TensorStorage.h"
#include "ViolationReport.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>

namespace drt {

namespace {
/// Empty when \p type is valid, else why not.
std::string typeProblem(const Type &type) {
  if (type.dims.empty())
    return "has no dimensions";
  size_t elements = 1;
  for (size_t d : type.dims) {
    if (d == 0)
      return "has a zero dimension";
    if (elements > MaxTensorBytes / d)
      return "is larger than " + std::to_string(MaxTensorBytes) + " bytes";
    elements *= d;
  }
  if (elements > MaxTensorBytes / elemSize(type.kind))
    return "is larger than " + std::to_string(MaxTensorBytes) + " bytes";
  return {};
}
} // namespace

HostMemory::~HostMemory() = default;

std::string_view residencyStateName(ResidencyState state) {
  switch (state) {
  case ResidencyState::Host:
    return "host";
  case ResidencyState::Device:
    return "device";
  case ResidencyState::Mirrored:
    return "mirrored";
  case ResidencyState::Lost:
    return "lost";
  }
  return "?";
}

namespace {
/// The next record version (ResidencyRecord::version), process-wide.
std::atomic<uint64_t> nextRecordVersion{1};
} // namespace

uint64_t ResidencyRecord::freshVersion() {
  return nextRecordVersion.fetch_add(1, std::memory_order_relaxed);
}

void ResidencyRecord::settleIfShutDown() {
  if (!manager_ ||
      (state_ != ResidencyState::Device &&
       state_ != ResidencyState::Mirrored) ||
      !manager_->isShutDown())
    return;
  // A mirrored record still has a valid host copy; a device-only one is
  // lost. The shutdown frees the device memory and skips the record.
  place(state_ == ResidencyState::Mirrored ? ResidencyState::Host
                                           : ResidencyState::Lost,
        nullptr, {});
}

ResidencySnapshot ResidencyRecord::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // A look is enough to see a shutdown under way (semantics, section 6): a
  // record that no operation holds on a device that already refuses work
  // takes the state the shutdown gives it, as a wait for it would.
  if (!busy())
    const_cast<ResidencyRecord *>(this)->settleIfShutDown();
  return {state_, manager_, location_, busy(),
          version_.load(std::memory_order_relaxed)};
}

void ResidencyRecord::waitUntilIdle() const {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return !busy(); });
}

namespace {
/// Live HostGuardScope objects, process-wide.
std::atomic<int> hostGuardScopes{0};

/// The pattern of guard byte \p i (counted from the storage's bytes
/// outwards): not a constant, so that a backend that fills past a buffer
/// with one value changes it.
std::byte guardByte(size_t i) { return std::byte(uint8_t(0xa5 ^ (i * 0x3b))); }

/// Writes the pattern into the \p before guard bytes before \p bytes at
/// \p data and the \p after ones after them.
void writeGuards(std::byte *data, size_t bytes, size_t before, size_t after) {
  for (size_t i = 0; i < before; ++i)
    data[-1 - std::ptrdiff_t(i)] = guardByte(i);
  for (size_t i = 0; i < after; ++i)
    data[bytes + i] = guardByte(i);
}

/// The pageable block of \p total bytes, 64-byte aligned.
std::byte *pageableBlock(size_t total) {
  return static_cast<std::byte *>(
      ::operator new[](total, std::align_val_t(TensorStorage::Alignment)));
}
} // namespace

HostGuardScope::HostGuardScope() {
  hostGuardScopes.fetch_add(1, std::memory_order_relaxed);
}

HostGuardScope::~HostGuardScope() {
  hostGuardScopes.fetch_sub(1, std::memory_order_relaxed);
}

bool hostGuardsEnabled() {
  return hostGuardScopes.load(std::memory_order_relaxed) > 0;
}

TensorStorage::HostBytes::~HostBytes() {
  std::byte *base = data - guard;
  if (memory)
    memory->deallocate(base, size + 2 * guard);
  else if (block.mapping)
    freeGuardedHostBlock(block, size);
  else
    ::operator delete[](base, std::align_val_t(Alignment));
}

TensorStorage::HostBytes TensorStorage::pageableBytes(size_t bytes,
                                                      size_t guard) {
  if (guard && bytes >= GuardedBlockMinBytes)
    if (GuardedHostBlock block = allocateGuardedHostBlock(bytes, guard);
        block.data)
      return {block.data,       bytes,   block.guardBefore,
              block.guardAfter, nullptr, block};
  return {pageableBlock(bytes + 2 * guard) + guard,
          bytes,
          guard,
          guard,
          nullptr,
          {}};
}

TensorStorage::TensorStorage(size_t bytes, std::string name, size_t guard,
                             Contents contents)
    : data_(pageableBytes(bytes, guard)), name_(std::move(name)) {
  // A creator that writes every byte next (a tensor filled as it is made)
  // saves a pass over the bytes: for large tensors, most of creating one.
  if (contents == Contents::Zeroed)
    std::memset(data_.data, 0, bytes);
  writeGuards(data_.data, bytes, data_.guard, data_.guardAfter);
}

TensorStorage::TensorStorage(size_t bytes, std::string name, size_t guard,
                             std::byte *base,
                             std::shared_ptr<HostMemory> memory)
    : data_{base + guard, bytes, guard, guard, std::move(memory), {}},
      name_(std::move(name)) {
  std::memset(data_.data, 0, bytes);
  writeGuards(data_.data, bytes, guard, guard);
}

std::string TensorStorage::takeGuardDamage() {
  std::byte *data = data_.data;
  size_t bytes = data_.size;
  // The first changed byte on each side, nearest the storage's bytes.
  std::optional<size_t> before, after;
  for (size_t i = 0; i < data_.guard; ++i)
    if (data[-1 - std::ptrdiff_t(i)] != guardByte(i)) {
      before = i;
      break;
    }
  for (size_t i = 0; i < data_.guardAfter; ++i)
    if (data[bytes + i] != guardByte(i)) {
      after = i;
      break;
    }
  if (!before && !after)
    return {};
  writeGuards(data, bytes, data_.guard, data_.guardAfter);
  std::string damage;
  if (before)
    damage =
        "the byte " + std::to_string(*before + 1) + " before its start changed";
  if (after)
    damage += std::string(before ? " and " : "") + "the byte at offset " +
              std::to_string(bytes + *after) + " (" +
              std::to_string(*after + 1) + " past its end) changed";
  return damage;
}

void TensorStorage::markHostStale() {
  if (data_.guard)
    std::memset(data_.data, int(StaleHostByte), data_.size);
}

TensorStorage::~TensorStorage() {
  // No operation can be pending: every pending operation holds a reference.
  // The host bytes go after this body (a member).
  ResidencySnapshot s = record.snapshot();
  if (s.state != ResidencyState::Device && s.state != ResidencyState::Mirrored)
    return;
  if (Error e = s.manager->releaseResident(s.location, *this))
    s.manager->noteBackgroundError(std::move(e));
}

std::string TensorStorage::describe() const { return describe(name_, size()); }

std::string TensorStorage::describe(std::string_view name, size_t bytes) {
  return "tensor '" + std::string(name) + "' (" + std::to_string(bytes) +
         " bytes)";
}

Tensor::Tensor(ElemKind kind, std::vector<size_t> dims, std::string name)
    : Tensor(Type{kind, std::move(dims)}, std::move(name)) {}

Tensor::Tensor(Type type, std::string name)
    : type_(std::move(type)), name_(std::move(name)) {
  makeHostStorage(true);
}

Tensor::Tensor(Type type, std::string name,
               FunctionRef<void(std::span<std::byte>)> fill)
    : type_(std::move(type)), name_(std::move(name)) {
  makeHostStorage(false);
  fill(std::span(storage_->data(), storage_->size()));
}

void Tensor::makeHostStorage(bool zeroed) {
  std::string problem = typeProblem(type_);
  if (!problem.empty())
    reportViolation(ViolationKind::InvalidTensorType,
                    "tensor '" + name_ + "' of type " + type_.toString() + " " +
                        problem);
  storage_ = std::make_shared<TensorStorage>(
      type_.sizeInBytes(), name_, hostGuardsEnabled() ? HostGuardBytes : 0,
      zeroed ? TensorStorage::Contents::Zeroed
             : TensorStorage::Contents::WrittenByCreator);
}

Expected<Tensor> Tensor::create(Type type, std::string name) {
  std::string problem = typeProblem(type);
  if (!problem.empty())
    return makeError(ErrorCode::InvalidArgument,
                     "cannot create tensor '" + name + "': type " +
                         type.toString() + " " + problem);
  try {
    return Tensor(std::move(type), name);
  } catch (const std::bad_alloc &) {
    return makeError(ErrorCode::OutOfMemory, "cannot create tensor '" + name +
                                                 "': host allocation failed");
  }
}

Expected<Tensor> Tensor::create(Type type, std::string name,
                                std::shared_ptr<HostMemory> memory) {
  if (!memory)
    return create(std::move(type), std::move(name));
  std::string problem = typeProblem(type);
  if (!problem.empty())
    return makeError(ErrorCode::InvalidArgument,
                     "cannot create tensor '" + name + "': type " +
                         type.toString() + " " + problem);
  size_t guard = hostGuardsEnabled() ? HostGuardBytes : 0;
  size_t total = type.sizeInBytes() + 2 * guard;
  Expected<std::byte *> data = memory->allocate(total);
  if (!data)
    return makeError(data.takeError().code(), "cannot create tensor '" + name +
                                                  "' in " + memory->describe() +
                                                  ": " +
                                                  data.takeError().message());
  Tensor tensor;
  try {
    tensor.storage_ = std::make_shared<TensorStorage>(type.sizeInBytes(), name,
                                                      guard, *data, memory);
  } catch (const std::bad_alloc &) {
    // The storage never took the block over: it goes back here.
    memory->deallocate(*data, total);
    return makeError(ErrorCode::OutOfMemory, "cannot create tensor '" + name +
                                                 "' in " + memory->describe() +
                                                 ": host allocation failed");
  }
  tensor.type_ = std::move(type);
  tensor.name_ = std::move(name);
  return tensor;
}

bool Tensor::isPinned() const {
  return storage_ && storage_->memory() && storage_->memory()->isPinned();
}

Tensor::Tensor(Tensor &&other) noexcept
    : storage_(std::move(other.storage_)), type_(std::move(other.type_)),
      offset_(other.offset_), isView_(other.isView_),
      name_(std::move(other.name_)) {
  other.type_ = Type{};
  other.offset_ = 0;
  other.isView_ = false;
}

Tensor &Tensor::operator=(Tensor &&other) noexcept {
  if (this == &other)
    return *this;
  // Dropping the old reference first releases the target's device memory
  // (when it was the last reference) before the new contents arrive.
  storage_.reset();
  storage_ = std::move(other.storage_);
  type_ = std::move(other.type_);
  offset_ = other.offset_;
  isView_ = other.isView_;
  name_ = std::move(other.name_);
  other.type_ = Type{};
  other.offset_ = 0;
  other.isView_ = false;
  return *this;
}

Tensor::~Tensor() = default;

std::string Tensor::describe() const {
  return "tensor '" + name_ + "' (" + type_.toString() + ", " +
         std::to_string(sizeInBytes()) + " bytes)";
}

size_t Tensor::storageSizeInBytes() const {
  return storage_ ? storage_->size() : 0;
}

bool Tensor::coversStorage() const {
  return storage_ && offset_ == 0 && sizeInBytes() == storage_->size();
}

Tensor Tensor::getUnowned(std::vector<size_t> dims,
                          size_t offsetElements) const {
  requireNonEmpty("getUnowned");
  Type viewType{type_.kind, std::move(dims)};
  std::string problem = typeProblem(viewType);
  size_t elements = type_.numElements();
  if (problem.empty() && (offsetElements > elements ||
                          viewType.numElements() > elements - offsetElements))
    problem = "does not fit";
  if (!problem.empty())
    reportViolation(ViolationKind::ViewOutOfBounds,
                    "view " + viewType.toString() + " at element " +
                        std::to_string(offsetElements) + " of " + describe() +
                        ": " + problem);
  Tensor view;
  view.storage_ = storage_;
  view.type_ = std::move(viewType);
  view.offset_ = offset_ + offsetElements * elemSize(type_.kind);
  view.isView_ = true;
  view.name_ = name_;
  return view;
}

Tensor Tensor::clone() const {
  auto bytes = hostBytes();
  Tensor copy(type_, name_);
  std::memcpy(copy.storage_->data(), bytes.data(), bytes.size());
  return copy;
}

const ResidencyRecord &Tensor::residency() const {
  // Checked here rather than by a call: a sweep asks every tensor.
  if (!storage_) [[unlikely]]
    requireNonEmpty("residency");
  return storage_->record;
}

bool Tensor::sharesResidencyWith(const Tensor &other) const {
  return storage_ && storage_ == other.storage_;
}

namespace {
/// Whether host access of \p access ("host read of") to a tensor is a
/// violation while its record is in \p state on \p manager (called under
/// the record's lock). If it is, the violation is composed in
/// violation_detail::reported(), to be delivered once the lock is released.
/// \p describe names the tensor; \p lostAdvice ends the message of a lost
/// record.
template <typename Describe>
bool composeHostAccessViolation(ResidencyState state,
                                const DeviceManager *manager,
                                const char *access, const Describe &describe,
                                const char *lostAdvice) {
  if (state != ResidencyState::Device && state != ResidencyState::Lost)
    return false;
  ContractViolation &v = violation_detail::reported();
  v.message = access;
  v.message += describe();
  if (state == ResidencyState::Lost) {
    v.kind = ViolationKind::HostAccessWhileLost;
    v.message += lostAdvice;
    return true;
  }
  v.kind = ViolationKind::HostAccessWhileOnDevice;
  v.message += " while its data is on ";
  v.message += manager->name();
  v.message += " only";
  return true;
}
} // namespace

// The lock is taken in a block of its own: a lock held where the violation
// is thrown would stop the unwinding to release it.
std::span<const std::byte> Tensor::hostBytes() const {
  requireNonEmpty("host read");
  ResidencyRecord &r = storage_->record;
  if (r.hostAccess() & ResidencyRecord::HostReadable)
    return {storage_->data() + offset_, sizeInBytes()};
  bool violation;
  {
    std::unique_lock<std::mutex> lock(r.mutex_);
    r.waitUntilIdleLocked(lock);
    violation = composeHostAccessViolation(
        r.state_, r.manager_, "host read of ", [this] { return describe(); },
        " whose device was lost; refill it from the host");
  }
  if (violation)
    violation_detail::deliver();
  return {storage_->data() + offset_, sizeInBytes()};
}

std::span<std::byte> Tensor::mutableHostBytes() {
  requireNonEmpty("host write");
  ResidencyRecord &r = storage_->record;
  if (r.hostAccess() & ResidencyRecord::HostWritable)
    return {storage_->data() + offset_, sizeInBytes()};
  bool violation;
  DeviceManager *mirror = nullptr;
  DeviceLocation mirrorLocation;
  {
    std::unique_lock<std::mutex> lock(r.mutex_);
    r.waitUntilIdleLocked(lock);
    violation = composeHostAccessViolation(
        r.state_, r.manager_, "host write of ", [this] { return describe(); },
        " whose device was lost; use refillFromHost");
    if (!violation && r.state_ == ResidencyState::Mirrored) {
      mirror = r.manager_;
      mirrorLocation = r.location_;
      r.place(ResidencyState::Host, nullptr, {});
    }
  }
  if (violation)
    violation_detail::deliver();
  if (mirror) {
    if (Error e = mirror->releaseResident(mirrorLocation, *storage_))
      mirror->noteBackgroundError(std::move(e));
  }
  return {storage_->data() + offset_, sizeInBytes()};
}

Error Tensor::refillFromHost(std::span<const std::byte> bytes) {
  requireNonEmpty("refillFromHost");
  if (bytes.size() != sizeInBytes())
    return makeError(ErrorCode::InvalidArgument,
                     "refill of " + describe() + " with " +
                         std::to_string(bytes.size()) + " bytes");
  ResidencyRecord &r = storage_->record;
  std::unique_lock<std::mutex> lock(r.mutex_);
  r.waitUntilIdleLocked(lock);
  DeviceManager *mirror = nullptr;
  DeviceLocation mirrorLocation;
  // Host and busy while the bytes are copied, in one change: a transfer or
  // a host access another thread starts now waits for them instead of
  // reading a half-written buffer.
  switch (r.state_) {
  case ResidencyState::Device:
    reportViolation(ViolationKind::HostAccessWhileOnDevice,
                    "refill of " + describe() + " while its data is on " +
                        r.manager_->name() + " only");
  case ResidencyState::Lost:
    if (!coversStorage())
      return makeError(ErrorCode::InvalidArgument,
                       "refill of " + describe() +
                           ": a partial view cannot refill a lost record");
    r.placeBusy(ResidencyState::Host, r.manager_, r.location_);
    break;
  case ResidencyState::Mirrored:
    // The write makes the device copy stale: drop it, as a host write does.
    mirror = r.manager_;
    mirrorLocation = r.location_;
    r.placeBusy(ResidencyState::Host, nullptr, {});
    break;
  case ResidencyState::Host:
    r.setBusy(true);
    break;
  }
  lock.unlock();
  if (mirror) {
    if (Error e = mirror->releaseResident(mirrorLocation, *storage_))
      mirror->noteBackgroundError(std::move(e));
  }
  std::memcpy(storage_->data() + offset_, bytes.data(), bytes.size());
  r.releaseBusy();
  return Error::success();
}

Error Tensor::ensureOnHost() {
  requireNonEmpty("ensureOnHost");
  // A record on its way to a device is Host until its upload completes:
  // like every command, this one waits for what is in flight on the record
  // before it looks (semantics §3, busy records).
  residency().waitUntilIdle();
  ResidencySnapshot s = residency().snapshot();
  if (s.state == ResidencyState::Host)
    return Error::success();
  if (s.state == ResidencyState::Lost)
    return makeError(ErrorCode::DeviceLost,
                     "ensureOnHost of " + describe() +
                         ": its device was lost; refill it from the host");
  return transferFromDeviceSync(*s.manager, *this, /*release=*/true);
}

} // namespace drt
