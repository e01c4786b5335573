//===- CrashingBackend.cpp - Backends that crash, for tests ---------------===//
//
// "fuzz-test:aborts-on-large-read-back": the fake device, except that a
// read-back of 64 bytes or more aborts the process, as a driver bug would.
// "fuzz-test:aborts-on-every-300th-device": the fake device, except that
// the 300th device a process creates (and every 300th after it) aborts on
// its first read-back: deterministic, it stands for a crash that one
// interleaving in hundreds shows. Linked only into
// drt-fuzz-to-scenario-check, so that the tests of drt-fuzz-to-scenario can
// see a crash reported with its scenario and shrunk in child processes,
// the rare one too.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/fake/FakeDevice.h"

#include <atomic>
#include <cstdlib>

namespace {

using drt::fake::FakeDevice;

class AbortsOnLargeReadBack final : public FakeDevice {
public:
  using FakeDevice::FakeDevice;
  ~AbortsOnLargeReadBack() override { shutdown(); }

protected:
  void copyFromDevice(drt::DeviceLocation src, std::byte *dst, uint64_t bytes,
                      drt::CompletionCallback done) override {
    if (bytes >= 64)
      std::abort();
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }
};

DRT_REGISTER_BACKEND((drt::BackendInfo{
    "fuzz-test:aborts-on-large-read-back",
    "the fake device; a read-back of 64 bytes or more aborts",
    drt::fake::fakeCapabilities(/*async=*/true, /*resident=*/true),
    [](const drt::DeviceConfig &config) -> std::unique_ptr<drt::DeviceManager> {
      return std::make_unique<AbortsOnLargeReadBack>(config);
    },
    /*testOnly=*/true}));

/// Devices created so far in this process.
std::atomic<unsigned> devicesCreated{0};

class AbortsOnEvery300thDevice final : public FakeDevice {
public:
  explicit AbortsOnEvery300thDevice(const drt::DeviceConfig &config)
      : FakeDevice(config), aborts_(++devicesCreated % 300 == 0) {}
  ~AbortsOnEvery300thDevice() override { shutdown(); }

protected:
  void copyFromDevice(drt::DeviceLocation src, std::byte *dst, uint64_t bytes,
                      drt::CompletionCallback done) override {
    if (aborts_)
      std::abort();
    FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
  }

private:
  const bool aborts_;
};

DRT_REGISTER_BACKEND((drt::BackendInfo{
    "fuzz-test:aborts-on-every-300th-device",
    "the fake device; every 300th device a process creates aborts on its "
    "first read-back",
    drt::fake::fakeCapabilities(/*async=*/true, /*resident=*/true),
    [](const drt::DeviceConfig &config) -> std::unique_ptr<drt::DeviceManager> {
      return std::make_unique<AbortsOnEvery300thDevice>(config);
    },
    /*testOnly=*/true}));

} // namespace
