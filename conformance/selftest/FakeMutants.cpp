//===- FakeMutants.cpp - The reference device with one bug each -----------===//
//
// The suite's self-test for backend rules: each mutant derives from the real
// FakeDevice, changes one hook so that it breaks one rule of
// docs/semantics.md, and keeps everything else exact. They register as
// "mutant:NAME" with testOnly set, so "--backend all" never picks them, while
// "--backend mutant:NAME" and drt-replay run the suite against them.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/fake/FakeDevice.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace drt::conformance::selftest {
namespace {

using fake::FakeDevice;

/// free() keeps the bytes in usedMemory(): accounting drifts upwards.
class AccountingDrift final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~AccountingDrift() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::usedMemory() + leaked_;
  }

protected:
  Error free(DeviceLocation location) override {
    Expected<uint64_t> size = allocationSize(location);
    Error e = FakeDevice::free(location);
    if (!e && size) {
      std::lock_guard<std::mutex> lock(mutex_);
      leaked_ += *size;
    }
    return e;
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    leaked_ = 0;
  }

private:
  mutable std::mutex mutex_;
  uint64_t leaked_ = 0;
};

/// A fake device that knows which location holds each slot of its table
/// now: the bookkeeping of mutants that find an allocation by its slot and
/// less than its whole generation.
class SlotTrackingDevice : public FakeDevice {
public:
  using FakeDevice::FakeDevice;

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    Expected<DeviceLocation> loc = FakeDevice::allocate(bytes);
    if (loc) {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_[slotOf(*loc)] = *loc;
    }
    return loc;
  }
  /// The location that holds \p location's slot now, if any.
  std::optional<DeviceLocation> holderOf(DeviceLocation location) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(slotOf(location));
    if (it == slots_.end())
      return std::nullopt;
    return it->second;
  }
  /// Frees \p holder, which holds its slot, and forgets the slot.
  Error freeHolder(DeviceLocation holder) {
    Error e = FakeDevice::free(holder);
    if (!e) {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_.erase(slotOf(holder));
    }
    return e;
  }
  void shutdownBackend() override {
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    slots_.clear();
  }

private:
  static uint32_t slotOf(DeviceLocation l) { return uint32_t(l.value); }
  std::mutex mutex_;
  std::map<uint32_t, DeviceLocation> slots_;
};

/// free() finds an allocation by its slot alone, without the generation: a
/// stale location (a double release) frees whatever lives in that slot now,
/// or "succeeds" when nothing does.
class DoubleFree final : public SlotTrackingDevice {
public:
  using SlotTrackingDevice::SlotTrackingDevice;
  ~DoubleFree() override { shutdown(); }

protected:
  Error free(DeviceLocation location) override {
    std::optional<DeviceLocation> holder = holderOf(location);
    if (!holder)
      return Error::success();
    return freeHolder(*holder);
  }
};

/// free() compares a location's generation in 8 bits: a stale location
/// whose slot has been handed out again a multiple of 256 times names the
/// allocation that holds the slot now, and frees that one.
class GenerationIn8Bits final : public SlotTrackingDevice {
public:
  using SlotTrackingDevice::SlotTrackingDevice;
  ~GenerationIn8Bits() override { shutdown(); }

protected:
  Error free(DeviceLocation location) override {
    std::optional<DeviceLocation> holder = holderOf(location);
    if (holder && uint8_t(holder->value >> 32) == uint8_t(location.value >> 32))
      return freeHolder(*holder);
    return FakeDevice::free(location);
  }
};

/// copyToDevice() completes twice.
class CallbackTwice final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CallbackTwice() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes, [done](Error e) {
      done(e);
      done(std::move(e));
    });
  }
};

/// A device whose copies and runs drop the completions that
/// Derived::dropped(const Error &) picks: their callbacks are never called.
/// The check is a plain call, not a virtual one: a completion that the base
/// class's destructor delivers (its shutdown) must not meet a pure virtual
/// function.
template <typename Derived> class DropsCompletions : public FakeDevice {
public:
  using FakeDevice::FakeDevice;

protected:
  CompletionCallback unlessDropped(CompletionCallback done) {
    return [self = static_cast<const Derived *>(this),
            done = std::move(done)](Error e) {
      if (!self->dropped(e))
        done(std::move(e));
    };
  }
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes, unlessDropped(std::move(done)));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, unlessDropped(std::move(done)));
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    FakeDevice::execute(function, std::move(arguments),
                        unlessDropped(std::move(done)));
  }
};

