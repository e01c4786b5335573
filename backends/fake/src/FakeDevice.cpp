//===- FakeDevice.cpp - The reference device ------------------------------===//
#include "drt/fake/FakeDevice.h"

#include "drt/BackendRegistry.h"
#include "drt/HostMemory.h"

#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace drt::fake {

Capabilities fakeCapabilities(bool async, bool resident) {
  Capabilities caps;
  caps.residentTensors = resident;
  caps.asynchronousCompletion = async;
  caps.peerToPeer = false;
  caps.memoryBudget = true;
  caps.faultInjection = true;
  caps.deviceLoss = true;
  // One worker performs the queued work in order (async=1).
  caps.inOrderRuns = true;
  return caps;
}

namespace {

/// The physical memory of the host, which holds the simulated device memory.
uint64_t hostMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0)
    return std::numeric_limits<uint64_t>::max();
  return uint64_t(pages) * uint64_t(pageSize);
}

/// The capabilities of \p config's async and resident, which
/// checkParameters has accepted.
Capabilities capabilitiesOfConfig(const DeviceConfig &config) {
  return fakeCapabilities(*config.boolParameter("async", false),
                          *config.boolParameter("resident", true));
}

} // namespace

const std::vector<BackendParameter> &fakeParameters() {
  static const std::vector<BackendParameter> parameters = [] {
    BackendParameter alignment = BackendParameter::unsignedInRange(
        "alignment", 64, 1, 2097152,
        "physical allocation granule in bytes (physicalMemoryInUse rounds "
        "each allocation up to it)",
        {4096});
    alignment.powerOfTwo = true;
    BackendParameter seed = BackendParameter::unsignedInRange(
        "seed", 1, 0, std::numeric_limits<uint64_t>::max(),
        "seed of the completion delays of async=1");
    seed.seedsRandomness = true;
    BackendParameter maxDelay = BackendParameter::unsignedInRange(
        "max-delay-us", 200, 0, 1000000,
        "largest completion delay of async=1, in microseconds");
    maxDelay.untestedBecause =
        "async=1 with the seeded delays up to the default already varies "
        "the order of completions; the bound only stretches them";
    // Completions up to half a millisecond late: the next command of the
    // program meets one issued without waiting in flight.
    maxDelay.holdsOperationsWith = "500";
    return std::vector<BackendParameter>{
        BackendParameter::boolean(
            "async", false,
            "complete transfers and runs on a worker thread after seeded "
            "random delays (declares asynchronous completion)"),
        BackendParameter::boolean(
            "resident", true,
            "keep tensors resident; 0 declares no resident tensors (runs "
            "bring their outputs to host)"),
        seed,
        maxDelay,
        alignment,
    };
  }();
  return parameters;
}

BackendInfo fakeBackendInfo() {
  BackendInfo info{
      "fake",
      "reference device: simulated memory, seeded asynchronous completion, "
      "fault plans",
      fakeCapabilities(/*async=*/false, /*resident=*/true),
      [](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
        return std::make_unique<FakeDevice>(config);
      },
      false};
  info.parameters = fakeParameters();
  info.capabilitiesFor = capabilitiesOfConfig;
  return info;
}

namespace {
DRT_REGISTER_BACKEND(fakeBackendInfo());
} // namespace

FakeDevice::FakeDevice(DeviceConfig config)
    : DeviceManager(std::move(config)) {}

FakeDevice::~FakeDevice() {
  shutdown();
  // A shutdown started on the worker thread left it to finish by itself.
  if (worker_.joinable())
    worker_.join();
}

