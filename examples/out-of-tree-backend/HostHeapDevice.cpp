//===- HostHeapDevice.cpp - A backend built against the installed drt -----===//
//
// Backend "host-heap": a device whose memory is one heap in host memory,
// carved by its own first-fit free-list allocator, with generation-checked
// locations (drt::LocationTable) so that a stale handle never reaches the
// heap. Every hook completes before it returns (no asynchronous completion).
// Faults are injected through drt::FaultPlan. Parameter resident=0 declares
// no resident tensors: the framework then refuses transfers and brings run
// outputs to host by itself.
//
// It uses only the installed package: see docs/backends.md in drt.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/DeviceManager.h"
#include "drt/FaultPlan.h"
#include "drt/LocationTable.h"

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace {

using namespace drt;

constexpr uint64_t DefaultBudget = uint64_t(256) << 20;
/// Blocks of the heap are multiples of this (the physical measure).
constexpr uint64_t Granule = 64;

uint64_t roundUp(uint64_t bytes) {
  return (std::max<uint64_t>(bytes, 1) + Granule - 1) / Granule * Granule;
}

/// Offsets into the heap: first fit from a free list of holes that merge with
/// their neighbours on release. When no hole fits, the heap grows at its end,
/// so whether an allocation fits is decided by the budget alone, never by
/// fragmentation (the contract compares OutOfMemory across backends).
class FreeListAllocator {
public:
  uint64_t allocate(uint64_t bytes) {
    uint64_t size = roundUp(bytes);
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second < size)
        continue;
      uint64_t offset = it->first, left = it->second - size;
      holes_.erase(it);
      if (left)
        holes_[offset + size] = left;
      return offset;
    }
    uint64_t offset = end_;
    end_ += size;
    return offset;
  }
  void release(uint64_t offset, uint64_t bytes) {
    auto [it, inserted] = holes_.emplace(offset, roundUp(bytes));
    if (auto next = std::next(it);
        next != holes_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      holes_.erase(next);
    }
    if (it != holes_.begin())
      if (auto prev = std::prev(it); prev->first + prev->second == it->first) {
        prev->second += it->second;
        holes_.erase(it);
        it = prev;
      }
    // A hole at the end gives the heap back.
    if (it->first + it->second == end_) {
      end_ = it->first;
      holes_.erase(it);
    }
  }
  /// One past the highest byte in use.
  uint64_t end() const { return end_; }

private:
  std::map<uint64_t, uint64_t> holes_; // offset -> size
  uint64_t end_ = 0;
};

// The arithmetic of docs/semantics.md section 7. Float results are computed in
// double and rounded to the kind through float: each precision is at least
// twice the next one's plus two bits, so the double rounding is innocuous.
float fromHalf(uint16_t h) {
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0)
    return sign * std::ldexp(float(mantissa), -24);
  if (exponent == 31)
    return std::bit_cast<float>(uint32_t(h & 0x8000) << 16 | 0x7f800000u |
                                mantissa << 13);
  return std::bit_cast<float>(uint32_t(h & 0x8000) << 16 |
                              (exponent + 112) << 23 | mantissa << 13);
}

uint16_t toHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f), magnitude = x & 0x7fffffffu;
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  if (magnitude > 0x7f800000u)
    return sign | 0x7e00; // NaN
  if (magnitude >= 0x477ff000u)
    return sign | 0x7c00;      // 65520 and above round to infinity
  if (magnitude < 0x38800000u) // subnormal: units of 2^-24, exact scaling
    return sign | uint16_t(std::nearbyint(std::bit_cast<float>(magnitude) *
                                          16777216.0f));
  uint32_t mantissa = magnitude & 0x7fffff;
  uint32_t h = ((magnitude >> 23) - 112) << 10 | mantissa >> 13;
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h; // a carry into the exponent is the right result
  return sign | uint16_t(h);
}

