//===- InputSpaceMutants.cpp - Bugs only the input space reaches ----------===//
//
// Mutants of the reference device whose bug shows only where the input space
// of the generators (drt/conformance/InputSpace.h) reaches: sizes past a
// chunk, a page or a power of two, byte counts that are not a multiple of a
// burst, element kinds beyond f32 and i32, special, extreme and rounding
// values, networks of several nodes and of rank two or more, views at
// unaligned or distant offsets, budgets met exactly or missed by one byte,
// freed blocks handed out again. Each derives from the real FakeDevice,
// breaks one rule of docs/semantics.md and keeps everything else exact; they
// register as test-only "mutant:NAME" backends like those of FakeMutants.cpp.
//
//===----------------------------------------------------------------------===//
#include "ElementArithmetic.h"
#include "drt/BackendRegistry.h"
#include "drt/FaultPlan.h"
#include "drt/fake/FakeDevice.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <vector>

namespace drt::conformance::selftest {
namespace {

using fake::FakeDevice;

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

//===----------------------------------------------------------------------===//
// Support: mutants that act on the device on their own behalf.
//===----------------------------------------------------------------------===//

/// A fake device that keeps the faults a scenario plans itself and strikes
/// them where the fake device does (allocation, both copies, runs), so that
/// the allocations and copies a mutant makes on its own behalf, through
/// FakeDevice's hooks, strike none of them.
class PlansFaultsItself : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  Error injectFault(const FaultSpec &fault) override {
    if (isShutDown())
      return makeError(ErrorCode::DeviceLost,
                       "injectFault: device '" + name() + "' is shut down");
    return plan_.add(fault);
  }

protected:
  /// The fault planned for this operation at \p site, or success; a
  /// DeviceLost fault shuts the device down, which completes every
  /// operation in flight.
  Error strike(FaultSite site) {
    std::optional<ErrorCode> code = plan_.strike(site);
    if (!code)
      return Error::success();
    Error e(*code, "injected fault at " + std::string(faultSiteName(site)) +
                       " on mutant device '" + name() + "'");
    if (*code == ErrorCode::DeviceLost)
      shutdown();
    return e;
  }

  Expected<DeviceLocation> allocate(uint64_t bytes) final {
    if (Error e = strike(FaultSite::Allocation))
      return e;
    return allocateUnplanned(bytes);
  }
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) final {
    if (Error e = strike(FaultSite::TransferToDevice)) {
      if (e.code() != ErrorCode::DeviceLost)
        done(std::move(e));
      return;
    }
    FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) final {
    if (Error e = strike(FaultSite::TransferFromDevice)) {
      if (e.code() != ErrorCode::DeviceLost)
        done(std::move(e));
      return;
    }
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) final {
    if (Error e = strike(FaultSite::Run)) {
      if (e.code() != ErrorCode::DeviceLost)
        done(std::move(e));
      return;
    }
    executeUnplanned(function, std::move(arguments), std::move(done));
  }

  /// allocate() once no fault struck.
  virtual Expected<DeviceLocation> allocateUnplanned(uint64_t bytes) {
    return FakeDevice::allocate(bytes);
  }
  /// execute() once no fault struck.
  virtual void executeUnplanned(const Function &function,
                                std::vector<RunArgument> arguments,
                                CompletionCallback done) {
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  FaultPlan plan_;
};

/// The bytes of a run's placeholders, by name.
using RunValues = std::map<std::string, std::vector<uint8_t>>;

/// A fake device whose runs compute differently. Each run first reads its
/// placeholders' bytes through the device's own queue, so that it sees what
/// the runs issued before it wrote (an asynchronous device performs them in
/// order); the real device then runs the function (its bounds checks and
/// counters), and when it completes, the mutant computes it again from the
/// bytes read, node by node in evaluationOrder(), each over
/// elementsComputed() elements with mutatedElement() where it applies, and
/// writes the outputs over the real ones before the next queued operation
/// runs. The defaults compute what the contract says (with the reference
/// model's arithmetic), so a mutant overrides the one thing its bug changes.
class RecomputingDevice : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  /// The real counters, without the mutant's own reads.
  DeviceStats stats() const override {
    DeviceStats s = FakeDevice::stats();
    std::lock_guard<std::mutex> lock(mutex_);
    s.transfersFromDevice -= ownReads_;
    s.bytesFromDevice -= ownBytes_;
    return s;
  }

protected:
  /// The order the nodes of \p function are computed in.
  virtual std::vector<size_t> evaluationOrder(const Function &function) const {
    std::vector<size_t> order(function.nodes().size());
    std::iota(order.begin(), order.end(), size_t(0));
    return order;
  }
  /// How many elements of an output of \p type a node computes (from the
  /// first); the rest keep the bytes they had.
  virtual size_t elementsComputed(const Type &type) const {
    return type.numElements();
  }
  /// Writes the mutant's result of one element of \p op over \p kind to
  /// \p out and returns true, or returns false for the contract's result.
  virtual bool mutatedElement(OpKind, ElemKind, double, const uint8_t *,
                              const uint8_t *, uint8_t *) const {
    return false;
  }
  /// Computes node \p index of \p function over \p values; a mutant whose
  /// bug spans nodes overrides it.
  virtual void computeNode(const Function &function, size_t index,
                           RunValues &values) const {
    const Node &node = function.nodes()[index];
    const Type &type = function.findPlaceholder(node.output)->type;
    size_t size = elemSize(type.kind);
    const uint8_t *a = values.at(node.inputs[0]).data();
    const uint8_t *b =
        node.inputs.size() > 1 ? values.at(node.inputs[1]).data() : nullptr;
    uint8_t *out = values.at(node.output).data();
    for (size_t i = 0, n = elementsComputed(type); i < n; ++i) {
      const uint8_t *y = b ? b + i * size : nullptr;
      if (!mutatedElement(node.op, type.kind, node.factor, a + i * size, y,
                          out + i * size))
        computeElement(node.op, type.kind, node.factor, a + i * size, y,
                       out + i * size);
    }
  }