/// A failing copy or run never completes: its callback is dropped.
class CallbackNeverOnError final
    : public DropsCompletions<CallbackNeverOnError> {
public:
  using DropsCompletions::DropsCompletions;
  ~CallbackNeverOnError() override { shutdown(); }
  bool dropped(const Error &e) const { return !e.isSuccess(); }
};

/// A failing copy to the device is reported as a success.
class ErrorSwallowed final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ErrorSwallowed() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    FakeDevice::copyToDevice(dst, src, bytes,
                             [done](Error) { done(Error::success()); });
  }
};

/// execute() keeps a device copy of every output it writes (a scratch buffer
/// that is never freed). Only on a device with no planned faults: the extra
/// allocations would strike them and change what fails.
class RunLeaksOutputCopies final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunLeaksOutputCopies() override { shutdown(); }
  Error injectFault(const FaultSpec &fault) override {
    faultsPlanned_ = true;
    return FakeDevice::injectFault(fault);
  }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    if (!faultsPlanned_)
      for (const Node &node : function.nodes())
        if (const Placeholder *out = function.findPlaceholder(node.output))
          (void)allocate(out->type.sizeInBytes());
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  std::atomic<bool> faultsPlanned_{false};
};

/// \p done, called after the first of the \p bytes read back into \p dst
/// is flipped when the read-back succeeded.
CompletionCallback flippingFirstByte(CompletionCallback done, std::byte *dst,
                                     uint64_t bytes) {
  return [done = std::move(done), dst, bytes](Error e) {
    if (e.isSuccess() && bytes > 0)
      dst[0] ^= std::byte{0x40};
    done(std::move(e));
  };
}

/// copyFromDevice() flips a bit of the first byte it reads back.
class CorruptReadBack final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CorruptReadBack() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes,
                               flippingFirstByte(std::move(done), dst, bytes));
  }
};

/// A read-back's first byte is flipped on every device made after the
/// process's 40th: a state of the backend's that outlives its devices, so
/// that a case fails only after earlier cases in the same process, and its
/// minimal scenario passes when run alone (the conformance program says so).
class CorruptsAfterFortyDevices final : public FakeDevice {
public:
  explicit CorruptsAfterFortyDevices(DeviceConfig config)
      : FakeDevice(std::move(config)), corrupts_(++made() > 40) {}
  ~CorruptsAfterFortyDevices() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(
        src, dst, bytes,
        corrupts_ ? flippingFirstByte(std::move(done), dst, bytes)
                  : std::move(done));
  }

private:
  static std::atomic<int> &made() {
    static std::atomic<int> count{0};
    return count;
  }
  bool corrupts_;
};

/// copyFromDevice() moves whole bursts of 64 bytes: the last one writes the
/// device's zero padding past the end of the host buffer it was given.
class ReadBackPastTheEnd final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackPastTheEnd() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, [done, dst, bytes](Error e) {
      if (e.isSuccess())
        for (uint64_t i = bytes; i % 64 != 0; ++i)
          dst[i] = std::byte{0};
      done(std::move(e));
    });
  }
};

/// copyFromDevice() stages through one buffer that every call shares,
/// without a lock: the device's copy lands in it, takes a while (a DMA), and
/// is then copied out. Two read-backs at the same time, of different records,
/// leave one of them the other's bytes.
class ReadBackSharedStaging final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackSharedStaging() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes > staging_.size())
      return FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
    std::byte *staging = staging_.data();
    FakeDevice::copyFromDevice(
        src, staging, bytes, [staging, dst, bytes, done](Error e) {
          std::this_thread::sleep_for(std::chrono::microseconds(500));
          if (e.isSuccess())
            std::memcpy(dst, staging, bytes);
          done(std::move(e));
        });
  }

private:
  std::vector<std::byte> staging_ = std::vector<std::byte>(size_t(1) << 20);
};

/// execute() keeps its arguments where every run's kernel reads them (as a
/// kernel object's arguments are set, then enqueued), without a lock: a run
/// that another thread starts meanwhile computes over the other run's
/// buffers.
class RunSharesKernelArguments final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunSharesKernelArguments() override { shutdown(); }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kernelArguments_ = std::move(arguments);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<RunArgument> set;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      set = kernelArguments_;
    }
    set.resize(function.placeholders().size());
    FakeDevice::execute(function, std::move(set), std::move(done));
  }

private:
  std::mutex mutex_;
  std::vector<RunArgument> kernelArguments_;
};

