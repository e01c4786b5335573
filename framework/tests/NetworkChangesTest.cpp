//===- NetworkChangesTest.cpp - Adds and evicts of one network name -------===//
//
// DeviceManager::addNetwork and evictNetwork call the backend
// (compileFunction, evictFunction) outside the device's lock. An add and an
// evict of one name on two threads must still reach the backend one after
// the other: an evictFunction() that came after the add's compile would
// drop the code of the network the device then says it has.
//
//===----------------------------------------------------------------------===//
#include "drt/DeviceManager.h"
#include "drt/SyncTransfer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

using namespace drt;

namespace {

/// A device with no memory that keeps the names it holds compiled code
/// for, and whose evictFunction() waits until the test lets it go on.
class CompilingDevice : public DeviceManager {
public:
  CompilingDevice() : DeviceManager(DeviceConfig{}) {}
  ~CompilingDevice() override { shutdown(); }

  Error init() override { return Error::success(); }
  Capabilities capabilities() const override { return {}; }
  uint64_t maximumMemory() const override { return 1 << 20; }
  uint64_t usedMemory() const override { return 0; }
  uint64_t physicalMemoryInUse() const override { return 0; }
  size_t liveAllocations() const override { return 0; }
  DeviceStats stats() const override { return {}; }
  Expected<DeviceLocation> allocate(uint64_t) override {
    return makeError(ErrorCode::OutOfMemory, "no memory");
  }
  Error free(DeviceLocation) override {
    return makeError(ErrorCode::InvalidArgument, "no allocations");
  }
  Expected<uint64_t> allocationSize(DeviceLocation) const override {
    return makeError(ErrorCode::InvalidArgument, "no allocations");
  }
  void copyToDevice(DeviceLocation, const std::byte *, uint64_t,
                    CompletionCallback done) override {
    done(makeError(ErrorCode::InvalidArgument, "no allocations"));
  }
  void copyFromDevice(DeviceLocation, std::byte *, uint64_t,
                      CompletionCallback done) override {
    done(makeError(ErrorCode::InvalidArgument, "no allocations"));
  }
  Error compileFunction(const Function &function) override {
    std::lock_guard<std::mutex> lock(mutex_);
    compiled_.insert(function.name());
    ++compiles_;
    return Error::success();
  }
  void evictFunction(const std::string &name) override {
    std::unique_lock<std::mutex> lock(mutex_);
    evicting_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return evictMayFinish_; });
    compiled_.erase(name);
  }
  void execute(const Function &, std::vector<RunArgument>,
               CompletionCallback done) override {
    done(Error::success());
  }
  void shutdownBackend() override {}

  /// Waits until an evictFunction() has begun.
  void waitUntilEvicting() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return evicting_; });
  }
  /// Lets evictFunction() finish.
  void letEvictFinish() {
    std::lock_guard<std::mutex> lock(mutex_);
    evictMayFinish_ = true;
    changed_.notify_all();
  }
  bool holdsCode(const std::string &name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return compiled_.count(name) != 0;
  }
  int compiles() {
    std::lock_guard<std::mutex> lock(mutex_);
    return compiles_;
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::string> compiled_;
  int compiles_ = 0;
  bool evicting_ = false, evictMayFinish_ = false;
};

Function network(const std::string &name) {
  Type t{ElemKind::Float32, {4}};
  Function f(name);
  f.addPlaceholder("x", t).addPlaceholder("y", t);
  f.addNode({OpKind::Copy, {"x"}, "y"});
  return f;
}

TEST(NetworkChanges, AnAddOfANameWaitsForItsEvictToReachTheBackend) {
  CompilingDevice device;
  ASSERT_FALSE(addNetworkSync(device, network("n")));
  std::thread evicting([&] { EXPECT_FALSE(evictNetworkSync(device, "n")); });
  device.waitUntilEvicting();
  EXPECT_FALSE(device.hasNetwork("n")) << "an evict under way has begun";

  Error added = Error::success();
  std::thread adding([&] { added = addNetworkSync(device, network("n")); });
  // The add must not compile while the evict is inside the backend; give a
  // wrong one time to.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(device.compiles(), 1) << "the add compiled during the evict";
  device.letEvictFinish();
  evicting.join();
  adding.join();
  EXPECT_FALSE(added) << added.toString();
  EXPECT_EQ(device.compiles(), 2);
  EXPECT_TRUE(device.hasNetwork("n"));
  EXPECT_TRUE(device.holdsCode("n"))
      << "the device says it has network 'n', but the backend's code for it "
         "was evicted";
}

TEST(NetworkChanges, TwoAddsOfOneNameAddItOnce) {
  CompilingDevice device;
  device.letEvictFinish();
  Error first = Error::success(), second = Error::success();
  std::thread a([&] { first = addNetworkSync(device, network("n")); });
  std::thread b([&] { second = addNetworkSync(device, network("n")); });
  a.join();
  b.join();
  EXPECT_NE(bool(first), bool(second)) << "exactly one add fails";
  EXPECT_EQ((first ? first : second).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(device.compiles(), 1);
  EXPECT_TRUE(device.hasNetwork("n"));
}

} // namespace