  void executeUnplanned(const Function &function,
                        std::vector<RunArgument> arguments,
                        CompletionCallback done) override {
    // The reads complete (on the worker, or here on a synchronous device)
    // before the run does, one after the other.
    auto values = std::make_shared<RunValues>();
    for (size_t i = 0; i < function.placeholders().size(); ++i) {
      const Placeholder &p = function.placeholders()[i];
      uint64_t offset = arguments[i].offsetBytes;
      uint64_t size = p.type.sizeInBytes();
      auto read = std::make_shared<std::vector<std::byte>>(offset + size);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++ownReads_;
        ownBytes_ += read->size();
      }
      FakeDevice::copyFromDevice(
          arguments[i].location, read->data(), read->size(),
          [values, read, name = p.name, offset, size](Error e) {
            std::vector<uint8_t> bytes(size);
            if (!e)
              std::memcpy(bytes.data(), read->data() + offset, size);
            (*values)[name] = std::move(bytes);
          });
    }
    FakeDevice::execute(
        function, arguments,
        [this, &function, arguments, values, done](Error e) {
          if (e)
            return done(std::move(e));
          for (size_t index : evaluationOrder(function))
            computeNode(function, index, *values);
          for (size_t i = 0; i < function.placeholders().size(); ++i) {
            const std::string &name = function.placeholders()[i].name;
            if (!function.isOutput(name))
              continue;
            const std::vector<uint8_t> &bytes = values->at(name);
            overwriteDeviceBytes(
                arguments[i].location, arguments[i].offsetBytes,
                std::as_bytes(std::span(bytes.data(), bytes.size())));
          }
          done(Error::success());
        });
  }

private:
  mutable std::mutex mutex_;
  uint64_t ownReads_ = 0;
  uint64_t ownBytes_ = 0;
};

/// A fake device whose allocations are known outside by handles of the
/// mutant's own making (handleFor), translated back to the real device's
/// locations in every hook. A handle it does not know is passed on as it is
/// (the real device rejects it as stale or unknown).
class HandleTranslatingDevice : public FakeDevice {
public:
  using FakeDevice::FakeDevice;

protected:
  /// The handle a new allocation of \p bytes at \p real is known by.
  /// Called with the mutant's lock held.
  virtual DeviceLocation handleFor(DeviceLocation real, uint64_t bytes) = 0;
  /// Called when the allocation of \p bytes known as \p handle is freed,
  /// with the mutant's lock held.
  virtual void retired(DeviceLocation, uint64_t) {}
  /// Called when the device shuts down, with the mutant's lock held.
  virtual void forgetAll() {}

  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> real = FakeDevice::allocate(bytes);
    if (!real)
      return real;
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceLocation handle = handleFor(*real, bytes);
    live_[handle.value] = *real;
    return handle;
  }
  Error free(DeviceLocation handle) override {
    DeviceLocation real = realOf(handle);
    Expected<uint64_t> bytes = FakeDevice::allocationSize(real);
    if (Error e = FakeDevice::free(real))
      return e;
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(handle.value);
    retired(handle, bytes ? *bytes : 0);
    return Error::success();
  }
  Expected<uint64_t> allocationSize(DeviceLocation handle) const override {
    return FakeDevice::allocationSize(realOf(handle));
  }
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(realOf(dst), src, bytes, std::move(done));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(realOf(src), dst, bytes, std::move(done));
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    for (RunArgument &a : arguments)
      a.location = realOf(a.location);
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    live_.clear();
    forgetAll();
  }

private:
  DeviceLocation realOf(DeviceLocation handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(handle.value);
    return it == live_.end() ? handle : it->second;
  }

  mutable std::mutex mutex_;
  std::map<uint64_t, DeviceLocation> live_;
};

//===----------------------------------------------------------------------===//
// Size-dependent paths.
//===----------------------------------------------------------------------===//

/// copyToDevice() moves data in 64 KiB chunks and drops what is left after
/// the last whole chunk.
class UploadDropsTailPast64K final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~UploadDropsTailPast64K() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    constexpr uint64_t Chunk = 64 * KiB;
    FakeDevice::copyToDevice(dst, src,
                             bytes > Chunk ? bytes / Chunk * Chunk : bytes,
                             std::move(done));
  }
};

/// copyToDevice() moves whole 16-byte bursts: a byte count that is not a
/// multiple of 16 is rounded down.
class UploadIn16ByteBursts final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~UploadIn16ByteBursts() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes & ~uint64_t(15), std::move(done));
  }
};

/// copyToDevice() of exactly a power of two of at least 4 KiB (a path for
/// whole pages) copies one byte less: it uses the size's mask as its length.
class UploadShortAtPowerOfTwo final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~UploadShortAtPowerOfTwo() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (bytes >= 4 * KiB && std::has_single_bit(bytes))
      bytes = bytes - 1;
    FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
  }
};

/// copyFromDevice() of more than 1 MiB goes through a 1 MiB staging buffer
/// and never advances its source offset: every piece is the first MiB.
class ReadBackStagingNotAdvanced final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackStagingNotAdvanced() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes <= MiB)
      return FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
    FakeDevice::copyFromDevice(src, dst, MiB, [dst, bytes, done](Error e) {
      if (e.isSuccess())
        for (uint64_t at = MiB; at < bytes; at += MiB)
          std::memcpy(dst + at, dst, std::min(MiB, bytes - at));
      done(std::move(e));
    });
  }
};

/// An allocation of more than 4 MiB (the device's largest single
/// allocation) is OutOfMemory however much of the budget is free.
class LargestAllocation4MiB final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~LargestAllocation4MiB() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocateUnplanned(uint64_t bytes) override {
    if (bytes > 4 * MiB)
      return makeError(ErrorCode::OutOfMemory,
                       "mutant device '" + name() + "': allocation of " +
                           std::to_string(bytes) +
                           " bytes exceeds the largest single allocation");
    return FakeDevice::allocate(bytes);
  }
};