Error FakeDevice::init() {
  std::string who = "fake device '" + name() + "'";
  if (Error e = checkParameters(config(), fakeParameters(), who))
    return e;
  uint64_t hostMemory = hostMemoryBytes();
  if (config().memoryBudget > hostMemory)
    return makeError(
        ErrorCode::InvalidArgument,
        who + ": memory budget of " + std::to_string(config().memoryBudget) +
            " bytes is more than the host's " + std::to_string(hostMemory) +
            " bytes of memory, which simulate the device's "
            "(allowed: 0 for the default of " +
            std::to_string(DefaultMemoryBudget) + ", or 1 to " +
            std::to_string(hostMemory) + ")");
  // checkParameters accepted every value, so each one parses.
  async_ = *config().boolParameter("async", false);
  resident_ = *config().boolParameter("resident", true);
  alignment_ = *config().uintParameter("alignment", 64);
  maxDelayUs_ = *config().uintParameter("max-delay-us", 200);
  budget_ = config().memoryBudget ? config().memoryBudget : DefaultMemoryBudget;
  delays_.seed(*config().uintParameter("seed", 1));
  if (async_)
    worker_ = std::thread([this] { workerLoop(); });
  log("init " + std::string(async_ ? "async" : "sync") + " budget " +
      std::to_string(budget_));
  return Error::success();
}

Capabilities FakeDevice::capabilities() const {
  return fakeCapabilities(async_, resident_);
}

std::string FakeDevice::description() const {
  return "fake device '" + name() + "' (" + (async_ ? "async" : "sync") +
         ", budget " + std::to_string(budget_) + " bytes, alignment " +
         std::to_string(alignment_) + ")";
}

uint64_t FakeDevice::maximumMemory() const { return budget_; }

uint64_t FakeDevice::usedMemory() const { return used_.load(); }

uint64_t FakeDevice::physicalMemoryInUse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return physical_;
}

size_t FakeDevice::liveAllocations() const { return live_.load(); }

DeviceStats FakeDevice::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::string> FakeDevice::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  out.reserve(events_.size());
  for (const Event &e : events_)
    out.push_back(e.action
                      ? std::string(e.action) + " " + e.location.toString() +
                            " " + std::to_string(e.bytes)
                      : e.text);
  return out;
}

std::vector<std::byte> FakeDevice::deviceBytes(DeviceLocation location) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Allocation *a = table_.lookup(location);
  return a ? std::vector<std::byte>(a->begin(), a->begin() + a->size)
           : std::vector<std::byte>{};
}

bool FakeDevice::overwriteDeviceBytes(DeviceLocation location, uint64_t offset,
                                      std::span<const std::byte> bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Allocation *a = table_.lookup(location);
  if (!a || offset > a->size || bytes.size() > a->size - offset)
    return false;
  std::memcpy(a->begin() + offset, bytes.data(), bytes.size());
  return true;
}

void FakeDevice::log(std::string event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(Event{nullptr, DeviceLocation{}, 0, std::move(event)});
}

Error FakeDevice::refuseIfStopped() const {
  if (!stopped_)
    return Error::success();
  return makeError(ErrorCode::DeviceLost,
                   "fake device '" + name() + "' is shut down");
}

/// Called with mutex_ held.
void FakeDevice::logAction(const char *action, DeviceLocation location,
                           uint64_t bytes) {
  events_.push_back(Event{action, location, bytes, std::string()});
}

Error FakeDevice::injectFault(const FaultSpec &fault) {
  if (isShutDown())
    return makeError(ErrorCode::DeviceLost,
                     "injectFault: device '" + name() + "' is shut down");
  if (Error e = faults_.add(fault))
    return e;
  log("plan fault " + std::string(faultSiteName(fault.site)) + " #" +
      std::to_string(fault.nth) + " " + std::string(errorCodeName(fault.code)));
  return Error::success();
}

template <typename Describe>
Error FakeDevice::strikeFault(FaultSite site, const Describe &describe) {
  std::optional<ErrorCode> code =
      faults_.strike(site, [this] { refuseWork(); });
  if (!code)
    return Error::success();
  std::string what = describe();
  log("fault " + std::string(faultSiteName(site)) + " " +
      std::string(errorCodeName(*code)) + " at " + what);
  Error e(*code, "injected fault at " + std::string(faultSiteName(site)) +
                     " on fake device '" + name() + "' during " + what);
  if (*code == ErrorCode::DeviceLost)
    shutdown();
  return e;
}