float fromBFloat16(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

uint16_t toBFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

double loadFloat(ElemKind kind, const std::byte *p) {
  uint16_t half;
  float single;
  switch (kind) {
  case ElemKind::Float32:
    std::memcpy(&single, p, 4);
    return single;
  case ElemKind::Float16:
    std::memcpy(&half, p, 2);
    return fromHalf(half);
  default:
    std::memcpy(&half, p, 2);
    return fromBFloat16(half);
  }
}

void storeFloat(ElemKind kind, double value, std::byte *p) {
  float single = float(value);
  uint16_t half =
      kind == ElemKind::Float16 ? toHalf(single) : toBFloat16(single);
  if (kind == ElemKind::Float32)
    std::memcpy(p, &single, 4);
  else
    std::memcpy(p, &half, 2);
}

/// Computes \p node over \p count elements; integers wrap modulo 2^bits.
void computeNode(const Node &node, ElemKind kind, const std::byte *a,
                 const std::byte *b, std::byte *out, size_t count) {
  size_t size = elemSize(kind);
  if (node.op == OpKind::Copy) {
    std::memmove(out, a, count * size);
    return;
  }
  std::vector<std::byte> result(count * size);
  if (isFloatingPoint(kind)) {
    double factor = float(node.factor);
    if (kind != ElemKind::Float32) {
      std::byte bits[2];
      storeFloat(kind, factor, bits);
      factor = loadFloat(kind, bits);
    }
    for (size_t i = 0; i < count; ++i) {
      double x = loadFloat(kind, a + i * size);
      double y = b ? loadFloat(kind, b + i * size) : 0;
      double r = node.op == OpKind::Add     ? x + y
                 : node.op == OpKind::Mul   ? x * y
                 : node.op == OpKind::Scale ? x * factor
                                            : (x > 0 ? x : 0.0);
      storeFloat(kind, r, result.data() + i * size);
    }
  } else {
    uint64_t factor = uint64_t(int64_t(node.factor));
    for (size_t i = 0; i < count; ++i) {
      // Sign-extended (u8 zero-extended): the low bits of the wrapped 64-bit
      // result are the kind's wrapped result.
      auto load = [&](const std::byte *p) {
        int64_t v = 0;
        std::memcpy(&v, p, size);
        if (kind != ElemKind::UInt8 && size < 8)
          v = (v << (64 - 8 * size)) >> (64 - 8 * size);
        return v;
      };
      int64_t x = load(a + i * size), y = b ? load(b + i * size) : 0;
      uint64_t r = node.op == OpKind::Add     ? uint64_t(x) + uint64_t(y)
                   : node.op == OpKind::Mul   ? uint64_t(x) * uint64_t(y)
                   : node.op == OpKind::Scale ? uint64_t(x) * factor
                                              : uint64_t(x > 0 ? x : 0);
      std::memcpy(result.data() + i * size, &r, size);
    }
  }
  std::memcpy(out, result.data(), result.size());
}

class HostHeapDevice final : public DeviceManager {
public:
  explicit HostHeapDevice(DeviceConfig config)
      : DeviceManager(std::move(config)) {}
  ~HostHeapDevice() override { shutdown(); }

  static const std::vector<BackendParameter> &parameters() {
    static const std::vector<BackendParameter> declared = {
        BackendParameter::boolean("resident", true,
                                  "keep tensors resident; 0 declares no "
                                  "resident tensors")};
    return declared;
  }
  static Capabilities capabilitiesFor(bool resident) {
    Capabilities caps;
    caps.residentTensors = resident;
    caps.asynchronousCompletion = false;
    caps.peerToPeer = false;
    caps.memoryBudget = true;
    caps.faultInjection = true;
    caps.deviceLoss = true;
    return caps;
  }

  Error init() override {
    if (Error e = checkParameters(config(), parameters(), who()))
      return e;
    resident_ = *config().boolParameter("resident", true);
    budget_ = config().memoryBudget ? config().memoryBudget : DefaultBudget;
    // The heap is host memory: a budget the host cannot hold is refused.
    uint64_t host =
        uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
    if (budget_ > host)
      return makeError(ErrorCode::InvalidArgument,
                       who() + ": memory budget of " + std::to_string(budget_) +
                           " bytes is more than the host's " +
                           std::to_string(host) + " bytes of memory");
    return Error::success();
  }
  Error injectFault(const FaultSpec &fault) override {
    if (isShutDown())
      return makeError(ErrorCode::DeviceLost, who() + " is shut down");
    return faults_.add(fault);
  }
  Capabilities capabilities() const override {
    return capabilitiesFor(resident_);
  }
  uint64_t maximumMemory() const override { return budget_; }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }
  uint64_t physicalMemoryInUse() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return physical_;
  }
  size_t liveAllocations() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.size();
  }
  DeviceStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    if (Error e = strike(FaultSite::Allocation))
      return e;
    std::lock_guard<std::mutex> lock(mutex_);
    if (Error e = refuseIfStopped())
      return e;
    if (bytes > budget_ - used_)
      return makeError(ErrorCode::OutOfMemory,
                       who() + ": allocation of " + std::to_string(bytes) +
                           " bytes with " + std::to_string(used_) + " of " +
                           std::to_string(budget_) + " bytes in use");
    Block block{heap_.allocate(bytes), bytes};
    try {
      if (heap_.end() > memory_.size())
        memory_.resize(heap_.end());
    } catch (const std::bad_alloc &) {
      uint64_t wanted = heap_.end();
      heap_.release(block.offset, bytes);
      return makeError(ErrorCode::OutOfMemory,
                       who() + ": the host cannot hold " +
                           std::to_string(wanted) + " bytes of heap");
    }
    DeviceLocation location = blocks_.insert(block);
    if (location.isNull()) {
      heap_.release(block.offset, bytes);
      return makeError(ErrorCode::OutOfMemory,
                       who() + ": no handle is left for another allocation");
    }
    used_ += bytes;
    physical_ += roundUp(bytes);
    ++stats_.allocations;
    return location;
  }
  Error free(DeviceLocation location) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<Block> block = blocks_.erase(location);
    if (!block)
      return stale("free", location);
    heap_.release(block->offset, block->bytes);
    memory_.resize(heap_.end());
    used_ -= block->bytes;
    physical_ -= roundUp(block->bytes);
    ++stats_.frees;
    return Error::success();
  }
  Expected<uint64_t> allocationSize(DeviceLocation location) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const Block *block = blocks_.lookup(location))
      return block->bytes;
    return stale("size query", location);
  }
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (Error e = strike(FaultSite::TransferToDevice))
      return completeStruck(std::move(e), done);
    // The callback runs after the lock is released: it may call back in.
    done(copy(dst, bytes, [&](std::byte *device) {
      std::memcpy(device, src, bytes);
      ++stats_.transfersToDevice;
      stats_.bytesToDevice += bytes;
    }));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (Error e = strike(FaultSite::TransferFromDevice))
      return completeStruck(std::move(e), done);
    done(copy(src, bytes, [&](std::byte *device) {
      std::memcpy(dst, device, bytes);
      ++stats_.transfersFromDevice;
      stats_.bytesFromDevice += bytes;
    }));
  }
  Error compileFunction(const Function &) override {
    return Error::success(); // the framework verified it; nothing to build
  }
  void evictFunction(const std::string &) override {}
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    if (Error e = strike(FaultSite::Run))
      return completeStruck(std::move(e), done);
    done(run(function, arguments));
  }
  void shutdownBackend() override {
    // Nothing is ever in flight: every hook completed before returning.
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    blocks_.clear();
    heap_ = FreeListAllocator();
    memory_ = {};
    used_ = physical_ = 0;
  }