/// usedMemory() counts an allocation of at least a page (4 KiB) in whole
/// pages: the page allocator's size, not the tensor's.
class PagesCountedAsUsed final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~PagesCountedAsUsed() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::usedMemory() + padding_;
  }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> loc = FakeDevice::allocate(bytes);
    if (loc) {
      std::lock_guard<std::mutex> lock(mutex_);
      padding_ += paddingOf(bytes);
    }
    return loc;
  }
  Error free(DeviceLocation location) override {
    Expected<uint64_t> bytes = allocationSize(location);
    Error e = FakeDevice::free(location);
    if (!e && bytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      padding_ -= paddingOf(*bytes);
    }
    return e;
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    padding_ = 0;
  }

private:
  static uint64_t paddingOf(uint64_t bytes) {
    constexpr uint64_t Page = 4 * KiB;
    return bytes < Page ? 0 : (bytes + Page - 1) / Page * Page - bytes;
  }
  mutable std::mutex mutex_;
  uint64_t padding_ = 0;
};

/// A run over more than 64 elements is launched on whole work-groups of 64
/// with no bounds-checked tail: the last n mod 64 elements are not computed.
class RunSkipsPartialWorkGroup final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~RunSkipsPartialWorkGroup() override { shutdown(); }

protected:
  size_t elementsComputed(const Type &type) const override {
    size_t n = type.numElements();
    return n > 64 ? n / 64 * 64 : n;
  }
};

//===----------------------------------------------------------------------===//
// Value-dependent arithmetic (runs only; NaN payloads stay free).
//===----------------------------------------------------------------------===//

/// f16 relu tests the sign bit: a NaN with the sign bit clear passes
/// through instead of giving +0.
class F16ReluTestsSignBit final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~F16ReluTestsSignBit() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Relu || kind != ElemKind::Float16)
      return false;
    uint16_t bits = load<uint16_t>(a);
    store<uint16_t>(out, (bits & 0x8000) ? 0 : bits);
    return true;
  }
};

/// bf16 relu is x >= 0 ? x : 0, so -0 stays -0.
class Bf16ReluKeepsNegativeZero final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~Bf16ReluKeepsNegativeZero() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Relu || kind != ElemKind::BFloat16)
      return false;
    float x = bfloat16ToFloat(load<uint16_t>(a));
    store<uint16_t>(out, floatToBFloat16(x >= 0 ? x : 0.0f));
    return true;
  }
};

/// f32 add and mul flush denormal inputs and results to zero of the same
/// sign (a device in flush-to-zero mode that does not say so).
class F32FlushesDenormals final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~F32FlushesDenormals() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if ((op != OpKind::Add && op != OpKind::Mul) || kind != ElemKind::Float32)
      return false;
    float x = flush(load<float>(a)), y = flush(load<float>(b));
    store(out, flush(op == OpKind::Add ? x + y : x * y));
    return true;
  }

private:
  static float flush(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
  }
};

/// i32 mul saturates at the i32 range instead of wrapping.
class I32MulSaturates final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~I32MulSaturates() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if (op != OpKind::Mul || kind != ElemKind::Int32)
      return false;
    int64_t p = int64_t(load<int32_t>(a)) * int64_t(load<int32_t>(b));
    p = std::clamp<int64_t>(p, std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max());
    store(out, int32_t(p));
    return true;
  }
};

/// i64 add is computed in 32 bits and sign-extended (the kernel's sum was
/// declared int).
class I64AddIn32Bits final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~I64AddIn32Bits() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if (op != OpKind::Add || kind != ElemKind::Int64)
      return false;
    uint32_t sum = uint32_t(load<uint64_t>(a)) + uint32_t(load<uint64_t>(b));
    store(out, int64_t(int32_t(sum)));
    return true;
  }
};

/// u8 scale saturates at 255 instead of wrapping modulo 256.
class U8ScaleSaturates final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~U8ScaleSaturates() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Scale || kind != ElemKind::UInt8)
      return false;
    unsigned p = unsigned(load<uint8_t>(a)) * unsigned(factor);
    store(out, uint8_t(std::min(p, 255u)));
    return true;
  }
};

/// The result of \p op over two widened values, as the contract computes it
/// before rounding to the kind (scale's factor is already rounded).
float floatResult(OpKind op, float x, float y) {
  return op == OpKind::Add ? x + y : x * y;
}

/// f16 add, mul and scale round their float result toward zero (the bits
/// are truncated) instead of to nearest even.
class F16RoundsTowardZero final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~F16RoundsTowardZero() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if (kind != ElemKind::Float16 ||
        (op != OpKind::Add && op != OpKind::Mul && op != OpKind::Scale))
      return false;
    float x = halfToFloat(load<uint16_t>(a));
    float y = op == OpKind::Scale ? halfToFloat(floatToHalf(float(factor)))
                                  : halfToFloat(load<uint16_t>(b));
    float r = floatResult(op == OpKind::Scale ? OpKind::Mul : op, x, y);
    uint16_t h = floatToHalf(r);
    if (!std::isnan(r) && std::fabs(halfToFloat(h)) > std::fabs(r))
      h = uint16_t(h - 1); // one unit less in magnitude: the encoding is
                           // monotonic, and infinity steps to the largest
                           // finite value
    store(out, h);
    return true;
  }
};

/// bf16 add, mul and scale keep the upper half of their float result (the
/// classic shift by 16) instead of rounding to nearest even.
class Bf16Truncates final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~Bf16Truncates() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if (kind != ElemKind::BFloat16 ||
        (op != OpKind::Add && op != OpKind::Mul && op != OpKind::Scale))
      return false;
    float x = bfloat16ToFloat(load<uint16_t>(a));
    float y = op == OpKind::Scale
                  ? bfloat16ToFloat(floatToBFloat16(float(factor)))
                  : bfloat16ToFloat(load<uint16_t>(b));
    float r = floatResult(op == OpKind::Scale ? OpKind::Mul : op, x, y);
    store(out, uint16_t(std::bit_cast<uint32_t>(r) >> 16));
    return true;
  }
};