Expected<DeviceLocation> FakeDevice::allocate(uint64_t bytes) {
  if (Error e = strikeFault(FaultSite::Allocation, [&] {
        return "allocation of " + std::to_string(bytes) + " bytes";
      }))
    return e;
  std::lock_guard<std::mutex> lock(mutex_);
  if (Error e = refuseIfStopped())
    return e;
  if (bytes > budget_ - used_)
    return makeError(ErrorCode::OutOfMemory,
                     "fake device '" + name() + "': allocation of " +
                         std::to_string(bytes) + " bytes with " +
                         std::to_string(used_) + " of " +
                         std::to_string(budget_) + " bytes in use");
  // The simulated memory is host memory, which may run out before the
  // budget does.
  Allocation allocation{
      {static_cast<std::byte *>(std::calloc(bytes, 1)), Allocation::Free{}},
      bytes};
  if (!allocation.data)
    return makeError(ErrorCode::OutOfMemory, "fake device '" + name() +
                                                 "': the host cannot hold a "
                                                 "simulated allocation of " +
                                                 std::to_string(bytes) +
                                                 " bytes");
  if (bytes >= MappedAllocationBytes)
    adviseHugePages(allocation.data.get(), bytes);
  DeviceLocation loc = table_.insert(std::move(allocation));
  if (loc.isNull())
    return makeError(ErrorCode::OutOfMemory,
                     "fake device '" + name() +
                         "': no handle is left for another allocation");
  live_.store(table_.size());
  used_ += bytes;
  physical_ += (bytes + alignment_ - 1) & ~(alignment_ - 1);
  ++stats_.allocations;
  logAction("alloc", loc, bytes);
  return loc;
}

Error FakeDevice::free(DeviceLocation location) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<Allocation> a = table_.erase(location);
  live_.store(table_.size());
  if (!a)
    return makeError(ErrorCode::InvalidArgument,
                     "fake device '" + name() + "': free of " +
                         location.toString() +
                         ", which is stale, unknown or already released");
  uint64_t bytes = a->size;
  used_ -= bytes;
  physical_ -= (bytes + alignment_ - 1) & ~(alignment_ - 1);
  ++stats_.frees;
  logAction("free", location, bytes);
  return Error::success();
}

Expected<uint64_t> FakeDevice::allocationSize(DeviceLocation location) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Allocation *a = table_.lookup(location);
  if (!a)
    return makeError(ErrorCode::InvalidArgument,
                     "fake device '" + name() + "': " + location.toString() +
                         " is stale or unknown");
  return a->size;
}

template <typename Work>
void FakeDevice::submit(Work &&work, CompletionCallback done) {
  // A synchronous device runs the work in place: no function object to
  // allocate for it.
  if (!async_) {
    Error e = work();
    return done(std::move(e));
  }
  enqueue(std::function<Error()>(std::forward<Work>(work)), std::move(done));
}

void FakeDevice::enqueue(std::function<Error()> work, CompletionCallback done) {
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    if (!stopWorker_) {
      queue_.push_back(Task{std::move(work), std::move(done)});
      queueReady_.notify_one();
      return;
    }
  }
  done(makeError(ErrorCode::DeviceLost,
                 "fake device '" + name() + "' is shut down"));
}

