//===- TwoDeviceTest.cpp - Two OpenCL devices in one process --------------===//
//
// POCL_DEVICES="pthread pthread" gives two devices on one platform; main()
// sets it (unless the environment already does) before the first OpenCL call.
// Each device becomes its own DeviceManager.
//
//===----------------------------------------------------------------------===//
#include "OpenCLTestSupport.h"

#include "drt/HostManager.h"
#include "drt/SyncTransfer.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace drt;
using namespace drt::opencl;
using namespace drt::opencl::testing;

namespace {

class OpenCLTwoDevices : public ::testing::Test {
protected:
  void SetUp() override {
    first_ = openDevice(configNamed("cl0", {{"device-index", "0"}}));
    ASSERT_TRUE(first_);
    second_ = std::make_unique<OpenCLDeviceManager>(
        configNamed("cl1", {{"device-index", "1"}}));
    Error e = second_->init();
    if (e.code() == ErrorCode::InvalidArgument)
      GTEST_SKIP() << "needs two devices on the chosen platform (POCL_DEVICES="
                      "\"pthread pthread\" gives them): "
                   << e.message();
    ASSERT_TRUE(e.isSuccess()) << e.toString();
  }
  std::unique_ptr<OpenCLDeviceManager> first_, second_;
};

TEST_F(OpenCLTwoDevices, AreDistinctDevices) {
  EXPECT_EQ(first_->deviceInfo().deviceIndex, 0u);
  EXPECT_EQ(second_->deviceInfo().deviceIndex, 1u);
  // Each device has its own program: built here, or by an earlier manager
  // of that same device in this process.
  EXPECT_EQ(first_->programBuilds(), first_->programReused() ? 0u : 1u);
  EXPECT_EQ(second_->programBuilds(), second_->programReused() ? 0u : 1u);
}

TEST_F(OpenCLTwoDevices, WithoutADeviceIndexTheOrdinalChoosesTheDevice) {
  // Devices a caller creates together (the runner numbers a scenario's)
  // land on different devices.
  for (uint32_t ordinal : {0u, 1u}) {
    DeviceConfig config = configNamed("ordinal" + std::to_string(ordinal), {});
    config.ordinal = ordinal;
    OpenCLDeviceManager device(config);
    Error e = device.init();
    ASSERT_TRUE(e.isSuccess()) << e.toString();
    EXPECT_EQ(device.deviceInfo().deviceIndex, ordinal);
  }
  // A device-index given wins over the ordinal.
  DeviceConfig config = configNamed("fixed", {{"device-index", "0"}});
  config.ordinal = 1;
  OpenCLDeviceManager fixed(config);
  ASSERT_TRUE(fixed.init().isSuccess());
  EXPECT_EQ(fixed.deviceInfo().deviceIndex, 0u);
}

TEST_F(OpenCLTwoDevices, TensorMovesBetweenDevicesWithItsContents) {
  Tensor t(ElemKind::Int32, {1000}, "t");
  std::vector<int32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int32_t>(i * 2654435761u);
  fill(t, values);
  ASSERT_TRUE(transferToDeviceSync(*first_, t).isSuccess());
  EXPECT_EQ(first_->usedMemory(), 4000u);
  Error moved = transferToDeviceSync(*second_, t);
  ASSERT_TRUE(moved.isSuccess()) << moved.toString();
  ResidencySnapshot s = t.residencySnapshot();
  EXPECT_EQ(s.state, ResidencyState::Device);
  EXPECT_EQ(s.manager, second_.get());
  EXPECT_EQ(first_->usedMemory(), 0u);
  EXPECT_EQ(first_->liveAllocations(), 0u);
  EXPECT_EQ(second_->usedMemory(), 4000u);
  // And back again.
  ASSERT_TRUE(transferToDeviceSync(*first_, t).isSuccess());
  EXPECT_EQ(second_->liveAllocations(), 0u);
  ASSERT_TRUE(transferFromDeviceSync(*first_, t).isSuccess());
  EXPECT_EQ(contents<int32_t>(t), values);
  EXPECT_TRUE(first_->takeBackgroundErrors().empty());
  EXPECT_TRUE(second_->takeBackgroundErrors().empty());
}

TEST_F(OpenCLTwoDevices, RunMovesAnInputResidentOnTheOtherDevice) {
  Function fn("double");
  fn.addPlaceholder("x", Type{ElemKind::Float32, {4}});
  fn.addPlaceholder("y", Type{ElemKind::Float32, {4}});
  fn.addNode(Node{OpKind::Scale, {"x"}, "y", 2.0});
  ASSERT_TRUE(addNetworkSync(*second_, fn).isSuccess());
  Tensor x(ElemKind::Float32, {4}, "x");
  fill<float>(x, {1.5f, -2, 0, 8});
  ASSERT_TRUE(transferToDeviceSync(*first_, x).isSuccess());
  Tensor y(ElemKind::Float32, {4}, "y");
  ExecutionContext context;
  context.bindings().bind("x", x);
  context.bindings().bind("y", y);
  Error e = runFunctionSync(*second_, "double", context);
  ASSERT_TRUE(e.isSuccess()) << e.toString();
  EXPECT_EQ(x.residencySnapshot().manager, second_.get());
  EXPECT_EQ(y.residencySnapshot().manager, second_.get());
  EXPECT_EQ(first_->liveAllocations(), 0u);
  ASSERT_TRUE(transferFromDeviceSync(*second_, y).isSuccess());
  EXPECT_EQ(contents<float>(y), (std::vector<float>{3, -4, 0, 16}));
}

TEST_F(OpenCLTwoDevices, ShuttingOneDownLeavesTheOtherWorking) {
  Tensor a(ElemKind::Float32, {16}, "a"), b(ElemKind::Float32, {16}, "b");
  fill(b, std::vector<float>(16, 7.0f));
  ASSERT_TRUE(transferToDeviceSync(*first_, a).isSuccess());
  ASSERT_TRUE(transferToDeviceSync(*second_, b).isSuccess());
  first_->shutdown();
  EXPECT_EQ(a.residencySnapshot().state, ResidencyState::Lost);
  ASSERT_TRUE(transferFromDeviceSync(*second_, b).isSuccess());
  EXPECT_EQ(contents<float>(b), std::vector<float>(16, 7.0f));
}

} // namespace

int main(int argc, char **argv) {
  setenv("POCL_DEVICES", "pthread pthread", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
