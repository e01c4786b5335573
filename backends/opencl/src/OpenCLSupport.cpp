//===- OpenCLSupport.cpp - Errors, device listing and selection -----------===//
#include "OpenCLSupport.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <utility>
#include <vector>

namespace drt::opencl {

namespace {

/// Status codes and their names, numeric so that codes of every OpenCL
/// version are named whatever CL_TARGET_OPENCL_VERSION hides.
constexpr std::pair<int32_t, const char *> StatusNames[] = {
    {0, "CL_SUCCESS"},
    {-1, "CL_DEVICE_NOT_FOUND"},
    {-2, "CL_DEVICE_NOT_AVAILABLE"},
    {-3, "CL_COMPILER_NOT_AVAILABLE"},
    {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {-5, "CL_OUT_OF_RESOURCES"},
    {-6, "CL_OUT_OF_HOST_MEMORY"},
    {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {-8, "CL_MEM_COPY_OVERLAP"},
    {-9, "CL_IMAGE_FORMAT_MISMATCH"},
    {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {-11, "CL_BUILD_PROGRAM_FAILURE"},
    {-12, "CL_MAP_FAILURE"},
    {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {-15, "CL_COMPILE_PROGRAM_FAILURE"},
    {-16, "CL_LINKER_NOT_AVAILABLE"},
    {-17, "CL_LINK_PROGRAM_FAILURE"},
    {-18, "CL_DEVICE_PARTITION_FAILED"},
    {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {-30, "CL_INVALID_VALUE"},
    {-31, "CL_INVALID_DEVICE_TYPE"},
    {-32, "CL_INVALID_PLATFORM"},
    {-33, "CL_INVALID_DEVICE"},
    {-34, "CL_INVALID_CONTEXT"},
    {-35, "CL_INVALID_QUEUE_PROPERTIES"},
    {-36, "CL_INVALID_COMMAND_QUEUE"},
    {-37, "CL_INVALID_HOST_PTR"},
    {-38, "CL_INVALID_MEM_OBJECT"},
    {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {-40, "CL_INVALID_IMAGE_SIZE"},
    {-41, "CL_INVALID_SAMPLER"},
    {-42, "CL_INVALID_BINARY"},
    {-43, "CL_INVALID_BUILD_OPTIONS"},
    {-44, "CL_INVALID_PROGRAM"},
    {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {-46, "CL_INVALID_KERNEL_NAME"},
    {-47, "CL_INVALID_KERNEL_DEFINITION"},
    {-48, "CL_INVALID_KERNEL"},
    {-49, "CL_INVALID_ARG_INDEX"},
    {-50, "CL_INVALID_ARG_VALUE"},
    {-51, "CL_INVALID_ARG_SIZE"},
    {-52, "CL_INVALID_KERNEL_ARGS"},
    {-53, "CL_INVALID_WORK_DIMENSION"},
    {-54, "CL_INVALID_WORK_GROUP_SIZE"},
    {-55, "CL_INVALID_WORK_ITEM_SIZE"},
    {-56, "CL_INVALID_GLOBAL_OFFSET"},
    {-57, "CL_INVALID_EVENT_WAIT_LIST"},
    {-58, "CL_INVALID_EVENT"},
    {-59, "CL_INVALID_OPERATION"},
    {-60, "CL_INVALID_GL_OBJECT"},
    {-61, "CL_INVALID_BUFFER_SIZE"},
    {-62, "CL_INVALID_MIP_LEVEL"},
    {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {-64, "CL_INVALID_PROPERTY"},
    {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {-66, "CL_INVALID_COMPILER_OPTIONS"},
    {-67, "CL_INVALID_LINKER_OPTIONS"},
    {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {-69, "CL_INVALID_PIPE_SIZE"},
    {-70, "CL_INVALID_DEVICE_QUEUE"},
    {-71, "CL_INVALID_SPEC_ID"},
    {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
    {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
};

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// A choice given as text: empty (anything), an index, or a case-insensitive
/// name substring.
struct Choice {
  std::string text;

  bool matches(unsigned index, std::string_view name) const {
    if (text.empty())
      return true;
    unsigned value = 0;
    auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size())
      return value == index;
    return lowercase(name).find(lowercase(text)) != std::string::npos;
  }
};

std::string choiceText(const DeviceConfig &config, std::string_view key,
                       const char *environmentVariable) {
  if (auto value = config.parameter(key))
    return *value;
  if (const char *value = std::getenv(environmentVariable))
    return value;
  return {};
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\0' || text.back() == ' '))
    text.pop_back();
  return text;
}

Expected<std::string> platformString(OpenCLDriver &driver,
                                     cl_platform_id platform,
                                     cl_platform_info what) {
  size_t size = 0;
  if (cl_int rc = driver.getPlatformInfo(platform, what, 0, nullptr, &size))
    return openCLError(rc, "clGetPlatformInfo");
  std::string text(size, '\0');
  if (cl_int rc =
          driver.getPlatformInfo(platform, what, size, text.data(), nullptr))
    return openCLError(rc, "clGetPlatformInfo");
  return trimmed(std::move(text));
}

Expected<std::string> deviceString(OpenCLDriver &driver, cl_device_id device,
                                   cl_device_info what) {
  size_t size = 0;
  if (cl_int rc = driver.getDeviceInfo(device, what, 0, nullptr, &size))
    return openCLError(rc, "clGetDeviceInfo");
  std::string text(size, '\0');
  if (cl_int rc =
          driver.getDeviceInfo(device, what, size, text.data(), nullptr))
    return openCLError(rc, "clGetDeviceInfo");
  return trimmed(std::move(text));
}

Expected<uint64_t> deviceULong(OpenCLDriver &driver, cl_device_id device,
                               cl_device_info what) {
  cl_ulong value = 0;
  if (cl_int rc =
          driver.getDeviceInfo(device, what, sizeof(value), &value, nullptr))
    return openCLError(rc, "clGetDeviceInfo");
  return uint64_t(value);
}

Expected<bool> deviceBool(OpenCLDriver &driver, cl_device_id device,
                          cl_device_info what) {
  cl_bool value = CL_FALSE;
  if (cl_int rc =
          driver.getDeviceInfo(device, what, sizeof(value), &value, nullptr))
    return openCLError(rc, "clGetDeviceInfo");
  return value == CL_TRUE;
}

/// One platform and its devices, with their descriptions.
struct PlatformEntry {
  cl_platform_id platform;
  std::vector<cl_device_id> devices;
  std::vector<OpenCLDeviceInfo> infos;
};

Expected<std::vector<PlatformEntry>> enumerate(OpenCLDriver &driver) {
  cl_uint count = 0;
  cl_int rc = driver.getPlatformIDs(0, nullptr, &count);
  if (rc == -1001 || (rc == CL_SUCCESS && count == 0))
    return std::vector<PlatformEntry>{};
  if (rc != CL_SUCCESS)
    return openCLError(rc, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(count);
  if ((rc = driver.getPlatformIDs(count, platforms.data(), nullptr)))
    return openCLError(rc, "clGetPlatformIDs");

  std::vector<PlatformEntry> out;
  for (unsigned p = 0; p < platforms.size(); ++p) {
    PlatformEntry entry{platforms[p], {}, {}};
    Expected<std::string> platformName =
        platformString(driver, platforms[p], CL_PLATFORM_NAME);
    if (!platformName)
      return platformName.takeError();
    cl_uint numDevices = 0;
    rc = driver.getDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, nullptr,
                             &numDevices);
    if (rc != CL_SUCCESS && rc != CL_DEVICE_NOT_FOUND)
      return openCLError(rc, "clGetDeviceIDs",
                         "on platform '" + *platformName + "'");
    if (rc == CL_SUCCESS && numDevices > 0) {
      entry.devices.resize(numDevices);
      if ((rc = driver.getDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL,
                                    numDevices, entry.devices.data(), nullptr)))
        return openCLError(rc, "clGetDeviceIDs",
                           "on platform '" + *platformName + "'");
    }
    for (unsigned d = 0; d < entry.devices.size(); ++d) {
      cl_device_id device = entry.devices[d];
      OpenCLDeviceInfo info;
      info.platformIndex = p;
      info.deviceIndex = d;
      info.platformName = *platformName;
      auto name = deviceString(driver, device, CL_DEVICE_NAME);
      auto version = deviceString(driver, device, CL_DEVICE_VERSION);
      auto cVersion = deviceString(driver, device, CL_DEVICE_OPENCL_C_VERSION);
      auto global = deviceULong(driver, device, CL_DEVICE_GLOBAL_MEM_SIZE);
      auto maxAlloc = deviceULong(driver, device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      auto unified = deviceBool(driver, device, CL_DEVICE_HOST_UNIFIED_MEMORY);
      for (Error e :
           {name.takeError(), version.takeError(), cVersion.takeError(),
            global.takeError(), maxAlloc.takeError(), unified.takeError()})
        if (e)
          return e;
      info.deviceName = *name;
      info.deviceVersion = *version;
      info.openCLCVersion = *cVersion;
      info.globalMemoryBytes = *global;
      info.maxAllocationBytes = *maxAlloc;
      info.hostUnifiedMemory = *unified;
      entry.infos.push_back(std::move(info));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string listing(const std::vector<PlatformEntry> &platforms) {
  if (platforms.empty())
    return "no OpenCL platform found (check the ICD loader's vendor files, "
           "OCL_ICD_VENDORS)\n";
  std::string out;
  for (unsigned p = 0; p < platforms.size(); ++p) {
    if (platforms[p].infos.empty()) {
      out += "platform " + std::to_string(p) + ": no devices\n";
      continue;
    }
    for (const OpenCLDeviceInfo &info : platforms[p].infos)
      out += info.toString() + ": " + info.deviceVersion + ", " +
             info.openCLCVersion + ", " +
             std::to_string(info.globalMemoryBytes) + " bytes global, " +
             std::to_string(info.maxAllocationBytes) + " bytes max alloc" +
             (info.hostUnifiedMemory ? ", memory shared with the host" : "") +
             "\n";
  }
  return out;
}

} // namespace

namespace {
constexpr std::string_view CallNames[NumOpenCLCalls] = {
    "clGetPlatformIDs",
    "clGetPlatformInfo",
    "clGetDeviceIDs",
    "clGetDeviceInfo",
    "clCreateContext",
    "clRetainContext",
    "clReleaseContext",
    "clCreateCommandQueue",
    "clReleaseCommandQueue",
    "clCreateProgramWithSource",
    "clBuildProgram",
    "clGetProgramBuildInfo",
    "clRetainProgram",
    "clReleaseProgram",
    "clCreateKernel",
    "clReleaseKernel",
    "clSetKernelArg",
    "clCreateBuffer",
    "clRetainMemObject",
    "clReleaseMemObject",
    "clEnqueueWriteBuffer",
    "clEnqueueReadBuffer",
    "clEnqueueCopyBuffer",
    "clEnqueueMapBuffer",
    "clEnqueueUnmapMemObject",
    "clEnqueueNDRangeKernel",
    "clFlush",
    "clFinish",
    "clWaitForEvents",
    "clGetEventInfo",
    "clReleaseEvent",
    "clCreateProgramWithBinary",
    "clGetProgramInfo",
    "command-execution-status",
};
} // namespace

std::string_view openCLCallName(OpenCLCall call) {
  return CallNames[size_t(call)];
}

std::optional<OpenCLCall> parseOpenCLCall(std::string_view name) {
  for (size_t i = 0; i < NumOpenCLCalls; ++i)
    if (CallNames[i] == name)
      return OpenCLCall(i);
  return std::nullopt;
}

Expected<std::vector<DriverFault>> parseDriverFaults(std::string_view text) {
  std::vector<DriverFault> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
    size_t first = part.find(':'), second = part.rfind(':');
    auto bad = [&](const std::string &why) {
      return makeError(ErrorCode::InvalidArgument,
                       "'" + std::string(part) + "': " + why +
                           " (expected CALL:NTH:STATUS, as in "
                           "clCreateBuffer:1:CL_OUT_OF_RESOURCES)");
    };
    if (first == std::string_view::npos || first == second)
      return bad("not three fields");
    DriverFault f;
    auto call = parseOpenCLCall(part.substr(0, first));
    if (!call)
      return bad("unknown call '" + std::string(part.substr(0, first)) + "'");
    f.call = *call;
    std::string_view nth = part.substr(first + 1, second - first - 1);
    auto [end, ec] =
        std::from_chars(nth.data(), nth.data() + nth.size(), f.nth);
    if (ec != std::errc() || end != nth.data() + nth.size() || f.nth == 0)
      return bad("NTH must be a number from 1 to 4294967295");
    auto status = parseOpenCLStatus(part.substr(second + 1));
    if (!status || *status >= 0)
      return bad("STATUS must be an error status (a CL_ name or a negative "
                 "number)");
    f.status = *status;
    out.push_back(f);
  }
  return out;
}

std::optional<int32_t> parseOpenCLStatus(std::string_view text) {
  for (const auto &[value, name] : StatusNames)
    if (text == name)
      return value;
  int32_t value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return std::nullopt;
  return value;
}

std::string openCLErrorName(int32_t code) {
  for (const auto &[value, name] : StatusNames)
    if (value == code)
      return name;
  return "CL_UNKNOWN_ERROR(" + std::to_string(code) + ")";
}

ErrorCode errorCodeForStatus(cl_int status) {
  switch (status) {
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
  case CL_OUT_OF_RESOURCES:
  case CL_OUT_OF_HOST_MEMORY:
    return ErrorCode::OutOfMemory;
  case CL_INVALID_BUFFER_SIZE:
    return ErrorCode::InvalidArgument;
  default:
    return ErrorCode::DeviceError;
  }
}

Error openCLError(cl_int status, std::string_view call,
                  std::string_view context) {
  std::string message = std::string(call) + " failed with " +
                        openCLErrorName(status) + " (" +
                        std::to_string(status) + ")";
  if (!context.empty())
    message += " " + std::string(context);
  return makeError(errorCodeForStatus(status), std::move(message));
}

std::string OpenCLDeviceInfo::toString() const {
  return "platform " + std::to_string(platformIndex) + " '" + platformName +
         "', device " + std::to_string(deviceIndex) + " '" + deviceName + "'";
}

Expected<std::vector<OpenCLDeviceInfo>> listOpenCLDevices() {
  OpenCLDriver driver;
  auto platforms = enumerate(driver);
  if (!platforms)
    return platforms.takeError();
  std::vector<OpenCLDeviceInfo> out;
  for (const PlatformEntry &entry : *platforms)
    out.insert(out.end(), entry.infos.begin(), entry.infos.end());
  return out;
}

std::string formatOpenCLDeviceList() {
  OpenCLDriver driver;
  auto platforms = enumerate(driver);
  if (!platforms)
    return "listing OpenCL devices: " + platforms.takeError().message() + "\n";
  return listing(*platforms);
}

Expected<SelectedDevice> selectDevice(OpenCLDriver &driver,
                                      const DeviceConfig &config) {
  Choice platformChoice{choiceText(config, "platform", "DRT_OPENCL_PLATFORM")};
  Choice deviceChoice{choiceText(config, "device", "DRT_OPENCL_DEVICE")};
  Expected<uint64_t> deviceIndex = config.uintParameter("device-index", 0);
  if (!deviceIndex)
    return deviceIndex.takeError();
  // Not told which: the config's ordinal, over the devices that match.
  bool byOrdinal = !config.parameter("device-index");

  auto platforms = enumerate(driver);
  if (!platforms)
    return platforms.takeError();

  // The first platform (in loader order) that matches and has a matching
  // device supplies the candidates.
  for (unsigned p = 0; p < platforms->size(); ++p) {
    const PlatformEntry &entry = (*platforms)[p];
    if (entry.infos.empty())
      continue;
    if (!platformChoice.matches(p, entry.infos.front().platformName))
      continue;
    std::vector<unsigned> candidates;
    for (unsigned d = 0; d < entry.infos.size(); ++d)
      if (deviceChoice.matches(d, entry.infos[d].deviceName))
        candidates.push_back(d);
    if (candidates.empty())
      continue;
    if (byOrdinal)
      *deviceIndex = config.ordinal % candidates.size();
    if (*deviceIndex >= candidates.size())
      return makeError(ErrorCode::InvalidArgument,
                       "device '" + config.name + "': device-index " +
                           std::to_string(*deviceIndex) + " but only " +
                           std::to_string(candidates.size()) +
                           " OpenCL device(s) match on platform '" +
                           entry.infos.front().platformName +
                           "'; available:\n" + listing(*platforms));
    unsigned d = candidates[*deviceIndex];
    return SelectedDevice{entry.platform, entry.devices[d], entry.infos[d]};
  }
  return makeError(ErrorCode::InvalidArgument,
                   "device '" + config.name +
                       "': no OpenCL device matches platform '" +
                       platformChoice.text + "', device '" + deviceChoice.text +
                       "'; available:\n" + listing(*platforms));
}

std::string userEventGatesHang(const OpenCLDeviceInfo &device) {
  if (device.deviceVersion.find("PoCL") == std::string::npos)
    return "";
  for (std::string_view kind : {"basic", "cpu-minimal"})
    if (std::string_view(device.deviceName).starts_with(kind))
      return "POCL's " + std::string(kind) +
             " device completes a command gated by a user event on the "
             "thread that sets the event's status, inside a lock the command "
             "takes again, and that call never returns (pocl/pocl#1177)";
  return "";
}

} // namespace drt::opencl
