//===- Mutants.cpp - Test-only backends that break one rule each ----------===//
//
// The suite's self-test: each mutant is a small, synchronous, in-memory
// DeviceManager that is correct except for one deliberate bug. They register
// as "mutant:NAME" with testOnly set, so "--backend all" never picks them,
// while "--backend mutant:NAME" and drt-replay run the suite against them.
// A new mutant is one more Bug value and one more registration.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/FaultPlan.h"
#include "drt/LocationTable.h"

#include <cstring>
#include <vector>

namespace drt::conformance::selftest {
namespace {

/// The one rule a mutant breaks.
enum class Bug {
  /// free() forgets to subtract the allocation from usedMemory().
  AccountingDoesNotSubtract,
  /// copyFromDevice() corrupts the first byte it reads back.
  CorruptReadBack,
  /// copyToDevice() completes twice.
  DoubleCompletion,
  /// allocate() ignores the memory budget.
  IgnoresBudget,
};

class MutantDevice final : public DeviceManager {
public:
  MutantDevice(DeviceConfig config, Bug bug)
      : DeviceManager(std::move(config)), bug_(bug) {}
  ~MutantDevice() override { shutdown(); }

  Error init() override {
    budget_ = config().memoryBudget ? config().memoryBudget : DefaultBudget;
    return Error::success();
  }
  Capabilities capabilities() const override { return mutantCapabilities(); }
  uint64_t maximumMemory() const override { return budget_; }
  uint64_t usedMemory() const override { return used_; }
  uint64_t physicalMemoryInUse() const override { return physical_; }
  size_t liveAllocations() const override { return table_.size(); }
  DeviceStats stats() const override { return stats_; }
  Error injectFault(const FaultSpec &fault) override {
    if (isShutDown())
      return makeError(ErrorCode::DeviceLost,
                       "injectFault: device '" + name() + "' is shut down");
    return faults_.add(fault);
  }

  static Capabilities mutantCapabilities() {
    Capabilities caps;
    caps.residentTensors = true;
    caps.asynchronousCompletion = false;
    caps.memoryBudget = true;
    caps.faultInjection = true;
    caps.deviceLoss = true;
    return caps;
  }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    if (Error e = strike(FaultSite::Allocation))
      return e;
    if (bug_ != Bug::IgnoresBudget &&
        bytes > budget_ - std::min(budget_, used_))
      return makeError(ErrorCode::OutOfMemory,
                       "mutant device '" + name() +
                           "': " + std::to_string(bytes) + " bytes with " +
                           std::to_string(used_) + " of " +
                           std::to_string(budget_) + " in use");
    used_ += bytes;
    physical_ += bytes;
    ++stats_.allocations;
    return table_.insert(std::vector<std::byte>(bytes));
  }

  Error free(DeviceLocation location) override {
    auto entry = table_.erase(location);
    if (!entry)
      return makeError(ErrorCode::InvalidArgument, "mutant device '" + name() +
                                                       "': stale location " +
                                                       location.toString());
    if (bug_ != Bug::AccountingDoesNotSubtract)
      used_ -= entry->size();
    physical_ -= entry->size();
    ++stats_.frees;
    return Error::success();
  }

