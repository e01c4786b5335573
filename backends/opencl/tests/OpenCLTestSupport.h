//===- OpenCLTestSupport.h - Helpers shared by the OpenCL tests -*- C++ -*-===//
#ifndef DRT_OPENCL_TESTS_OPENCLTESTSUPPORT_H
#define DRT_OPENCL_TESTS_OPENCLTESTSUPPORT_H

#include "drt/opencl/OpenCLDevice.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace drt::opencl::testing {

/// A config named \p name with the given parameters.
inline DeviceConfig
configNamed(std::string name,
            std::map<std::string, std::string> parameters = {},
            uint64_t budget = 0) {
  DeviceConfig config;
  config.name = std::move(name);
  config.parameters = std::move(parameters);
  config.memoryBudget = budget;
  return config;
}

/// An initialised OpenCL device, or a failed test assertion.
inline std::unique_ptr<OpenCLDeviceManager> openDevice(DeviceConfig config) {
  auto device = std::make_unique<OpenCLDeviceManager>(std::move(config));
  Error e = device->init();
  EXPECT_TRUE(e.isSuccess()) << e.toString();
  if (e)
    return nullptr;
  return device;
}

/// Writes \p values into \p tensor's host data.
template <typename T> void fill(Tensor &tensor, const std::vector<T> &values) {
  std::span<T> data = tensor.mutableHostData<T>();
  ASSERT_EQ(data.size(), values.size());
  std::memcpy(data.data(), values.data(), values.size() * sizeof(T));
}

/// \p tensor's host data as a vector.
template <typename T> std::vector<T> contents(const Tensor &tensor) {
  std::span<const T> data = tensor.hostData<T>();
  return {data.begin(), data.end()};
}

/// \p tensor's host bytes as a vector.
inline std::vector<std::byte> bytesOf(const Tensor &tensor) {
  std::span<const std::byte> data = tensor.hostBytes();
  return {data.begin(), data.end()};
}

/// Counts the completions of work that a shutdown may overtake: each call,
/// and how many succeeded or reported DeviceLost.
struct ShutdownTally {
  std::atomic<int> calls{0}, succeeded{0}, lost{0};
  /// A completion callback that counts into this tally.
  CompletionCallback callback() {
    return [this](Error e) {
      ++calls;
      if (e.isSuccess())
        ++succeeded;
      else if (e.code() == ErrorCode::DeviceLost)
        ++lost;
    };
  }
};

} // namespace drt::opencl::testing

#endif // DRT_OPENCL_TESTS_OPENCLTESTSUPPORT_H
