//===- IntermittentBackend.cpp - A bug that shows on some runs only -------===//
//
// "fuzz-test:corrupts-every-third-device": the fake device, except that on
// every third device the process creates, a read-back flips the first byte
// it delivers. Deterministic, it stands for a race that one interleaving in
// a few shows: linked only into drt-fuzz-to-scenario-check, so that the test
// of drt-fuzz-to-scenario can see a finding that passes its first run
// converted all the same (timingDependent scenarios get several runs).
// "fuzz-test:corrupts-every-300th-device" does so on every 300th device:
// a race that one interleaving in hundreds shows.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/fake/FakeDevice.h"

#include <atomic>

namespace {

using drt::fake::FakeDevice;

/// Devices created so far in this process.
std::atomic<unsigned> devicesCreated{0};

/// Flips the first byte of each read-back on every \p Period th device.
template <unsigned Period>
class CorruptsEveryNthDevice final : public FakeDevice {
public:
  explicit CorruptsEveryNthDevice(const drt::DeviceConfig &config)
      : FakeDevice(config), corrupts_(++devicesCreated % Period == 0) {}
  ~CorruptsEveryNthDevice() override { shutdown(); }

protected:
  void copyFromDevice(drt::DeviceLocation src, std::byte *dst, uint64_t bytes,
                      drt::CompletionCallback done) override {
    if (!corrupts_ || bytes == 0)
      return FakeDevice::copyFromDevice(src, dst, bytes, std::move(done));
    FakeDevice::copyFromDevice(src, dst, bytes,
                               [dst, done = std::move(done)](drt::Error e) {
                                 if (!e)
                                   dst[0] ^= std::byte{0x5a};
                                 done(std::move(e));
                               });
  }

private:
  const bool corrupts_;
};

DRT_REGISTER_BACKEND((drt::BackendInfo{
    "fuzz-test:corrupts-every-third-device",
    "the fake device; every third device created flips the first byte of "
    "each read-back",
    drt::fake::fakeCapabilities(/*async=*/false, /*resident=*/true),
    [](const drt::DeviceConfig &config) -> std::unique_ptr<drt::DeviceManager> {
      return std::make_unique<CorruptsEveryNthDevice<3>>(config);
    },
    /*testOnly=*/true}));

DRT_REGISTER_BACKEND((drt::BackendInfo{
    "fuzz-test:corrupts-every-300th-device",
    "the fake device; every 300th device created flips the first byte of "
    "each read-back",
    drt::fake::fakeCapabilities(/*async=*/false, /*resident=*/true),
    [](const drt::DeviceConfig &config) -> std::unique_ptr<drt::DeviceManager> {
      return std::make_unique<CorruptsEveryNthDevice<300>>(config);
    },
    /*testOnly=*/true}));

} // namespace
