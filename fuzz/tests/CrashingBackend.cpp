//===- CrashingBackend.cpp - A backend that crashes, for one test ---------===//
//
// "fuzz-test:aborts-on-large-read-back": the fake device, except that a
// read-back of 64 bytes or more aborts the process, as a driver bug would.
// Linked only into drt-fuzz-to-scenario-check, so that the test of
// drt-fuzz-to-scenario can see a crash reported with its scenario and
// shrunk in child processes.
//
//===----------------------------------------------------------------------===//
#include "drt/BackendRegistry.h"
#include "drt/fake/FakeDevice.h"

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

} // namespace