/// f32 scale multiplies in double by the factor as given and rounds the
/// product to float, instead of multiplying by the factor rounded to f32.
class F32ScaleInDouble final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~F32ScaleInDouble() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Scale || kind != ElemKind::Float32)
      return false;
    store(out, float(double(load<float>(a)) * factor));
    return true;
  }
};

/// \p d rounded to float toward zero, with the last bit set when inexact
/// (rounding to odd): rounding that float to f16 or bf16, which have at most
/// 11 significant bits of float's 24, equals rounding \p d to them once.
float roundedToOdd(double d) {
  float f = float(d);
  if (std::isnan(d) || std::isinf(f) || double(f) == d)
    return f;
  if (std::fabs(double(f)) > std::fabs(d))
    f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

/// f16 and bf16 scale round the factor from the double straight to the
/// kind, once, instead of to f32 first as a kernel argument is (semantics
/// §7): 1 + 2^-11 + 2^-30 becomes 1 + 2^-10 in f16 instead of 1.
class NarrowScaleFactorRoundedOnce final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~NarrowScaleFactorRoundedOnce() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Scale ||
        (kind != ElemKind::Float16 && kind != ElemKind::BFloat16))
      return false;
    bool half = kind == ElemKind::Float16;
    auto widen = half ? halfToFloat : bfloat16ToFloat;
    auto narrow = half ? floatToHalf : floatToBFloat16;
    float y = widen(narrow(roundedToOdd(factor)));
    store(out, narrow(floatResult(OpKind::Mul, widen(load<uint16_t>(a)), y)));
    return true;
  }
};

/// i64 relu compares on the unsigned type the other ops compute on, so a
/// negative value passes through.
class I64ReluUnsigned final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~I64ReluUnsigned() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Relu || kind != ElemKind::Int64)
      return false;
    uint64_t x = load<uint64_t>(a);
    store(out, x > 0 ? x : uint64_t(0));
    return true;
  }
};

/// u8 relu reads its element as a (signed) char: values from 128 up are
/// taken as negative and give 0 (u8 relu is the identity).
class U8ReluSignedChar final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~U8ReluSignedChar() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Relu || kind != ElemKind::UInt8)
      return false;
    int8_t x = load<int8_t>(a);
    store(out, uint8_t(x > 0 ? x : 0));
    return true;
  }
};

/// bf16 add, mul and scale flush results below the smallest normal bf16 to
/// zero of the same sign (a bf16 unit without denormals).
class Bf16FlushesDenormalResults final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~Bf16FlushesDenormalResults() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                      const uint8_t *b, uint8_t *out) const override {
    if (kind != ElemKind::BFloat16 ||
        (op != OpKind::Add && op != OpKind::Mul && op != OpKind::Scale))
      return false;
    computeElement(op, kind, factor, a, b, out);
    uint16_t bits = load<uint16_t>(out);
    if ((bits & 0x7f80) == 0)
      store<uint16_t>(out, bits & 0x8000);
    return true;
  }
};

/// f16 copy goes through a float register, which quiets a signalling NaN
/// (sets the top bit of its payload): a copy must move every bit.
class F16CopyQuietsSignallingNaN final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~F16CopyQuietsSignallingNaN() override { shutdown(); }

protected:
  bool mutatedElement(OpKind op, ElemKind kind, double, const uint8_t *a,
                      const uint8_t *, uint8_t *out) const override {
    if (op != OpKind::Copy || kind != ElemKind::Float16)
      return false;
    uint16_t bits = load<uint16_t>(a);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0)
      bits |= 0x0200;
    store<uint16_t>(out, bits);
    return true;
  }
};

//===----------------------------------------------------------------------===//
// Count-dependent allocators.
//===----------------------------------------------------------------------===//

/// Freed blocks of at least 64 KiB stay in a cache for reuse by an
/// allocation of the same size, and usedMemory() counts the cache (the
/// memory reserved, not the memory in use).
class CountsCachedBlocksAsUsed final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CountsCachedBlocksAsUsed() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t cached = 0;
    for (const auto &[bytes, count] : cache_)
      cached += bytes * count;
    return FakeDevice::usedMemory() + cached;
  }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> loc = FakeDevice::allocate(bytes);
    if (loc) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = cache_.find(bytes); it != cache_.end() && --it->second == 0)
        cache_.erase(it);
    }
    return loc;
  }
  Error free(DeviceLocation location) override {
    Expected<uint64_t> bytes = allocationSize(location);
    Error e = FakeDevice::free(location);
    if (!e && bytes && *bytes >= 64 * KiB) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++cache_[*bytes];
    }
    return e;
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.clear();
  }

private:
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> cache_;
};

/// Freed blocks of at least a page (4 KiB) are cached by size and handed
/// out again under the handle they had: no new generation, so a stale
/// handle reaches the block's next owner.
class CachedBlocksKeepTheirHandle final : public HandleTranslatingDevice {
public:
  using HandleTranslatingDevice::HandleTranslatingDevice;
  ~CachedBlocksKeepTheirHandle() override { shutdown(); }

protected:
  DeviceLocation handleFor(DeviceLocation real, uint64_t bytes) override {
    auto it = cached_.find(bytes);
    if (it == cached_.end())
      return real;
    DeviceLocation handle = it->second.back();
    it->second.pop_back();
    if (it->second.empty())
      cached_.erase(it);
    return handle;
  }
  void retired(DeviceLocation handle, uint64_t bytes) override {
    if (bytes >= 4 * KiB)
      cached_[bytes].push_back(handle);
  }
  void forgetAll() override { cached_.clear(); }

private:
  std::map<uint64_t, std::vector<DeviceLocation>> cached_;
};

/// The allocator trims its cache whenever the bytes freed since the last
/// trim pass 1 MiB, and the trim loses the block being freed: it stays
/// allocated and counted.
class TrimLosesBlockAtEachMiBFreed final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~TrimLosesBlockAtEachMiBFreed() override { shutdown(); }