void FakeDevice::workerLoop() {
#ifdef __linux__
  // The delays are random in [0, max-delay-us]; the kernel's default timer
  // slack (50 us) would add about as much again to each, which buys no
  // interleaving and slows every asynchronous case.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  for (;;) {
    Task task;
    uint64_t delay;
    {
      std::unique_lock<std::mutex> lock(queueMutex_);
      queueReady_.wait(lock, [&] { return stopWorker_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      task = std::move(queue_.front());
      queue_.pop_front();
      delay = maxDelayUs_ ? delays_() % (maxDelayUs_ + 1) : 0;
      if (stopWorker_) {
        lock.unlock();
        task.done(makeError(ErrorCode::DeviceLost,
                            "fake device '" + name() +
                                "' shut down before the operation ran"));
        continue;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    Error e = task.work();
    task.done(std::move(e));
  }
}

void FakeDevice::copyToDevice(DeviceLocation dst, const std::byte *src,
                              uint64_t bytes, CompletionCallback done) {
  if (Error e = strikeFault(FaultSite::TransferToDevice, [&] {
        return "copy of " + std::to_string(bytes) + " bytes to " +
               dst.toString();
      })) {
    if (e.code() == ErrorCode::DeviceLost)
      return; // shutdown() completed the operation already.
    return done(std::move(e));
  }
  submit(
      [this, dst, src, bytes]() -> Error {
        std::lock_guard<std::mutex> lock(mutex_);
        if (Error e = refuseIfStopped())
          return e;
        Allocation *a = table_.lookup(dst);
        if (!a || a->size < bytes)
          return makeError(ErrorCode::InvalidArgument,
                           "fake device '" + name() + "': copy to " +
                               dst.toString() + " of " + std::to_string(bytes) +
                               " bytes: stale location or too small");
        std::memcpy(a->begin(), src, bytes);
        ++stats_.transfersToDevice;
        stats_.bytesToDevice += bytes;
        logAction("to-device", dst, bytes);
        return Error::success();
      },
      std::move(done));
}

void FakeDevice::copyFromDevice(DeviceLocation src, std::byte *dst,
                                uint64_t bytes, CompletionCallback done) {
  if (Error e = strikeFault(FaultSite::TransferFromDevice, [&] {
        return "copy of " + std::to_string(bytes) + " bytes from " +
               src.toString();
      })) {
    if (e.code() == ErrorCode::DeviceLost)
      return;
    return done(std::move(e));
  }
  submit(
      [this, src, dst, bytes]() -> Error {
        std::lock_guard<std::mutex> lock(mutex_);
        if (Error e = refuseIfStopped())
          return e;
        const Allocation *a = table_.lookup(src);
        if (!a || a->size < bytes)
          return makeError(ErrorCode::InvalidArgument,
                           "fake device '" + name() + "': copy from " +
                               src.toString() + " of " + std::to_string(bytes) +
                               " bytes: stale location or too small");
        std::memcpy(dst, a->begin(), bytes);
        ++stats_.transfersFromDevice;
        stats_.bytesFromDevice += bytes;
        logAction("from-device", src, bytes);
        return Error::success();
      },
      std::move(done));
}

Error FakeDevice::compileFunction(const Function &function) {
  log("compile " + function.name());
  return Error::success();
}

void FakeDevice::evictFunction(const std::string &name) {
  log("evict " + name);
}

#if defined(__clang__)
#define DRT_FAKE_UNINSTRUMENTED_LOOPS __attribute__((no_sanitize("coverage")))
#else
#define DRT_FAKE_UNINSTRUMENTED_LOOPS
#endif

namespace {
/// Integer add and mul wrap modulo 2^bits: computed on the unsigned type,
/// where overflow is defined (u8 promotes to int, where it cannot overflow).
template <typename T> T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return a + b;
}
template <typename T> T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
  else
    return a * b;
}

/// add, mul, relu and scale (by \p factor, already converted to T) over n
/// elements; copy moves bytes and is done by the caller. Not instrumented
/// for coverage in fuzz builds: the loops' comparisons (bounds, relu's sign)
/// lead a fuzzer nowhere, and tracing them took a tenth of the `residency`
/// target's time (docs/performance.md).
template <typename T>
DRT_FAKE_UNINSTRUMENTED_LOOPS void evalNode(OpKind op, const T *a, const T *b,
                                            T *out, size_t n, T factor) {
  switch (op) {
  case OpKind::Add:
    for (size_t i = 0; i < n; ++i)
      out[i] = wrapAdd(a[i], b[i]);
    break;
  case OpKind::Mul:
    for (size_t i = 0; i < n; ++i)
      out[i] = wrapMul(a[i], b[i]);
    break;
  case OpKind::Relu:
    for (size_t i = 0; i < n; ++i)
      out[i] = a[i] > T(0) ? a[i] : T(0);
    break;
  case OpKind::Scale:
    for (size_t i = 0; i < n; ++i)
      out[i] = wrapMul(a[i], factor);
    break;
  case OpKind::Copy:
    break;
  }
}

template <typename T>
void evalKind(const Node &node, const std::byte *a, const std::byte *b,
              std::byte *out, size_t n) {
  // Function::verify admits only integer factors that T holds, so the
  // conversion is exact for integer kinds and rounds to nearest for float.
  evalNode(node.op, reinterpret_cast<const T *>(a),
           reinterpret_cast<const T *>(b), reinterpret_cast<T *>(out), n,
           static_cast<T>(node.factor));
}

/// A binary floating-point format narrower than float, stored in 16 bits.
struct NarrowFloat {
  int mantissaBits;
  int exponentBias;

  int minExponent() const { return 1 - exponentBias; }
  int maxExponent() const { return exponentBias; }
  uint16_t infinity() const {
    return uint16_t(((2 * exponentBias + 1) << mantissaBits));
  }

  /// The exact float value of \p bits; a NaN becomes a quiet float NaN
  /// with the same sign and payload bits.
  DRT_FAKE_UNINSTRUMENTED_LOOPS float widen(uint16_t bits) const {
    bool negative = bits & 0x8000;
    uint16_t magnitudeBits = bits & 0x7fff;
    uint32_t mantissa = bits & ((1u << mantissaBits) - 1);
    if (magnitudeBits >= infinity()) {
      if (mantissa == 0)
        return negative ? -HUGE_VALF : HUGE_VALF;
      return std::bit_cast<float>((negative ? 0x80000000u : 0u) | 0x7fc00000u |
                                  mantissa << (23 - mantissaBits));
    }
    int exponent = magnitudeBits >> mantissaBits;
    double magnitude =
        exponent == 0
            ? std::ldexp(double(mantissa), minExponent() - mantissaBits)
            : std::ldexp(double(mantissa | 1u << mantissaBits),
                         exponent - exponentBias - mantissaBits);
    return float(negative ? -magnitude : magnitude);
  }

  /// widen() of \p count elements at \p bytes into \p values.
  DRT_FAKE_UNINSTRUMENTED_LOOPS void
  widenAll(const std::byte *bytes, size_t count, float *values) const {
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, bytes + 2 * i, 2);
      values[i] = widen(bits);
    }
  }

  /// \p value rounded to nearest even (std::nearbyint in the default
  /// rounding mode); a NaN stays a quiet NaN with its sign and the top bits
  /// of its payload.
  DRT_FAKE_UNINSTRUMENTED_LOOPS uint16_t narrow(float value) const {
    uint16_t sign = (std::bit_cast<uint32_t>(value) >> 16) & 0x8000;
    if (std::isnan(value)) {
      uint32_t payload = std::bit_cast<uint32_t>(value) & 0x7fffff;
      return uint16_t(sign | infinity() | 1u << (mantissaBits - 1) |
                      payload >> (23 - mantissaBits));
    }
    double magnitude = std::fabs(double(value));
    if (std::isinf(magnitude))
      return uint16_t(sign | infinity());
    if (magnitude == 0)
      return sign;
    // Scale so that the unit in the last place of the result is 1 (for
    // denormals that unit is fixed at the smallest normal's), then round.
    int exponent = std::max(std::ilogb(magnitude), minExponent());
    double units =
        std::nearbyint(std::ldexp(magnitude, mantissaBits - exponent));
    if (units >= std::ldexp(1.0, mantissaBits + 1)) {
      units /= 2;
      ++exponent;
    }
    if (exponent > maxExponent())
      return uint16_t(sign | infinity());
    uint32_t bits = uint32_t(units);
    if (bits < (1u << mantissaBits))
      return uint16_t(sign | bits);
    return uint16_t(sign | (exponent + exponentBias) << mantissaBits |
                    (bits - (1u << mantissaBits)));
  }
};