/// execute() holds a run for 200 us and lets a run issued meanwhile
/// overtake it (a scheduler that reorders work it takes for independent),
/// though the device declares that it performs runs in order: a run that reads
/// what the run before it writes sees the old bytes. A synchronous device never
/// has a run waiting, so there it changes nothing.
class RunsOutOfOrder final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~RunsOutOfOrder() override {
    shutdown();
    if (dispatcher_.joinable())
      dispatcher_.join();
  }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    if (!capabilities().asynchronousCompletion)
      return FakeDevice::execute(function, std::move(arguments),
                                 std::move(done));
    std::unique_lock<std::mutex> lock(mutex_);
    if (held_) {
      Held earlier = std::move(*held_);
      held_.reset();
      lock.unlock();
      FakeDevice::execute(function, std::move(arguments), std::move(done));
      FakeDevice::execute(*earlier.function, std::move(earlier.arguments),
                          std::move(earlier.done));
      return;
    }
    held_ =
        Held{&function, std::move(arguments), std::move(done),
             std::chrono::steady_clock::now() + std::chrono::microseconds(200)};
    if (!dispatcher_.joinable() && !stop_)
      dispatcher_ = std::thread([this] { dispatch(); });
    wake_.notify_all();
  }

  void shutdownBackend() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (dispatcher_.joinable() &&
        dispatcher_.get_id() != std::this_thread::get_id())
      dispatcher_.join();
    submitHeld();
    FakeDevice::shutdownBackend();
  }

private:
  struct Held {
    const Function *function;
    std::vector<RunArgument> arguments;
    CompletionCallback done;
    std::chrono::steady_clock::time_point due;
  };

  /// Submits a held run once it is due and nothing overtook it.
  void dispatch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (!held_) {
        wake_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() < held_->due) {
        wake_.wait_until(lock, held_->due);
        continue;
      }
      lock.unlock();
      submitHeld();
      lock.lock();
    }
  }

  void submitHeld() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!held_)
      return;
    Held run = std::move(*held_);
    held_.reset();
    lock.unlock();
    FakeDevice::execute(*run.function, std::move(run.arguments),
                        std::move(run.done));
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<Held> held_;
  bool stop_ = false;
  std::thread dispatcher_;
};

/// Transfers and runs complete while the device holds the lock that its
/// accounting takes (a backend that calls done from inside its critical
/// section): a program that calls into the device from a completion
/// callback, to issue its next transfer, deadlocks. The lock is recursive,
/// so the calls the framework itself makes on the completing thread go
/// through; on the asynchronous device the worker calls back without it.
class CallsBackUnderItsLock final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CallsBackUnderItsLock() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return FakeDevice::usedMemory();
  }
  uint64_t physicalMemoryInUse() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return FakeDevice::physicalMemoryInUse();
  }
  size_t liveAllocations() const override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return FakeDevice::liveAllocations();
  }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    FakeDevice::copyToDevice(dst, src, bytes, std::move(done));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }

private:
  mutable std::recursive_mutex mutex_;
};

/// Uploads issued from inside one of the device's own completion callbacks,
/// on the thread delivering it, never complete: a backend whose worker
/// delivers a batch of completions and then clears its upload queue, losing
/// what the callbacks queued meanwhile. (The framework's own chains issue
/// runs and read-backs from completions, never an upload to the same
/// device: only a program's call from a callback meets this.)
class DropsUploadsIssuedFromCallbacks final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~DropsUploadsIssuedFromCallbacks() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    if (delivering != this)
      FakeDevice::copyToDevice(dst, src, bytes, delivered(std::move(done)));
  }
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    FakeDevice::copyFromDevice(src, dst, bytes, delivered(std::move(done)));
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    FakeDevice::execute(function, std::move(arguments),
                        delivered(std::move(done)));
  }

private:
  /// The device whose completion this thread is delivering.
  static thread_local const DropsUploadsIssuedFromCallbacks *delivering;
  CompletionCallback delivered(CompletionCallback done) {
    return [this, done = std::move(done)](Error e) {
      const DropsUploadsIssuedFromCallbacks *outer =
          std::exchange(delivering, this);
      done(std::move(e));
      delivering = outer;
    };
  }
};
thread_local const DropsUploadsIssuedFromCallbacks
    *DropsUploadsIssuedFromCallbacks::delivering = nullptr;