protected:
  Error free(DeviceLocation location) override {
    Expected<uint64_t> bytes = allocationSize(location);
    if (bytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      sinceTrim_ += *bytes;
      if (sinceTrim_ > MiB) {
        sinceTrim_ = 0;
        return Error::success();
      }
    }
    return FakeDevice::free(location);
  }

private:
  std::mutex mutex_;
  uint64_t sinceTrim_ = 0;
};

/// Locations carry a slot and no generation: a stale location names
/// whatever allocation holds its slot now.
class NoGeneration final : public HandleTranslatingDevice {
public:
  using HandleTranslatingDevice::HandleTranslatingDevice;
  ~NoGeneration() override { shutdown(); }

protected:
  DeviceLocation handleFor(DeviceLocation real, uint64_t) override {
    return DeviceLocation{real.value & 0xffffffffu};
  }
};

/// Locations carry no trace of the device that issued them (every device
/// numbers its slots alike): a location of another device whose slot and
/// generation are live here names an allocation of this device.
class HandlesNameNoDevice final : public HandleTranslatingDevice {
public:
  using HandleTranslatingDevice::HandleTranslatingDevice;
  ~HandlesNameNoDevice() override { shutdown(); }

protected:
  DeviceLocation handleFor(DeviceLocation real, uint64_t) override {
    // LocationTable keeps the table's tag in bits 24 to 31.
    return DeviceLocation{real.value & ~(uint64_t(0xff) << 24)};
  }
};

//===----------------------------------------------------------------------===//
// Shape- and offset-dependent runs.
//===----------------------------------------------------------------------===//

/// A run is launched over the innermost dimension only: a network of rank
/// two or more computes its first row.
class RunComputesFirstRow final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~RunComputesFirstRow() override { shutdown(); }

protected:
  size_t elementsComputed(const Type &type) const override {
    return type.dims.back();
  }
};

/// Run arguments take their offsets modulo 64 KiB (a 16-bit offset field):
/// a view input further into its tensor is read at the wrong place.
class RunOffsetsModulo64K final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~RunOffsetsModulo64K() override { shutdown(); }

protected:
  void executeUnplanned(const Function &function,
                        std::vector<RunArgument> arguments,
                        CompletionCallback done) override {
    for (RunArgument &a : arguments)
      a.offsetBytes %= 64 * KiB;
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
};

/// Run arguments pass their offsets in 32-bit words: for 1- and 2-byte
/// kinds an offset that is not a multiple of 4 is rounded down.
class RunOffsetsInWords final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~RunOffsetsInWords() override { shutdown(); }

protected:
  void executeUnplanned(const Function &function,
                        std::vector<RunArgument> arguments,
                        CompletionCallback done) override {
    for (RunArgument &a : arguments)
      a.offsetBytes &= ~uint64_t(3);
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
};

/// A node of two inputs reads its second at the first's offset (a kernel
/// that takes one offset argument for both, or passes the wrong one): only
/// inputs bound at different offsets tell.
class RunReadsSecondInputAtFirstOffset final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~RunReadsSecondInputAtFirstOffset() override { shutdown(); }

protected:
  void executeUnplanned(const Function &function,
                        std::vector<RunArgument> arguments,
                        CompletionCallback done) override {
    for (const Node &node : function.nodes()) {
      if (node.inputs.size() < 2 || node.inputs[0] == node.inputs[1] ||
          function.isOutput(node.inputs[1]))
        continue;
      int first = function.placeholderIndex(node.inputs[0]);
      int second = function.placeholderIndex(node.inputs[1]);
      if (first < 0 || second < 0)
        continue;
      RunArgument &b = arguments[size_t(second)];
      uint64_t offset = arguments[size_t(first)].offsetBytes;
      uint64_t bytes =
          function.placeholders()[size_t(second)].type.sizeInBytes();
      Expected<uint64_t> size = allocationSize(b.location);
      if (!size) {
        (void)size.takeError();
        continue;
      }
      if (offset + bytes <= *size)
        b.offsetBytes = offset;
    }
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
};

//===----------------------------------------------------------------------===//
// Rare combinations.
//===----------------------------------------------------------------------===//

/// The budget check rounds the request up to the allocator's 16-byte
/// granule while usage counts exact bytes: an exact fit of a size that is
/// not a multiple of 16 is OutOfMemory.
class BudgetCheckRoundsUp final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~BudgetCheckRoundsUp() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocateUnplanned(uint64_t bytes) override {
    uint64_t used = usedMemory(), budget = maximumMemory();
    uint64_t granules = (bytes + 15) & ~uint64_t(15);
    if (granules > budget - std::min(used, budget))
      return makeError(ErrorCode::OutOfMemory,
                       "mutant device '" + name() + "': allocation of " +
                           std::to_string(bytes) + " bytes with " +
                           std::to_string(used) + " of " +
                           std::to_string(budget) + " bytes in use");
    return FakeDevice::allocate(bytes);
  }
};

/// The budget check rounds the request down to 16-byte granules: an
/// allocation that misses the budget by less than 16 bytes is accepted.
class BudgetCheckRoundsDown final : public PlansFaultsItself {
public:
  explicit BudgetCheckRoundsDown(DeviceConfig config)
      : PlansFaultsItself(unlimited(config)),
        budget_(config.memoryBudget ? config.memoryBudget
                                    : fake::DefaultMemoryBudget) {}
  ~BudgetCheckRoundsDown() override { shutdown(); }
  uint64_t maximumMemory() const override { return budget_; }

protected:
  Expected<DeviceLocation> allocateUnplanned(uint64_t bytes) override {
    uint64_t used = usedMemory();
    if ((bytes & ~uint64_t(15)) > budget_ - std::min(used, budget_))
      return makeError(ErrorCode::OutOfMemory,
                       "mutant device '" + name() + "': allocation of " +
                           std::to_string(bytes) + " bytes with " +
                           std::to_string(used) + " of " +
                           std::to_string(budget_) + " bytes in use");
    return FakeDevice::allocate(bytes);
  }

private:
  static DeviceConfig unlimited(DeviceConfig config) {
    config.memoryBudget = 0;
    return config;
  }
  uint64_t budget_;
};