  Expected<uint64_t> allocationSize(DeviceLocation location) const override {
    const auto *entry = table_.lookup(location);
    if (!entry)
      return makeError(ErrorCode::InvalidArgument, "mutant device '" + name() +
                                                       "': stale location " +
                                                       location.toString());
    return uint64_t(entry->size());
  }

  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (Error e = strike(FaultSite::TransferToDevice))
      return done(std::move(e));
    auto *entry = table_.lookup(dst);
    if (!entry)
      return done(makeError(ErrorCode::InvalidArgument, "stale location"));
    std::memcpy(entry->data(), src, bytes);
    ++stats_.transfersToDevice;
    stats_.bytesToDevice += bytes;
    if (bug_ == Bug::DoubleCompletion)
      done(Error::success());
    done(Error::success());
  }

  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (Error e = strike(FaultSite::TransferFromDevice))
      return done(std::move(e));
    auto *entry = table_.lookup(src);
    if (!entry)
      return done(makeError(ErrorCode::InvalidArgument, "stale location"));
    std::memcpy(dst, entry->data(), bytes);
    if (bug_ == Bug::CorruptReadBack && bytes > 0)
      dst[0] ^= std::byte{0x40};
    ++stats_.transfersFromDevice;
    stats_.bytesFromDevice += bytes;
    done(Error::success());
  }

  Error compileFunction(const Function &) override { return Error::success(); }
  void evictFunction(const std::string &) override {}

  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    if (Error e = strike(FaultSite::Run))
      return done(std::move(e));
    const auto &placeholders = function.placeholders();
    auto data = [&](const std::string &name) -> std::byte * {
      int i = function.placeholderIndex(name);
      return table_.lookup(arguments[i].location)->data() +
             arguments[i].offsetBytes;
    };
    for (const Node &node : function.nodes()) {
      const Type &type =
          placeholders[function.placeholderIndex(node.output)].type;
      size_t n = type.numElements();
      std::byte *out = data(node.output);
      std::byte *a = data(node.inputs[0]);
      std::byte *b = node.inputs.size() > 1 ? data(node.inputs[1]) : a;
      for (size_t i = 0; i < n; ++i) {
        if (type.kind == ElemKind::Float32) {
          float x, y, r = 0;
          std::memcpy(&x, a + 4 * i, 4);
          std::memcpy(&y, b + 4 * i, 4);
          switch (node.op) {
          case OpKind::Add:
            r = x + y;
            break;
          case OpKind::Mul:
            r = x * y;
            break;
          case OpKind::Relu:
            r = x > 0 ? x : 0.0f;
            break;
          case OpKind::Scale:
            r = float(double(x) * node.factor);
            break;
          case OpKind::Copy:
            r = x;
            break;
          }
          std::memcpy(out + 4 * i, &r, 4);
        } else {
          uint32_t x, y, r = 0;
          std::memcpy(&x, a + 4 * i, 4);
          std::memcpy(&y, b + 4 * i, 4);
          switch (node.op) {
          case OpKind::Add:
            r = x + y;
            break;
          case OpKind::Mul:
            r = x * y;
            break;
          case OpKind::Relu:
            r = int32_t(x) > 0 ? x : 0;
            break;
          case OpKind::Scale:
            r = x * uint32_t(int64_t(node.factor));
            break;
          case OpKind::Copy:
            r = x;
            break;
          }
          std::memcpy(out + 4 * i, &r, 4);
        }
      }
    }
    ++stats_.runs;
    done(Error::success());
  }

  void shutdownBackend() override {
    table_.clear();
    used_ = 0;
    physical_ = 0;
  }

private:
  static constexpr uint64_t DefaultBudget = uint64_t(1) << 30;

  Error strike(FaultSite site) {
    std::optional<ErrorCode> code = faults_.strike(site);
    if (!code)
      return Error::success();
    Error e(*code, "injected fault at " + std::string(faultSiteName(site)) +
                       " on mutant device '" + name() + "'");
    if (*code == ErrorCode::DeviceLost)
      shutdown();
    return e;
  }

  Bug bug_;
  uint64_t budget_ = DefaultBudget;
  uint64_t used_ = 0;
  uint64_t physical_ = 0;
  DeviceStats stats_;
  FaultPlan faults_;
  LocationTable<std::vector<std::byte>> table_;
};

BackendInfo mutant(std::string name, std::string description, Bug bug) {
  return BackendInfo{
      "mutant:" + std::move(name), std::move(description),
      MutantDevice::mutantCapabilities(),
      [bug](const DeviceConfig &config) -> std::unique_ptr<DeviceManager> {
        return std::make_unique<MutantDevice>(config, bug);
      },
      /*testOnly=*/true};
}

DRT_REGISTER_BACKEND(mutant("accounting-no-subtract",
                            "free() does not subtract from usedMemory()",
                            Bug::AccountingDoesNotSubtract));
DRT_REGISTER_BACKEND(mutant("corrupt-read-back",
                            "copyFromDevice() flips a bit of the first byte",
                            Bug::CorruptReadBack));
DRT_REGISTER_BACKEND(mutant("double-completion",
                            "copyToDevice() completes twice",
                            Bug::DoubleCompletion));
DRT_REGISTER_BACKEND(mutant("ignores-budget",
                            "allocate() ignores the memory budget",
                            Bug::IgnoresBudget));

} // namespace
} // namespace drt::conformance::selftest