/// A read-back completes while the device holds its own (non-recursive) lock,
/// which free() takes too: on a synchronous device the completion runs on the
/// calling thread, and the framework's release of the device copy from there
/// blocks that thread for good.
class ReadBackCompletesHoldingItsLock final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackCompletesHoldingItsLock() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    std::lock_guard<std::mutex> lock(mutex_);
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
  Error free(DeviceLocation location) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::free(location);
  }

private:
  std::mutex mutex_;
};

/// A read-back of more than 64 KiB writes through a staging table it never
/// made: the process dies of SIGSEGV inside the backend.
class ReadBackCrashesPast64k final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackCrashesPast64k() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes > 64 * 1024)
      staging_[bytes % 64] = std::byte{1};
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }

private:
  // Read anew at each use, so that the compiler cannot tell it is null.
  std::byte *volatile staging_ = nullptr;
};

/// A read-back of more than 64 KiB overruns a scratch block of the heap by
/// 16 bytes, over the size of the next block, then frees it: the C
/// library's free() finds the heap corrupt and aborts the process from
/// inside, holding its lock (the report must not need the heap).
class ReadBackCorruptsTheHeapPast64k final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackCorruptsTheHeapPast64k() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes > 64 * 1024) {
      // Larger than the C library's per-thread caches: freed under the
      // heap's lock.
      auto *scratch = static_cast<unsigned char *>(std::malloc(scratchBytes_));
      std::memset(scratch, 0xff, scratchBytes_ + 16);
      // The compiler may not drop the stores as dead before the free.
      asm volatile("" : : "r"(scratch) : "memory");
      std::free(scratch);
    }
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }

private:
  // Read anew at each use, so that the compiler cannot see the overrun.
  volatile size_t scratchBytes_ = 4096;
};

/// Installs, once per process, handlers of the fatal signals as LLVM's do
/// (an OpenCL compiler's, on its first compilation): each puts back the
/// handlers it found and returns. A fault then strikes again and reaches
/// the handler put back, but abort() resets SIGABRT to its default first.
void installLibraryCrashHandlers() {
  static constexpr int Signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  static struct sigaction previous[std::size(Signals)];
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_handler = [](int) {
      for (size_t i = 0; i < std::size(Signals); ++i)
        sigaction(Signals[i], &previous[i], nullptr);
    };
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(Signals); ++i)
      sigaction(Signals[i], &action, &previous[i]);
  });
}

/// A read-back of more than 64 KiB fails an assertion (abort()), in a
/// backend whose libraries install handlers of the fatal signals over the
/// harness's when its first device starts.
class ReadBackAbortsPast64k final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackAbortsPast64k() override { shutdown(); }

  Error init() override {
    installLibraryCrashHandlers();
    return FakeDevice::init();
  }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes > 64 * 1024)
      std::abort();
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
};

/// A read-back of more than 64 KiB throws (an index past a table, as
/// std::vector::at reports it) instead of reporting an Error.
class ReadBackThrowsPast64k final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReadBackThrowsPast64k() override { shutdown(); }

protected:
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override {
    if (bytes > 64 * 1024)
      throw std::out_of_range("staging table index " + std::to_string(bytes));
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
};

/// On an asynchronous device, an upload completes on the caller's thread
/// before copyToDevice() returns (it waits for its worker), though the
/// caller does not wait for it: a caller that holds a lock across the call
/// and takes it in the callback deadlocks. (A completion that never comes,
/// as when an injected loss shuts the device down, is left to the worker
/// after a second.)
class CompletesUploadsInline final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CompletesUploadsInline() override { shutdown(); }

protected:
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override {
    struct Handover {
      std::mutex mutex;
      std::condition_variable finished;
      std::optional<Error> result;
      CompletionCallback late;
    };
    auto h = std::make_shared<Handover>();
    FakeDevice::copyToDevice(dst, src, bytes, [h](Error e) {
      std::unique_lock<std::mutex> lock(h->mutex);
      if (h->late) {
        lock.unlock();
        return h->late(std::move(e));
      }
      h->result = std::move(e);
      h->finished.notify_all();
    });
    std::unique_lock<std::mutex> lock(h->mutex);
    if (!h->finished.wait_for(lock, std::chrono::seconds(1),
                              [&] { return h->result.has_value(); })) {
      h->late = std::move(done);
      return;
    }
    Error e = std::move(*h->result);
    lock.unlock();
    done(std::move(e));
  }
};