/// Nodes are launched grouped by op (one kernel per op, in order of first
/// use): in a network of three or more nodes a node can run before the
/// node whose output it reads.
class RunGroupsNodesByOp final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~RunGroupsNodesByOp() override { shutdown(); }

protected:
  std::vector<size_t> evaluationOrder(const Function &function) const override {
    std::vector<OpKind> ops;
    for (const Node &node : function.nodes())
      if (std::find(ops.begin(), ops.end(), node.op) == ops.end())
        ops.push_back(node.op);
    std::vector<size_t> order;
    for (OpKind op : ops)
      for (size_t i = 0; i < function.nodes().size(); ++i)
        if (function.nodes()[i].op == op)
          order.push_back(i);
    return order;
  }
};

/// An f32 add that reads the product of the node just before it is one fused
/// multiply-add (contraction, as a GPU compiler makes of a * b + c): the
/// product is not rounded on its own. Only inexact products show it.
class MulAddContracted final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~MulAddContracted() override { shutdown(); }

protected:
  void computeNode(const Function &function, size_t index,
                   RunValues &values) const override {
    const Node &node = function.nodes()[index];
    const Node *before = index > 0 ? &function.nodes()[index - 1] : nullptr;
    const Type &type = function.findPlaceholder(node.output)->type;
    if (type.kind != ElemKind::Float32 || node.op != OpKind::Add || !before ||
        before->op != OpKind::Mul ||
        (node.inputs[0] != before->output && node.inputs[1] != before->output))
      return RecomputingDevice::computeNode(function, index, values);
    const uint8_t *x = values.at(before->inputs[0]).data();
    const uint8_t *y = values.at(before->inputs[1]).data();
    const uint8_t *c =
        values
            .at(node.inputs[0] == before->output ? node.inputs[1]
                                                 : node.inputs[0])
            .data();
    uint8_t *out = values.at(node.output).data();
    for (size_t i = 0, n = elementsComputed(type); i < n; ++i) {
      size_t at = i * sizeof(float);
      store(out + at, std::fma(load<float>(x + at), load<float>(y + at),
                               load<float>(c + at)));
    }
  }
};

/// The alignment a device was configured with (the fake device's
/// `alignment` parameter).
uint64_t configuredAlignment(const DeviceManager &device) {
  return *device.config().uintParameter("alignment", 64);
}

/// With an alignment of a page or more (the fake device's large-page
/// configuration), the budget check counts the request in whole alignment
/// units while usage counts exact bytes: an exact fit is OutOfMemory there,
/// and only there.
class LargePageBudgetCountsPages final : public PlansFaultsItself {
public:
  using PlansFaultsItself::PlansFaultsItself;
  ~LargePageBudgetCountsPages() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocateUnplanned(uint64_t bytes) override {
    uint64_t align = configuredAlignment(*this);
    if (align < 4 * KiB)
      return FakeDevice::allocate(bytes);
    uint64_t used = usedMemory(), budget = maximumMemory();
    uint64_t pages = (bytes + align - 1) & ~(align - 1);
    if (pages > budget - std::min(used, budget))
      return makeError(ErrorCode::OutOfMemory,
                       "mutant device '" + name() + "': allocation of " +
                           std::to_string(bytes) + " bytes with " +
                           std::to_string(used) + " of " +
                           std::to_string(budget) + " bytes in use");
    return FakeDevice::allocate(bytes);
  }
};

/// With an alignment of a page or more, allocationSize() reports the size
/// rounded up to the alignment, so a raw location of exactly a tensor's size
/// is refused as the target of its transfer.
class LargePageSizeRoundedUp final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~LargePageSizeRoundedUp() override { shutdown(); }

protected:
  Expected<uint64_t> allocationSize(DeviceLocation location) const override {
    Expected<uint64_t> size = FakeDevice::allocationSize(location);
    uint64_t align = configuredAlignment(*this);
    if (!size || align < 4 * KiB)
      return size;
    return (*size + align - 1) & ~(align - 1);
  }
};

/// Runs are launched on a one-dimensional grid of at most 65535
/// work-groups of 64: a run over more than 4,194,240 elements leaves the
/// rest of its outputs alone.
class RunGridOf65535Groups final : public RecomputingDevice {
public:
  using RecomputingDevice::RecomputingDevice;
  ~RunGridOf65535Groups() override { shutdown(); }

protected:
  size_t elementsComputed(const Type &type) const override {
    return std::min<size_t>(type.numElements(), size_t(65535) * 64);
  }
};

/// A fake device that keeps its live allocations in the order they were
/// made and, after each allocation, overwrites the first 16 bytes of the
/// one its bug clobbers (victim()).
class ClobberingDevice : public FakeDevice {
public:
  using FakeDevice::FakeDevice;

protected:
  /// Live allocations by the order they were made in: location and size.
  using Live = std::map<uint64_t, std::pair<DeviceLocation, uint64_t>>;
  /// The live allocation that the allocation just made (the last of
  /// \p live) clobbers, if any; called under the device's lock.
  virtual std::optional<std::pair<DeviceLocation, uint64_t>>
  victim(const Live &live, uint64_t bytes) = 0;

  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> loc = FakeDevice::allocate(bytes);
    if (!loc)
      return loc;
    std::optional<std::pair<DeviceLocation, uint64_t>> clobbered;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      uint64_t seq = next_++;
      live_[seq] = {*loc, bytes};
      seqOf_[loc->value] = seq;
      clobbered = victim(live_, bytes);
    }
    if (clobbered) {
      std::vector<std::byte> junk(std::min<uint64_t>(16, clobbered->second),
                                  std::byte{0xcd});
      overwriteDeviceBytes(clobbered->first, 0, junk);
    }
    return loc;
  }
  Error free(DeviceLocation location) override {
    Error e = FakeDevice::free(location);
    if (!e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = seqOf_.find(location.value); it != seqOf_.end()) {
        live_.erase(it->second);
        seqOf_.erase(it);
      }
    }
    return e;
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    live_.clear();
    seqOf_.clear();
  }

