//===- VerifiedReadingTest.cpp - When a sweep may reuse a reading ---------===//
//
// The runner's sweeps skip reading a record while its last matching reading
// holds (src/VerifiedReading.h): a change on either side must end that.
//
//===----------------------------------------------------------------------===//
#include "VerifiedReading.h"

#include "drt/SyncTransfer.h"
#include "drt/fake/FakeDevice.h"

#include <gtest/gtest.h>

using namespace drt;
using namespace drt::conformance;

namespace {

class VerifiedReadingTest : public ::testing::Test {
protected:
  void SetUp() override {
    DeviceConfig c;
    c.name = "d0";
    device = std::make_unique<fake::FakeDevice>(c);
    ASSERT_FALSE(device->init());
    model.state = ResidencyState::Host;
  }
  void TearDown() override { device->shutdown(); }

  /// Remembers the tensor's current reading as matching model record 3.
  void remember() { reading.remember(tensor.residencySnapshot(), 3, model); }
  bool holds() const { return reading.holds(tensor.residency(), 3, model); }

  std::unique_ptr<fake::FakeDevice> device;
  Tensor tensor{ElemKind::Float32, {4}, "t"};
  ModelRecord model;
  VerifiedReading reading;
};

TEST_F(VerifiedReadingTest, NoneIsKeptAtFirst) {
  EXPECT_EQ(reading.version(), 0u);
  EXPECT_FALSE(holds());
}

TEST_F(VerifiedReadingTest, HoldsWhileNeitherSideChanges) {
  remember();
  EXPECT_TRUE(holds());
  (void)tensor.hostBytes();
  EXPECT_TRUE(holds()) << "a read changes no record";
  EXPECT_EQ(reading.reading().state, ResidencyState::Host);
}

TEST_F(VerifiedReadingTest, EndsWhenTheBackendsRecordChanges) {
  remember();
  ASSERT_FALSE(transferToDeviceSync(*device, tensor));
  EXPECT_FALSE(holds());
}

TEST_F(VerifiedReadingTest, EndsWhenTheModelsRecordChanges) {
  remember();
  ModelRecord moved = model;
  moved.state = ResidencyState::Device;
  moved.device = "d0";
  EXPECT_FALSE(reading.holds(tensor.residency(), 3, moved))
      << "the model's state and device changed";
  ModelRecord elsewhere = model;
  elsewhere.device = "d1";
  EXPECT_FALSE(reading.holds(tensor.residency(), 3, elsewhere))
      << "the model's device changed";
  EXPECT_FALSE(reading.holds(tensor.residency(), 4, model))
      << "the tensor is another model record";
}

TEST_F(VerifiedReadingTest, AModelChangeUnderTheSameVersionIsReported) {
  remember();
  ModelRecord moved = model;
  moved.state = ResidencyState::Device;
  moved.device = "d0";
  EXPECT_TRUE(
      reading.versionKeptAcrossChange(tensor.residencySnapshot(), 3, moved))
      << "the model's record changed while the backend's kept its version";
  EXPECT_FALSE(
      reading.versionKeptAcrossChange(tensor.residencySnapshot(), 3, model))
      << "neither side changed";
  EXPECT_FALSE(
      reading.versionKeptAcrossChange(tensor.residencySnapshot(), 4, moved))
      << "another model record";
  ASSERT_FALSE(transferToDeviceSync(*device, tensor));
  EXPECT_FALSE(
      reading.versionKeptAcrossChange(tensor.residencySnapshot(), 3, moved))
      << "the backend's record changed with a new version";
}

TEST_F(VerifiedReadingTest, AnotherRecordNeverMatchesIt) {
  remember();
  Tensor other(ElemKind::Float32, {4}, "other");
  EXPECT_FALSE(reading.holds(other.residency(), 3, model));
}

} // namespace