/// Once a shutdown has begun, a completion that reports DeviceLost is
/// dropped: the operations the shutdown meets in flight never complete (a
/// backend that forgets its queued work instead of failing it).
class ShutdownDropsLostCompletions final
    : public DropsCompletions<ShutdownDropsLostCompletions> {
public:
  using DropsCompletions::DropsCompletions;
  ~ShutdownDropsLostCompletions() override { shutdown(); }
  bool dropped(const Error &e) const {
    return stopping_ && e.code() == ErrorCode::DeviceLost;
  }

protected:
  void shutdownBackend() override {
    stopping_ = true;
    FakeDevice::shutdownBackend();
  }

private:
  std::atomic<bool> stopping_{false};
};

/// A run looks its network's kernels up when it executes, not when it is
/// issued: a network evicted while a run of it is still queued leaves that
/// run without kernels, and it fails.
class EvictStrandsQueuedRuns final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~EvictStrandsQueuedRuns() override { shutdown(); }

protected:
  Error compileFunction(const Function &function) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      compiled_.insert(function.name());
    }
    return FakeDevice::compileFunction(function);
  }
  void evictFunction(const std::string &name) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      compiled_.erase(name);
    }
    FakeDevice::evictFunction(name);
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    FakeDevice::execute(
        function, std::move(arguments),
        [this, name = function.name(), done = std::move(done)](Error e) {
          bool released;
          {
            std::lock_guard<std::mutex> lock(mutex_);
            released = !compiled_.count(name);
          }
          if (!e && released)
            e = makeError(ErrorCode::DeviceError,
                          "run of network '" + name +
                              "': its kernels were released before it ran");
          done(std::move(e));
        });
  }

private:
  std::mutex mutex_;
  std::set<std::string> compiled_;
};

/// A reference device whose configured budget a mutant keeps to itself:
/// the device under it allocates up to its default budget, and reports the
/// configured one.
class KeepsItsBudget : public FakeDevice {
public:
  explicit KeepsItsBudget(DeviceConfig config)
      : FakeDevice(withoutBudget(config)), budget_(config.memoryBudget) {}
  uint64_t maximumMemory() const override {
    return budget_ ? budget_ : FakeDevice::maximumMemory();
  }

protected:
  const uint64_t budget_;

private:
  static DeviceConfig withoutBudget(DeviceConfig config) {
    config.memoryBudget = 0;
    return config;
  }
};

/// The budget is reported but not enforced: allocations succeed up to the
/// default budget whatever the configured one says.
class IgnoresBudget final : public KeepsItsBudget {
public:
  using KeepsItsBudget::KeepsItsBudget;
  ~IgnoresBudget() override { shutdown(); }
};

/// Checks the budget, then allocates, without one lock across both (as a
/// backend whose driver allocation takes a while between its check and its
/// accounting): two threads can both pass the check and together go past
/// the budget.
class BudgetCheckedBeforeAllocating final : public KeepsItsBudget {
public:
  using KeepsItsBudget::KeepsItsBudget;
  ~BudgetCheckedBeforeAllocating() override { shutdown(); }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    if (budget_) {
      uint64_t used = usedMemory();
      if (used > budget_ || bytes > budget_ - used)
        return makeError(ErrorCode::OutOfMemory, "allocation of " +
                                                     std::to_string(bytes) +
                                                     " bytes past the budget");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return FakeDevice::allocate(bytes);
  }
};

/// execute() ignores the byte offsets of its arguments: a view of a resident
/// tensor bound to a run reads and writes its owner's first elements.
class IgnoresViewOffsets final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~IgnoresViewOffsets() override { shutdown(); }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    for (RunArgument &a : arguments)
      a.offsetBytes = 0;
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
};

/// execute() takes its k-th argument for the k-th placeholder in the order
/// the function's nodes first use them, not in the order the function
/// declares them: a backend that rebuilds its argument list from the nodes.
class ArgumentsInOrderOfFirstUse final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ArgumentsInOrderOfFirstUse() override { shutdown(); }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    std::vector<std::string_view> firstUse;
    auto note = [&](const std::string &name) {
      if (std::find(firstUse.begin(), firstUse.end(), name) == firstUse.end())
        firstUse.push_back(name);
    };
    for (const Node &n : function.nodes()) {
      for (const std::string &in : n.inputs)
        note(in);
      note(n.output);
    }
    std::vector<RunArgument> taken = arguments;
    for (size_t k = 0; k < firstUse.size() && k < arguments.size(); ++k)
      if (int at = function.placeholderIndex(firstUse[k]); at >= 0)
        taken[size_t(at)] = arguments[k];
    FakeDevice::execute(function, std::move(taken), std::move(done));
  }
};