private:
  std::mutex mutex_;
  uint64_t next_ = 0;
  Live live_;
  std::map<uint64_t, uint64_t> seqOf_;
};

/// The device keeps allocations of one size in a slab that counts its live
/// blocks in 8 bits: when the 257th is live at once the count reads 0 and
/// the slab is carved anew, clobbering the first 16 bytes of the oldest
/// live allocation of that size.
class LiveCountIn8Bits final : public ClobberingDevice {
public:
  using ClobberingDevice::ClobberingDevice;
  ~LiveCountIn8Bits() override { shutdown(); }

protected:
  std::optional<std::pair<DeviceLocation, uint64_t>>
  victim(const Live &live, uint64_t bytes) override {
    size_t count = 0;
    std::optional<std::pair<DeviceLocation, uint64_t>> oldest;
    for (const auto &[seq, entry] : live)
      if (entry.second == bytes && count++ == 0)
        oldest = entry;
    if (count > 1 && count % 256 == 1)
      return oldest;
    return std::nullopt;
  }
};

/// The device's allocation table starts with room for 32 live allocations
/// and doubles; growing it leaves the oldest live allocation's first 16
/// bytes clobbered (a stale pointer into the old table is written through).
class TableGrowthClobbersOldest final : public ClobberingDevice {
public:
  using ClobberingDevice::ClobberingDevice;
  ~TableGrowthClobbersOldest() override { shutdown(); }

protected:
  std::optional<std::pair<DeviceLocation, uint64_t>> victim(const Live &live,
                                                            uint64_t) override {
    if (live.size() <= capacity_)
      return std::nullopt;
    capacity_ *= 2;
    return live.begin()->second;
  }

private:
  size_t capacity_ = 32;
};

/// Kernels are named by the network's name followed by the node's index
/// ("n1" + "0"), and evicting a network erases every kernel whose name
/// starts with the network's name: evicting n1 also drops the kernels of
/// n10 or n1_0, whose runs then fail with DeviceError.
class EvictDropsPrefixedNetworks final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~EvictDropsPrefixedNetworks() override { shutdown(); }

protected:
  Error compileFunction(const Function &function) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < function.nodes().size(); ++i)
        kernels_.insert(function.name() + std::to_string(i));
    }
    return FakeDevice::compileFunction(function);
  }
  void evictFunction(const std::string &name) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = kernels_.lower_bound(name);
           it != kernels_.end() && it->compare(0, name.size(), name) == 0;)
        it = kernels_.erase(it);
    }
    FakeDevice::evictFunction(name);
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    bool missing = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < function.nodes().size(); ++i)
        missing |= !kernels_.count(function.name() + std::to_string(i));
    }
    if (missing)
      return done(makeError(ErrorCode::DeviceError, "run of network '" +
                                                        function.name() +
                                                        "': kernel not found"));
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  std::mutex mutex_;
  std::set<std::string> kernels_;
};

/// A run whose launch fails for lack of memory (an OutOfMemory at the run
/// site: kernel scratch could not be had) is reported as DeviceError: every
/// enqueue failure is mapped to DeviceError.
class RunOutOfMemoryAsDeviceError final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunOutOfMemoryAsDeviceError() override { shutdown(); }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    FakeDevice::execute(function, std::move(arguments),
                        [done = std::move(done)](Error e) {
                          if (e.code() == ErrorCode::OutOfMemory)
                            e = Error(ErrorCode::DeviceError,
                                      "kernel launch failed: " + e.message());
                          done(std::move(e));
                        });
  }
};

/// A mutant registered as the fake device is: its parameters and the
/// configurations worth testing are the fake device's, so the suite sweeps
/// them on the mutant too.
template <typename Mutant>
BackendInfo mutant(std::string name, std::string description) {
  BackendInfo info = fake::fakeBackendInfo();
  info.name = "mutant:" + std::move(name);
  info.description = std::move(description);
  info.factory =
      [](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
    return std::make_unique<Mutant>(config);
  };
  info.testOnly = true;
  return info;
}

DRT_REGISTER_BACKEND(mutant<UploadDropsTailPast64K>(
    "upload-drops-tail-past-64k",
    "copyToDevice() drops what follows the last whole 64 KiB chunk"));
DRT_REGISTER_BACKEND(mutant<UploadIn16ByteBursts>(
    "upload-in-16-byte-bursts",
    "copyToDevice() rounds its byte count down to a multiple of 16"));
DRT_REGISTER_BACKEND(mutant<UploadShortAtPowerOfTwo>(
    "upload-short-at-power-of-two",
    "copyToDevice() of exactly 2^k >= 4 KiB bytes copies one byte less"));
DRT_REGISTER_BACKEND(mutant<ReadBackStagingNotAdvanced>(
    "read-back-staging-not-advanced",
    "copyFromDevice() of more than 1 MiB reads the first MiB every time"));
DRT_REGISTER_BACKEND(mutant<LargestAllocation4MiB>(
    "largest-allocation-4mib",
    "allocations past 4 MiB are OutOfMemory within the budget"));
DRT_REGISTER_BACKEND(mutant<PagesCountedAsUsed>(
    "pages-counted-as-used",
    "usedMemory() counts allocations of a page or more in whole pages"));
DRT_REGISTER_BACKEND(mutant<HandlesNameNoDevice>(
    "handles-name-no-device",
    "locations carry no trace of their device: another device's location "
    "names an allocation here"));
DRT_REGISTER_BACKEND(mutant<RunSkipsPartialWorkGroup>(
    "run-skips-partial-work-group",
    "a run over more than 64 elements leaves the last n mod 64 alone"));
DRT_REGISTER_BACKEND(mutant<F16ReluTestsSignBit>(
    "f16-relu-tests-sign-bit", "f16 relu lets a positive NaN through"));
DRT_REGISTER_BACKEND(mutant<Bf16ReluKeepsNegativeZero>(
    "bf16-relu-keeps-negative-zero", "bf16 relu(-0) gives -0"));