private:
  struct Block {
    uint64_t offset = 0, bytes = 0;
  };

  std::string who() const { return "host-heap device '" + name() + "'"; }
  /// The planned fault that strikes this operation at \p site, if any. An
  /// injected DeviceLost shuts the device down first.
  Error strike(FaultSite site) {
    // A DeviceLost strike refuses work at once: no operation counted after
    // it may succeed before the shutdown below.
    std::optional<ErrorCode> code =
        faults_.strike(site, [this] { refuseWork(); });
    if (!code)
      return Error::success();
    Error e(*code, "injected fault at " + std::string(faultSiteName(site)) +
                       " on " + who());
    if (*code == ErrorCode::DeviceLost)
      shutdown();
    return e;
  }
  /// Completes an operation a fault struck. After an injected DeviceLost,
  /// shutdown() has completed the operation in flight already (a second
  /// completion would be ignored as late), so none is made.
  static void completeStruck(Error e, const CompletionCallback &done) {
    if (e.code() != ErrorCode::DeviceLost)
      done(std::move(e));
  }
  Error stale(const std::string &what, DeviceLocation location) const {
    return makeError(ErrorCode::InvalidArgument,
                     who() + ": " + what + " of stale or unknown location " +
                         location.toString());
  }
  /// DeviceLost once shut down: a shutdown on another thread may have come
  /// since the framework looked, and taken the locations with it.
  Error refuseIfStopped() const {
    return stopped_ ? makeError(ErrorCode::DeviceLost, who() + " is shut down")
                    : Error::success();
  }
  template <typename Move>
  Error copy(DeviceLocation location, uint64_t bytes, Move move) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Error e = refuseIfStopped())
      return e;
    const Block *block = blocks_.lookup(location);
    if (!block)
      return stale("copy", location);
    if (bytes > block->bytes)
      return makeError(ErrorCode::InvalidArgument,
                       who() + ": copy of " + std::to_string(bytes) +
                           " bytes into an allocation of " +
                           std::to_string(block->bytes));
    move(memory_.data() + block->offset);
    return Error::success();
  }
  Error run(const Function &function,
            const std::vector<RunArgument> &arguments) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Error e = refuseIfStopped())
      return e;
    auto at = [&](const std::string &placeholder) -> std::byte * {
      int i = function.placeholderIndex(placeholder);
      const Block *block = blocks_.lookup(arguments.at(i).location);
      uint64_t offset = arguments[i].offsetBytes;
      uint64_t bytes = function.placeholders()[i].type.sizeInBytes();
      if (!block || offset > block->bytes || bytes > block->bytes - offset)
        return nullptr;
      return memory_.data() + block->offset + offset;
    };
    for (const Node &node : function.nodes()) {
      std::byte *a = at(node.inputs[0]), *out = at(node.output);
      std::byte *b = node.inputs.size() > 1 ? at(node.inputs[1]) : nullptr;
      if (!a || !out || (node.inputs.size() > 1 && !b))
        return makeError(ErrorCode::InvalidArgument,
                         who() + ": run of '" + function.name() +
                             "' with a stale or out-of-bounds argument");
      const Type &type = function.findPlaceholder(node.output)->type;
      computeNode(node, type.kind, a, b, out, type.numElements());
    }
    ++stats_.runs;
    return Error::success();
  }

  bool resident_ = true;
  uint64_t budget_ = DefaultBudget;
  mutable std::mutex mutex_;
  bool stopped_ = false;
  FaultPlan faults_;
  FreeListAllocator heap_;
  std::vector<std::byte> memory_;
  LocationTable<Block> blocks_;
  uint64_t used_ = 0, physical_ = 0;
  DeviceStats stats_;
};

BackendInfo hostHeapBackend() {
  BackendInfo info{
      "host-heap", "example: host memory carved by a free-list allocator",
      HostHeapDevice::capabilitiesFor(true), [](const DeviceConfig &config) {
        return std::unique_ptr<DeviceManager>(
            std::make_unique<HostHeapDevice>(config));
      }};
  info.parameters = HostHeapDevice::parameters();
  info.capabilitiesFor = [](const DeviceConfig &config) {
    return HostHeapDevice::capabilitiesFor(
        *config.boolParameter("resident", true));
  };
  return info;
}

DRT_REGISTER_BACKEND(hostHeapBackend());

} // namespace