/// execute() keeps its arguments in a file of 16 entries: the seventeenth
/// placeholder on takes the argument 16 places before it, as a launch
/// whose argument array or register file ends there.
class ArgumentsInFileOf16 final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ArgumentsInFileOf16() override { shutdown(); }

protected:
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    for (size_t k = 16; k < arguments.size(); ++k)
      arguments[k] = arguments[k % 16];
    FakeDevice::execute(function, std::move(arguments), std::move(done));
  }
};

/// allocationSize() reports the physical (rounded-up) size, so a location
/// from allocateDeviceMemory of exactly a tensor's size is refused.
class ReportsPhysicalSize final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ReportsPhysicalSize() override { shutdown(); }

protected:
  Expected<uint64_t> allocationSize(DeviceLocation location) const override {
    Expected<uint64_t> size = FakeDevice::allocationSize(location);
    if (!size)
      return size;
    return (*size + 63) & ~uint64_t(63);
  }
};

/// Shutdown stops the device, but one of its measures of memory in use
/// still counts what the allocations it dropped held: usedMemory() (its
/// accounting) or, with \p Physical, physicalMemoryInUse() (a pool whose
/// blocks a shutdown does not give back).
template <bool Physical> class ShutdownKeeps final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~ShutdownKeeps() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::usedMemory() + (Physical ? 0 : kept_);
  }
  uint64_t physicalMemoryInUse() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::physicalMemoryInUse() + (Physical ? kept_ : 0);
  }

protected:
  void shutdownBackend() override {
    uint64_t inUse =
        Physical ? FakeDevice::physicalMemoryInUse() : FakeDevice::usedMemory();
    FakeDevice::shutdownBackend();
    std::lock_guard<std::mutex> lock(mutex_);
    kept_ = inUse;
  }

private:
  mutable std::mutex mutex_;
  uint64_t kept_ = 0;
};

/// What a device that reclaims a free only once the work queued before it
/// has run does with the freed bytes until then, and which work it waits
/// for.
enum class Unreclaimed {
  /// Counted in usedMemory() and liveAllocations(), behind any operation.
  CountedBehindWork,
  /// The same, behind runs only: a device whose copies are done by the
  /// time they return, and whose kernels are queued.
  CountedBehindRuns,
  /// Held against the budget only, behind any operation: usedMemory() is
  /// exact, but an allocation that needs the freed room is refused.
  HeldAgainstBudget,
};

/// Memory freed while work is in flight is not reclaimed until the device
/// has none in flight, and counts until then as \p How says.
template <Unreclaimed How>
class CountsFreesBehindPendingWork final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~CountsFreesBehindPendingWork() override { shutdown(); }
  uint64_t usedMemory() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::usedMemory() + counted().bytes;
  }
  size_t liveAllocations() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return FakeDevice::liveAllocations() + counted().count;
  }

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override {
    if constexpr (How == Unreclaimed::HeldAgainstBudget) {
      std::lock_guard<std::mutex> lock(mutex_);
      uint64_t used = FakeDevice::usedMemory() + unreclaimed().bytes;
      if (used > maximumMemory() || bytes > maximumMemory() - used)
        return makeError(ErrorCode::OutOfMemory,
                         "allocation of " + std::to_string(bytes) +
                             " bytes with freed memory not yet reclaimed");
    }
    return FakeDevice::allocate(bytes);
  }
  Error free(DeviceLocation location) override {
    Expected<uint64_t> size = allocationSize(location);
    bool behind = workInFlight() != 0;
    Error e = FakeDevice::free(location);
    if (!e && size && behind) {
      std::lock_guard<std::mutex> lock(mutex_);
      unreclaimed_.bytes += *size;
      ++unreclaimed_.count;
    }
    return e;
  }
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override {
    if constexpr (How == Unreclaimed::CountedBehindRuns) {
      ++runsInFlight_;
      FakeDevice::execute(function, std::move(arguments),
                          [this, done = std::move(done)](Error e) {
                            --runsInFlight_;
                            done(std::move(e));
                          });
    } else {
      FakeDevice::execute(function, std::move(arguments), std::move(done));
    }
  }