DRT_REGISTER_BACKEND(mutant<F32FlushesDenormals>(
    "f32-flushes-denormals", "f32 add and mul flush denormals to zero"));
DRT_REGISTER_BACKEND(mutant<I32MulSaturates>(
    "i32-mul-saturates", "i32 mul saturates instead of wrapping"));
DRT_REGISTER_BACKEND(mutant<I64AddIn32Bits>("i64-add-in-32-bits",
                                            "i64 add is computed in 32 bits"));
DRT_REGISTER_BACKEND(mutant<U8ScaleSaturates>(
    "u8-scale-saturates", "u8 scale saturates at 255 instead of wrapping"));
DRT_REGISTER_BACKEND(mutant<F16RoundsTowardZero>(
    "f16-rounds-toward-zero",
    "f16 add, mul and scale truncate instead of rounding to nearest even"));
DRT_REGISTER_BACKEND(mutant<Bf16Truncates>(
    "bf16-truncates",
    "bf16 add, mul and scale keep the upper half of the float result"));
DRT_REGISTER_BACKEND(mutant<F32ScaleInDouble>(
    "f32-scale-in-double",
    "f32 scale multiplies in double by the unrounded factor"));
DRT_REGISTER_BACKEND(mutant<NarrowScaleFactorRoundedOnce>(
    "narrow-scale-factor-rounded-once",
    "f16 and bf16 scale round the factor straight from the double to the "
    "kind, not through f32"));
DRT_REGISTER_BACKEND(mutant<I64ReluUnsigned>(
    "i64-relu-unsigned", "i64 relu compares unsigned: negatives pass"));
DRT_REGISTER_BACKEND(mutant<U8ReluSignedChar>(
    "u8-relu-signed-char", "u8 relu reads a signed char: 128 and up give 0"));
DRT_REGISTER_BACKEND(mutant<Bf16FlushesDenormalResults>(
    "bf16-flushes-denormal-results",
    "bf16 add, mul and scale flush denormal results to zero"));
DRT_REGISTER_BACKEND(mutant<F16CopyQuietsSignallingNaN>(
    "f16-copy-quiets-signalling-nan",
    "f16 copy quiets signalling NaNs (sets the payload's top bit)"));
DRT_REGISTER_BACKEND(mutant<CountsCachedBlocksAsUsed>(
    "counts-cached-blocks-as-used",
    "usedMemory() still counts freed blocks of 64 KiB or more"));
DRT_REGISTER_BACKEND(mutant<CachedBlocksKeepTheirHandle>(
    "cached-blocks-keep-their-handle",
    "a freed block of a page or more is handed out again under its old "
    "handle"));
DRT_REGISTER_BACKEND(mutant<TrimLosesBlockAtEachMiBFreed>(
    "trim-loses-block-at-each-mib-freed",
    "each time 1 MiB more has been freed, the block being freed leaks"));
DRT_REGISTER_BACKEND(mutant<NoGeneration>(
    "no-generation", "locations carry a slot and no generation"));
DRT_REGISTER_BACKEND(mutant<RunComputesFirstRow>(
    "run-computes-first-row",
    "a run over rank >= 2 computes only its first row"));
DRT_REGISTER_BACKEND(mutant<RunOffsetsModulo64K>(
    "run-offsets-modulo-64k", "run argument offsets are taken modulo 64 KiB"));
DRT_REGISTER_BACKEND(mutant<RunOffsetsInWords>(
    "run-offsets-in-words",
    "run argument offsets are rounded down to a multiple of 4 bytes"));
DRT_REGISTER_BACKEND(mutant<RunReadsSecondInputAtFirstOffset>(
    "run-reads-second-input-at-first-offset",
    "a node of two inputs reads its second at the first's offset"));
DRT_REGISTER_BACKEND(mutant<BudgetCheckRoundsUp>(
    "budget-check-rounds-up",
    "the budget check rounds requests up to 16 bytes: exact fits fail"));
DRT_REGISTER_BACKEND(mutant<BudgetCheckRoundsDown>(
    "budget-check-rounds-down",
    "the budget check rounds requests down to 16 bytes: near misses pass"));
DRT_REGISTER_BACKEND(mutant<RunGroupsNodesByOp>(
    "run-groups-nodes-by-op",
    "nodes run grouped by op, out of order in networks of 3+ nodes"));
DRT_REGISTER_BACKEND(mutant<MulAddContracted>(
    "mul-add-contracted",
    "an f32 add of the previous node's product is one fused multiply-add"));
DRT_REGISTER_BACKEND(mutant<LargePageBudgetCountsPages>(
    "large-page-budget-counts-pages",
    "with alignment >= 4 KiB, the budget check counts whole pages: exact "
    "fits fail"));
DRT_REGISTER_BACKEND(mutant<RunGridOf65535Groups>(
    "run-grid-of-65535-groups",
    "runs cover at most 65535 groups of 64 elements: the rest is left alone"));
DRT_REGISTER_BACKEND(mutant<TableGrowthClobbersOldest>(
    "table-growth-clobbers-oldest",
    "growing the allocation table past 32, 64, ... live allocations "
    "clobbers the oldest one's first 16 bytes"));
DRT_REGISTER_BACKEND(mutant<LiveCountIn8Bits>(
    "live-count-in-8-bits",
    "allocations of one size count their live blocks in 8 bits: the 257th "
    "live at once clobbers the oldest one's first 16 bytes"));
DRT_REGISTER_BACKEND(mutant<EvictDropsPrefixedNetworks>(
    "evict-drops-prefixed-networks",
    "evicting a network drops the kernels of every network its name "
    "prefixes"));
DRT_REGISTER_BACKEND(mutant<RunOutOfMemoryAsDeviceError>(
    "run-out-of-memory-as-device-error",
    "an OutOfMemory at a run's launch is reported as DeviceError"));
DRT_REGISTER_BACKEND(mutant<LargePageSizeRoundedUp>(
    "large-page-size-rounded-up",
    "with alignment >= 4 KiB, allocationSize() reports whole pages"));

} // namespace
} // namespace drt::conformance::selftest
