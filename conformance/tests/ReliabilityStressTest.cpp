//===- ReliabilityStressTest.cpp - Threads on the public API --------------===//
//
// Several threads share devices (fake asynchronous and synchronous devices,
// OpenCL devices, and both together) and call the public API at once:
// transfers, releases, runs, host writes and pipelined transfers (issued
// without waiting, the next one waiting for the busy record). Each thread
// owns its tensors and knows what they must hold; a second phase gives
// every thread a full view of one shared record, which they move between
// devices at the same time. Every result is checked as it comes, and at
// the end: contents, states, callbacks, accounting back to the baseline,
// nothing in flight, no background error. Run under the tsan preset too.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/ExecutionContext.h"
#include "drt/Function.h"
#include "drt/SyncTransfer.h"
#include "drt/Tensor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace drt;

namespace {

/// One device of a stress configuration: a backend and its parameters.
struct StressDevice {
  std::string backend;
  ParameterMap parameters;
};

/// A set of devices the threads share.
struct StressConfiguration {
  std::string label;
  std::vector<StressDevice> devices;
};

std::ostream &operator<<(std::ostream &os, const StressConfiguration &c) {
  return os << c.label;
}

std::vector<StressConfiguration> stressConfigurations() {
  StressDevice fakeAsync{"fake", {{"async", "1"}, {"max-delay-us", "50"}}};
  StressDevice fakeSync{"fake", {}};
  std::vector<StressConfiguration> out = {
      {"fake", {fakeAsync, fakeAsync, fakeSync}}};
  if (BackendRegistry::instance().find("opencl")) {
    StressDevice opencl{"opencl", {}};
    out.push_back({"opencl", {opencl, opencl}});
    out.push_back({"opencl_and_fake", {opencl, fakeAsync}});
  }
  return out;
}

/// Thread-safe failure collection: gtest assertions are thread-safe on
/// POSIX, but a failing thread must also stop, which a returned message
/// does.
class Failures {
public:
  void add(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.push_back(std::move(message));
  }
  std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(messages_);
  }

private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

/// A callback that must be called exactly once; wait() returns its error.
class OnceCallback {
public:
  CompletionCallback callback() {
    return [this](Error e) {
      if (calls_.fetch_add(1) == 0)
        promise_.set_value(std::move(e));
    };
  }
  Error wait() { return promise_.get_future().get(); }
  int calls() const { return calls_.load(); }

private:
  std::promise<Error> promise_;
  std::atomic<int> calls_{0};
};

class ReliabilityStress : public ::testing::TestWithParam<StressConfiguration> {
protected:
  void SetUp() override {
    for (size_t i = 0; i < GetParam().devices.size(); ++i) {
      const StressDevice &spec = GetParam().devices[i];
      DeviceConfig config;
      config.name = spec.backend + std::to_string(i);
      config.parameters = spec.parameters;
      auto d = BackendRegistry::instance().create(spec.backend, config);
      if (!d)
        GTEST_SKIP() << "cannot create a device of " << spec.backend << ": "
                     << d.takeError().toString();
      devices_.push_back(std::move(*d));
    }
  }

  void TearDown() override {
    for (auto &d : devices_) {
      EXPECT_EQ(d->operationsInFlight(), 0u) << d->name();
      for (const Error &e : d->takeBackgroundErrors())
        ADD_FAILURE() << d->name() << ": background error " << e.toString();
      EXPECT_EQ(d->usedMemory(), 0u) << d->name() << " did not return to 0";
      EXPECT_EQ(d->liveAllocations(), 0u) << d->name();
      d->shutdown();
    }
  }