private:
  struct Freed {
    uint64_t bytes = 0;
    size_t count = 0;
  };
  size_t workInFlight() const {
    return How == Unreclaimed::CountedBehindRuns ? runsInFlight_.load()
                                                 : operationsInFlight();
  }
  /// What is freed and not yet reclaimed; all of it once nothing is in
  /// flight.
  const Freed &unreclaimed() const {
    if (workInFlight() == 0)
      unreclaimed_ = {};
    return unreclaimed_;
  }
  /// What of it usedMemory() and liveAllocations() count.
  Freed counted() const {
    return How == Unreclaimed::HeldAgainstBudget ? Freed{} : unreclaimed();
  }
  mutable std::mutex mutex_;
  mutable Freed unreclaimed_;
  std::atomic<size_t> runsInFlight_{0};
};

/// The fake backend's entry (its parameters and capabilities) under the
/// mutant's name and factory.
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

/// The same under "test:NAME": a test backend that no self-test runs, for
/// the tests and measurements that name it.
template <typename Mutant>
BackendInfo testBackend(std::string name, std::string description) {
  BackendInfo info = mutant<Mutant>("", std::move(description));
  info.name = "test:" + std::move(name);
  return info;
}

DRT_REGISTER_BACKEND(mutant<AccountingDrift>(
    "accounting-drift", "free() does not return its bytes to usedMemory()"));
DRT_REGISTER_BACKEND(mutant<DoubleFree>(
    "double-free", "free() ignores the location's generation: a stale "
                   "location frees whatever holds its slot now"));
DRT_REGISTER_BACKEND(mutant<GenerationIn8Bits>(
    "generation-in-8-bits",
    "a location's generation is compared in 8 bits: a stale location of a "
    "slot handed out 256 times since frees the allocation in it"));
DRT_REGISTER_BACKEND(mutant<CallbackTwice>("callback-twice",
                                           "copyToDevice() completes twice"));
DRT_REGISTER_BACKEND(mutant<CallbackNeverOnError>(
    "callback-never-on-error", "a failing copy or run never completes"));
DRT_REGISTER_BACKEND(mutant<ErrorSwallowed>(
    "error-swallowed", "a failing copy to the device reports success"));
DRT_REGISTER_BACKEND(mutant<RunLeaksOutputCopies>(
    "run-leaks-output-copies",
    "execute() keeps an extra device copy of every output"));
DRT_REGISTER_BACKEND(mutant<CorruptReadBack>(
    "corrupt-read-back", "copyFromDevice() flips a bit of the first byte"));
// Not a mutant the self-test kills and replays: its minimal scenarios pass
// alone by design
// (conformance.tool.a-minimal-scenario-that-passes-alone-is-named).
DRT_REGISTER_BACKEND(testBackend<CorruptsAfterFortyDevices>(
    "corrupts-after-forty-devices",
    "a read-back's first byte flipped on every device made after the "
    "process's 40th"));
DRT_REGISTER_BACKEND(mutant<ReadBackPastTheEnd>(
    "read-back-past-the-end", "copyFromDevice() writes whole 64-byte bursts, "
                              "past the host buffer's end"));
DRT_REGISTER_BACKEND(mutant<ReadBackSharedStaging>(
    "read-back-shared-staging",
    "copyFromDevice() stages through one buffer shared by all calls, "
    "without a lock"));
DRT_REGISTER_BACKEND(mutant<RunSharesKernelArguments>(
    "run-shares-kernel-arguments",
    "execute() keeps its arguments where every run reads them, without a "
    "lock"));
DRT_REGISTER_BACKEND(mutant<RunsOutOfOrder>(
    "runs-out-of-order",
    "execute() lets a run overtake the run issued just before it, though the "
    "device declares in-order runs"));
DRT_REGISTER_BACKEND(mutant<CallsBackUnderItsLock>(
    "calls-back-under-its-lock",
    "transfers and runs complete while the device holds the lock its "
    "accounting takes"));
DRT_REGISTER_BACKEND(mutant<DropsUploadsIssuedFromCallbacks>(
    "drops-uploads-issued-from-callbacks",
    "uploads issued from inside one of the device's completion callbacks, "
    "on the thread delivering it, never complete"));
DRT_REGISTER_BACKEND(mutant<ReadBackCompletesHoldingItsLock>(
    "read-back-completes-holding-its-lock",
    "copyFromDevice() completes holding the lock free() takes: a read-back "
    "that releases blocks its thread for good"));
DRT_REGISTER_BACKEND(mutant<ReadBackCrashesPast64k>(
    "read-back-crashes-past-64k",
    "copyFromDevice() of more than 64 KiB writes through a null pointer"));
DRT_REGISTER_BACKEND(mutant<ReadBackCorruptsTheHeapPast64k>(
    "read-back-corrupts-the-heap-past-64k",
    "copyFromDevice() of more than 64 KiB overruns a block of the heap, "
    "which free() finds corrupt and aborts"));