constexpr NarrowFloat Half{10, 15};
constexpr NarrowFloat BFloat16{7, 127};

/// f16 and bf16: widened to float (exactly), computed in float, rounded once
/// to the format, which gives the exactly rounded result (docs/semantics.md
/// section 7). The factor is rounded to float, then to the format. Done in
/// blocks, so that a run of millions of elements needs no float copies of
/// its operands; not instrumented for coverage in fuzz builds, like
/// evalNode: the model's own conversions are, and their branches (NaN,
/// infinity, denormals) are the same.
DRT_FAKE_UNINSTRUMENTED_LOOPS void
evalNarrow(const Node &node, const std::byte *a, const std::byte *b,
           std::byte *out, size_t n, const NarrowFloat &format) {
  constexpr size_t Block = 1024;
  std::array<float, Block> x, y, r;
  float factor = format.widen(format.narrow(float(node.factor)));
  for (size_t first = 0; first < n; first += Block) {
    size_t count = std::min(Block, n - first);
    format.widenAll(a + 2 * first, count, x.data());
    if (b)
      format.widenAll(b + 2 * first, count, y.data());
    evalNode(node.op, x.data(), y.data(), r.data(), count, factor);
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits = format.narrow(r[i]);
      std::memcpy(out + 2 * (first + i), &bits, 2);
    }
  }
}
} // namespace