  std::vector<std::unique_ptr<DeviceManager>> devices_;
};

constexpr int Threads = 4;
constexpr int OperationsPerThread = 500;
constexpr int TensorsPerThread = 5;

/// One thread's work on its own tensors over the shared devices.
void privateTensorsWork(int id, std::vector<DeviceManager *> devices,
                        Failures &failures) {
  std::mt19937 rng(uint32_t(1000 + id));
  auto below = [&](size_t n) { return size_t(rng() % n); };
  size_t n = 1 + below(2048);
  std::vector<Tensor> tensors;
  std::vector<std::vector<float>> expected(TensorsPerThread);
  auto fill = [&](size_t i) {
    auto data = tensors[i].mutableHostData<float>();
    for (size_t e = 0; e < n; ++e)
      data[e] = expected[i][e] = float(int(rng() % 2001) - 1000);
  };
  for (int i = 0; i < TensorsPerThread; ++i) {
    tensors.emplace_back(ElemKind::Float32, std::vector<size_t>{n},
                         "t" + std::to_string(id) + "." + std::to_string(i));
    expected[i].resize(n);
    fill(size_t(i));
  }
  std::string network = "scale" + std::to_string(id);
  for (DeviceManager *d : devices) {
    Function f(network);
    Type type{ElemKind::Float32, {n}};
    f.addPlaceholder("x", type).addPlaceholder("y", type);
    f.addNode({OpKind::Scale, {"x"}, "y", 2.0});
    if (Error e = addNetworkSync(*d, std::move(f)))
      return failures.add("addNetwork on " + d->name() + ": " + e.toString());
  }
  auto fail = [&](const std::string &what, size_t i, const Error &e) {
    failures.add("thread " + std::to_string(id) + ", " + what + " of " +
                 tensors[i].name() + ": " + e.toString());
  };
  // Brings tensor i home and compares it with what it must hold.
  auto home = [&](size_t i) -> bool {
    ResidencySnapshot s = tensors[i].residencySnapshot();
    if (s.state == ResidencyState::Device ||
        s.state == ResidencyState::Mirrored)
      if (Error e = transferFromDeviceSync(*s.manager, tensors[i], true)) {
        fail("from-device", i, e);
        return false;
      }
    auto data = tensors[i].hostData<float>();
    for (size_t e = 0; e < n; ++e)
      if (data[e] != expected[i][e]) {
        failures.add("thread " + std::to_string(id) + ": " + tensors[i].name() +
                     "[" + std::to_string(e) + "] is " +
                     std::to_string(data[e]) + ", expected " +
                     std::to_string(expected[i][e]));
        return false;
      }
    return true;
  };

  for (int op = 0; op < OperationsPerThread; ++op) {
    size_t i = below(TensorsPerThread);
    DeviceManager &d = *devices[below(devices.size())];
    ResidencySnapshot s = tensors[i].residencySnapshot();
    bool resident = s.state == ResidencyState::Device ||
                    s.state == ResidencyState::Mirrored;
    switch (below(6)) {
    case 0:
      if (Error e = transferToDeviceSync(d, tensors[i]))
        return fail("to-device", i, e);
      if (tensors[i].residencySnapshot().manager != &d)
        return failures.add(tensors[i].name() + " is not on " + d.name() +
                            " after its transfer there");
      break;
    case 1:
      if (!home(i))
        return;
      break;
    case 2:
      if (resident) {
        if (Error e = transferFromDeviceSync(*s.manager, tensors[i], false))
          return fail("from-device keep", i, e);
        if (tensors[i].residencySnapshot().state != ResidencyState::Mirrored)
          return failures.add(tensors[i].name() + " is not Mirrored");
      }
      break;
    case 3:
      // A host write: on Host or Mirrored (which drops the device copy).
      if (s.state == ResidencyState::Device && !home(i))
        return;
      fill(i);
      if (tensors[i].residencySnapshot().state != ResidencyState::Host)
        return failures.add(tensors[i].name() + " is not Host after a write");
      break;
    case 4: {
      // y = 2x on d, y another tensor of this thread.
      size_t o = (i + 1 + below(TensorsPerThread - 1)) % TensorsPerThread;
      ExecutionContext ctx;
      ctx.bindings().bind("x", tensors[i]);
      ctx.bindings().bind("y", tensors[o]);
      if (Error e = runFunctionSync(d, network, ctx))
        return fail("run", o, e);
      for (size_t e = 0; e < n; ++e)
        expected[o][e] = 2 * expected[i][e];
      break;
    }
    case 5: {
      // Pipelined: the read-back is issued while the upload may still be
      // in flight, and waits for it (the record is busy).
      OnceCallback up, down;
      d.transferToDevice(tensors[i], std::nullopt, up.callback());
      d.transferFromDevice(tensors[i], true, down.callback());
      Error first = up.wait(), second = down.wait();
      if (first)
        return fail("pipelined to-device", i, first);
      if (second)
        return fail("pipelined from-device", i, second);
      if (!home(i))
        return;
      break;
    }
    }
  }
  for (size_t i = 0; i < TensorsPerThread; ++i)
    if (!home(i))
      return;
  for (DeviceManager *d : devices)
    if (Error e = evictNetworkSync(*d, network))
      return failures.add("evictNetwork on " + d->name() + ": " + e.toString());
}

TEST_P(ReliabilityStress, ThreadsOnTheirOwnTensorsOverSharedDevices) {
  std::vector<DeviceManager *> devices;
  for (auto &d : devices_)
    devices.push_back(d.get());
  Failures failures;
  std::vector<std::thread> threads;
  for (int id = 0; id < Threads; ++id)
    threads.emplace_back(privateTensorsWork, id, devices, std::ref(failures));
  for (std::thread &t : threads)
    t.join();
  for (const std::string &f : failures.take())
    ADD_FAILURE() << f;
}

TEST_P(ReliabilityStress, ThreadsMoveOneSharedRecordBetweenDevices) {
  // Every thread holds a full view of one record and moves it between the
  // devices while the others do: each transfer waits for the one in flight,
  // none loses the contents.
  constexpr size_t N = 1024;
  Tensor shared(ElemKind::Float32, {N}, "shared");
  std::vector<float> original(N);
  for (size_t e = 0; e < N; ++e)
    shared.mutableHostData<float>()[e] = original[e] = float(e) * 0.25f;
  std::vector<Tensor> views;
  for (int id = 0; id < Threads; ++id)
    views.push_back(shared.getUnowned({N}));
  Failures failures;
  std::vector<std::thread> threads;
  for (int id = 0; id < Threads; ++id)
    threads.emplace_back([&, id] {
      std::mt19937 rng(uint32_t(2000 + id));
      Tensor &v = views[size_t(id)];
      for (int op = 0; op < OperationsPerThread; ++op) {
        DeviceManager &d = *devices_[rng() % devices_.size()];
        if (Error e = transferToDeviceSync(d, v))
          return failures.add("thread " + std::to_string(id) +
                              ", to-device on " + d.name() + ": " +
                              e.toString());
        // Another thread may have moved the record away since: reading back
        // from this device is then InvalidArgument, and nothing else.
        Error e = transferFromDeviceSync(d, v, rng() % 2 == 0);
        if (e && e.code() != ErrorCode::InvalidArgument)
          return failures.add("thread " + std::to_string(id) +
                              ", from-device on " + d.name() + ": " +
                              e.toString());
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::string &f : failures.take())
    ADD_FAILURE() << f;
  ResidencySnapshot s = shared.residencySnapshot();
  if (s.state == ResidencyState::Device ||
      s.state == ResidencyState::Mirrored) {
    Error e = transferFromDeviceSync(*s.manager, shared, true);
    ASSERT_FALSE(e) << e.toString();
  }
  auto data = shared.hostData<float>();
  for (size_t e = 0; e < N; ++e)
    ASSERT_EQ(data[e], original[e]) << "element " << e;
}

INSTANTIATE_TEST_SUITE_P(
    Devices, ReliabilityStress, ::testing::ValuesIn(stressConfigurations()),
    [](const ::testing::TestParamInfo<StressConfiguration> &info) {
      return info.param.label;
    });

} // namespace
