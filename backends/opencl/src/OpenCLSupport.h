//===- OpenCLSupport.h - Errors, device listing and selection ---*- C++ -*-===//
//
// The parts of the OpenCL backend that talk to the loader rather than to one
// device: turning status codes into drt::Errors, enumerating platforms and
// devices, and choosing a device from a DeviceConfig.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_OPENCLSUPPORT_H
#define DRT_OPENCL_OPENCLSUPPORT_H

#include "drt/DeviceConfig.h"
#include "drt/Error.h"
#include "drt/opencl/OpenCLDevice.h"

#include "OpenCLDriver.h"

#include <CL/cl.h>

#include <optional>
#include <string>
#include <string_view>

namespace drt::opencl {

/// The drt::ErrorCode an OpenCL status maps to: OutOfMemory for allocation
/// and resource exhaustion, InvalidArgument for CL_INVALID_BUFFER_SIZE,
/// DeviceError for everything else.
ErrorCode errorCodeForStatus(cl_int status);

/// The status named \p text ("CL_OUT_OF_RESOURCES") or written as a number,
/// or nullopt.
std::optional<int32_t> parseOpenCLStatus(std::string_view text);

/// An Error for a failed OpenCL call: "<call> failed with <NAME> (<code>)",
/// followed by \p context when it is not empty.
Error openCLError(cl_int status, std::string_view call,
                  std::string_view context = {});

/// A device found by selectDevice().
struct SelectedDevice {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  OpenCLDeviceInfo info;
};

/// Chooses a device from the "platform", "device" and "device-index"
/// parameters of \p config (falling back to DRT_OPENCL_PLATFORM and
/// DRT_OPENCL_DEVICE), calling OpenCL through \p driver. A choice that
/// matches nothing is InvalidArgument listing every device the loader
/// reports.
Expected<SelectedDevice> selectDevice(OpenCLDriver &driver,
                                      const DeviceConfig &config);

/// Why commands gated by a user event cannot be held back on \p device
/// (the `driver-delay-us` parameter), or "" where they can: a known
/// platform defect, named with its report. POCL's basic device (called
/// cpu-minimal from POCL 4 on) runs a command whose user event completes on
/// the thread that completes it, inside a lock that the command takes
/// again, and that thread never returns (pocl/pocl#1177).
std::string userEventGatesHang(const OpenCLDeviceInfo &device);

} // namespace drt::opencl

#endif // DRT_OPENCL_OPENCLSUPPORT_H