DRT_REGISTER_BACKEND(mutant<ReadBackAbortsPast64k>(
    "read-back-aborts-past-64k",
    "copyFromDevice() of more than 64 KiB fails an assertion (abort), with "
    "handlers of the fatal signals installed over the harness's, as LLVM "
    "installs its own"));
DRT_REGISTER_BACKEND(mutant<ReadBackThrowsPast64k>(
    "read-back-throws-past-64k",
    "copyFromDevice() of more than 64 KiB throws std::out_of_range"));
DRT_REGISTER_BACKEND(mutant<CompletesUploadsInline>(
    "completes-uploads-inline",
    "copyToDevice() on an asynchronous device completes on the caller's "
    "thread before returning, for a caller that does not wait"));
DRT_REGISTER_BACKEND(mutant<EvictStrandsQueuedRuns>(
    "evict-strands-queued-runs",
    "a network evicted while a run of it is queued leaves the run without "
    "kernels: it fails"));
// Not a self-test: the suite kills it only where an operation reaches the
// backend while a shutdown runs on another thread, a race it wins on some
// seeds (docs/selftest.md, "Operations in flight at a shutdown").
DRT_REGISTER_BACKEND(testBackend<ShutdownDropsLostCompletions>(
    "shutdown-drops-lost-completions",
    "once a shutdown has begun, completions that report DeviceLost are "
    "dropped: the operations it meets in flight never complete"));
// Not a self-test: the suite sees its bug only where a free comes while an
// upload is still in flight, a window a loaded machine can close (the
// default run kills it on most seeds; Runner.AccountingIsComparedWhile-
// UploadsAreInFlight holds the upload 200 ms).
DRT_REGISTER_BACKEND(
    testBackend<CountsFreesBehindPendingWork<Unreclaimed::CountedBehindWork>>(
        "counts-frees-behind-pending-work",
        "memory freed while operations are in flight counts in usedMemory() "
        "and liveAllocations() until none is"));
// Not a self-test either: a free must come while a run issued without
// waiting is still in flight.
DRT_REGISTER_BACKEND(
    testBackend<CountsFreesBehindPendingWork<Unreclaimed::CountedBehindRuns>>(
        "counts-frees-behind-pending-runs",
        "memory freed while runs are in flight counts in usedMemory() and "
        "liveAllocations() until none is"));
// Not a self-test either: an allocation must come while a free made beside
// work in flight waits for it, which only parallel blocks give.
DRT_REGISTER_BACKEND(
    testBackend<CountsFreesBehindPendingWork<Unreclaimed::HeldAgainstBudget>>(
        "budget-holds-frees-behind-pending-work",
        "memory freed while operations are in flight is held against the "
        "budget until none is (usedMemory() is exact)"));
DRT_REGISTER_BACKEND(mutant<IgnoresBudget>(
    "ignores-budget", "allocations are not held to the memory budget"));
DRT_REGISTER_BACKEND(mutant<BudgetCheckedBeforeAllocating>(
    "budget-checked-before-allocating",
    "checks the budget, then allocates, without one lock across both"));
DRT_REGISTER_BACKEND(mutant<ArgumentsInOrderOfFirstUse>(
    "arguments-in-order-of-first-use",
    "execute() takes its arguments in the order the nodes first use the "
    "placeholders, not the order the function declares them"));
DRT_REGISTER_BACKEND(mutant<ArgumentsInFileOf16>(
    "arguments-in-file-of-16",
    "execute() holds 16 arguments: the seventeenth placeholder on takes the "
    "argument 16 places before it"));
DRT_REGISTER_BACKEND(mutant<IgnoresViewOffsets>(
    "ignores-view-offsets", "execute() ignores its arguments' byte offsets"));
DRT_REGISTER_BACKEND(mutant<ReportsPhysicalSize>(
    "reports-physical-size",
    "allocationSize() reports the rounded-up physical size"));
DRT_REGISTER_BACKEND(mutant<ShutdownKeeps<false>>(
    "shutdown-keeps-memory", "usedMemory() still counts memory dropped by "
                             "shutdown"));
DRT_REGISTER_BACKEND(mutant<ShutdownKeeps<true>>(
    "shutdown-keeps-physical-memory",
    "shutdown forgets its allocations but keeps their blocks: "
    "physicalMemoryInUse() does not return to 0"));

} // namespace
} // namespace drt::conformance::selftest