Error FakeDevice::runNodes(const Function &function,
                           const std::vector<RunArgument> &arguments) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto pointerTo = [&](const std::string &placeholder,
                       std::byte *&out) -> Error {
    int i = function.placeholderIndex(placeholder);
    const RunArgument &arg = arguments.at(i);
    Allocation *a = table_.lookup(arg.location);
    uint64_t bytes = function.placeholders()[i].type.sizeInBytes();
    if (!a || arg.offsetBytes > a->size || bytes > a->size - arg.offsetBytes)
      return makeError(ErrorCode::InvalidArgument,
                       "fake device '" + name() + "': run of '" +
                           function.name() + "': placeholder '" + placeholder +
                           "' at " + arg.location.toString() + "+" +
                           std::to_string(arg.offsetBytes) +
                           " is stale or out of bounds");
    out = a->begin() + arg.offsetBytes;
    return Error::success();
  };
  for (const Node &node : function.nodes()) {
    std::byte *in0 = nullptr, *in1 = nullptr, *out = nullptr;
    if (Error e = pointerTo(node.inputs[0], in0))
      return e;
    if (node.inputs.size() > 1)
      if (Error e = pointerTo(node.inputs[1], in1))
        return e;
    if (Error e = pointerTo(node.output, out))
      return e;
    const Type &type = function.findPlaceholder(node.output)->type;
    size_t n = type.numElements();
    if (node.op == OpKind::Copy) {
      // Bits, whatever the kind: a signalling NaN is copied unchanged.
      std::memmove(out, in0, type.sizeInBytes());
      continue;
    }
    switch (type.kind) {
    case ElemKind::Float32:
      evalKind<float>(node, in0, in1, out, n);
      break;
    case ElemKind::Int32:
      evalKind<int32_t>(node, in0, in1, out, n);
      break;
    case ElemKind::Int64:
      evalKind<int64_t>(node, in0, in1, out, n);
      break;
    case ElemKind::UInt8:
      evalKind<uint8_t>(node, in0, in1, out, n);
      break;
    case ElemKind::Float16:
      evalNarrow(node, in0, in1, out, n, Half);
      break;
    case ElemKind::BFloat16:
      evalNarrow(node, in0, in1, out, n, BFloat16);
      break;
    }
  }
  ++stats_.runs;
  events_.push_back(
      Event{nullptr, DeviceLocation{}, 0, "run " + function.name()});
  return Error::success();
}

void FakeDevice::execute(const Function &function,
                         std::vector<RunArgument> arguments,
                         CompletionCallback done) {
  if (Error e = strikeFault(
          FaultSite::Run, [&] { return "run of '" + function.name() + "'"; })) {
    if (e.code() == ErrorCode::DeviceLost)
      return;
    return done(std::move(e));
  }
  submit(
      [this, &function, arguments = std::move(arguments)]() {
        return runNodes(function, arguments);
      },
      std::move(done));
}

void FakeDevice::shutdownBackend() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(queueMutex_);
      stopWorker_ = true;
    }
    queueReady_.notify_all();
    // A shutdown started from a completion on the worker itself cannot join
    // it; the worker drains the queue with DeviceLost and the destructor joins.
    if (std::this_thread::get_id() != worker_.get_id())
      worker_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  table_.clear();
  live_.store(0);
  used_ = 0;
  physical_ = 0;
  events_.push_back(Event{nullptr, DeviceLocation{}, 0, "shutdown"});
}

} // namespace drt::fake
