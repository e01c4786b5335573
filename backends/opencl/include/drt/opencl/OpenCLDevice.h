//===- drt/opencl/OpenCLDevice.h - The OpenCL backend ------------*- C++
//-*-===//
//
// A DeviceManager that keeps tensors in OpenCL device memory: one cl_mem per
// allocation behind generation-checked locations, the function model's
// kernels built once per device at init, non-blocking transfers and kernels
// completed by a completion thread, and a memory budget enforced by its own
// accounting (POCL never fails an allocation past its reported size).
//
// The backend registers itself as "opencl". Its DeviceConfig parameters are
// declared by openCLParameters() (drt-conformance --list prints them):
//   platform        index or case-insensitive name substring of the platform
//                   (default: env DRT_OPENCL_PLATFORM, else the first platform
//                   that has a matching device)
//   device          index or case-insensitive name substring of the device
//                   (default: env DRT_OPENCL_DEVICE, else every device)
//   device-index    which of the matching devices to use (default 0)
//   pinned-staging  auto (default), 1 or 0: stage pageable transfers of at
//                   least staging-min-bytes (default 64 KiB) through
//                   CL_MEM_ALLOC_HOST_PTR buffers, in chunks of
//                   staging-chunk-bytes (default 4 MiB) whose host copies
//                   overlap the DMA of the chunk before; auto stages where
//                   the device does not share the host's memory
//   memory-pool-bytes  most bytes of freed device blocks kept for reuse
//                   (default 1 GiB; 0: every free releases its cl_mem)
//   shared-context  0 to create a context and build the kernels of its own
//                   instead of sharing those of the device's other managers
//                   in the process (default 1)
//   driver-faults   driver calls to fail, from the first call init() makes:
//                   "CALL:NTH:STATUS,..." (parseDriverFaults; default none)
// Any other key, or a value outside a parameter's allowed values, makes
// init() fail with InvalidArgument; so does a memory budget larger than the
// device's global memory.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_OPENCLDEVICE_H
#define DRT_OPENCL_OPENCLDEVICE_H

#include "drt/BackendRegistry.h"
#include "drt/DeviceManager.h"
#include "drt/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace drt::opencl {

/// One OpenCL device as the loader reports it.
struct OpenCLDeviceInfo {
  /// Index of the platform in clGetPlatformIDs order.
  unsigned platformIndex = 0;
  /// Index of the device within its platform.
  unsigned deviceIndex = 0;
  std::string platformName;
  std::string deviceName;
  /// CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ...".
  std::string deviceVersion;
  /// CL_DEVICE_OPENCL_C_VERSION, e.g. "OpenCL C 1.2 PoCL".
  std::string openCLCVersion;
  /// CL_DEVICE_GLOBAL_MEM_SIZE in bytes.
  uint64_t globalMemoryBytes = 0;
  /// CL_DEVICE_MAX_MEM_ALLOC_SIZE in bytes.
  uint64_t maxAllocationBytes = 0;
  /// CL_DEVICE_HOST_UNIFIED_MEMORY: the device's memory is the host's (a CPU
  /// device, an integrated GPU), so staging through pinned buffers gains
  /// nothing.
  bool hostUnifiedMemory = false;

  /// "platform 0 'Portable Computing Language', device 0 'pthread-...'".
  std::string toString() const;
};

/// Every device of every platform; an Error naming the failing OpenCL call
/// when the loader fails (no platform at all is an empty list, not an error).
Expected<std::vector<OpenCLDeviceInfo>> listOpenCLDevices();

/// A human-readable listing of listOpenCLDevices(), one device per line with
/// its memory sizes, for a --list-devices option.
std::string formatOpenCLDeviceList();

/// The name of an OpenCL status code ("CL_INVALID_BUFFER_SIZE"), or
/// "CL_UNKNOWN_ERROR(<code>)" for a code this backend does not know.
std::string openCLErrorName(int32_t code);

/// The capabilities every OpenCL device manager declares.
Capabilities openCLCapabilities();

/// The DeviceConfig parameters an OpenCL device manager reads, with their
/// defaults, meanings, allowed values and the values a conformance run
/// tests (pinned-staging and shared-context, both ways).
const std::vector<BackendParameter> &openCLParameters();

/// The OpenCL entry points the backend calls, each through one seam
/// (src/OpenCLDriver.h) where a planned driver fault can make a call fail
/// without reaching the driver. CommandExecutionStatus is no entry point: it
/// is the execution status of a submitted command, read when the command
/// completes (a fault makes the command fail as a device does when it
/// faults or is lost), counted per command submitted.
enum class OpenCLCall : uint8_t {
  GetPlatformIDs,
  GetPlatformInfo,
  GetDeviceIDs,
  GetDeviceInfo,
  CreateContext,
  RetainContext,
  ReleaseContext,
  CreateCommandQueue,
  ReleaseCommandQueue,
  CreateProgramWithSource,
  BuildProgram,
  GetProgramBuildInfo,
  RetainProgram,
  ReleaseProgram,
  CreateKernel,
  ReleaseKernel,
  SetKernelArg,
  CreateBuffer,
  RetainMemObject,
  ReleaseMemObject,
  EnqueueWriteBuffer,
  EnqueueReadBuffer,
  EnqueueCopyBuffer,
  EnqueueMapBuffer,
  EnqueueUnmapMemObject,
  EnqueueNDRangeKernel,
  Flush,
  Finish,
  WaitForEvents,
  GetEventInfo,
  ReleaseEvent,
  CreateProgramWithBinary,
  GetProgramInfo,
  CommandExecutionStatus,
};
/// Number of OpenCLCall values.
inline constexpr size_t NumOpenCLCalls =
    size_t(OpenCLCall::CommandExecutionStatus) + 1;

/// "clCreateBuffer", ..., "command-execution-status".
std::string_view openCLCallName(OpenCLCall call);
/// The call named \p name (as openCLCallName writes it), or nullopt.
std::optional<OpenCLCall> parseOpenCLCall(std::string_view name);

/// A planned driver failure: the \p nth next call of \p call that one
/// device manager makes (1 = the next) returns \p status instead of reaching
/// the driver (an object-creating call returns a null object and sets its
/// error code to \p status).
struct DriverFault {
  OpenCLCall call = OpenCLCall::CreateBuffer;
  unsigned nth = 1;
  int32_t status = -5;
};

/// Parses "CALL:NTH:STATUS[,CALL:NTH:STATUS...]" (STATUS a name such as
/// CL_OUT_OF_RESOURCES or a negative number), as the device parameter
/// `driver-faults` takes it; InvalidArgument naming the part that is wrong.
Expected<std::vector<DriverFault>> parseDriverFaults(std::string_view text);

/// What a manager's pool of freed device blocks holds and has done. Freed
/// blocks are kept in size classes (at most 25% above the bytes asked for)
/// and reused by later allocations of the class without a driver call.
struct OpenCLPoolStats {
  /// Bytes of device blocks held from the driver: those of live allocations
  /// (physicalMemoryInUse()) and the cached ones.
  uint64_t reservedBytes = 0;
  /// Bytes of freed blocks kept for reuse.
  uint64_t cachedBytes = 0;
  /// Device blocks created with clCreateBuffer.
  uint64_t driverAllocations = 0;
  /// Allocations served from the pool, without a driver call.
  uint64_t reuses = 0;
  /// Blocks given back to the driver: past the pool's limit, under memory
  /// pressure, and at shutdown.
  uint64_t driverReleases = 0;
};

/// One OpenCL device as a drt::DeviceManager. Not final: a test layer (the
/// self-test's mutants) may derive from it to change one hook.
class OpenCLDeviceManager : public DeviceManager {
public:
  /// An uninitialised manager; init() chooses and opens the device.
  explicit OpenCLDeviceManager(DeviceConfig config);
  /// Shuts the device down and releases its OpenCL objects. Must not run on
  /// the manager's own completion thread (inside one of its callbacks).
  ~OpenCLDeviceManager() override;

  /// Chooses the device from the parameters, creates its context and queue
  /// and builds the kernels. InvalidArgument listing the devices when the
  /// choice matches nothing; DeviceError naming the OpenCL call otherwise.
  Error init() override;
  Capabilities capabilities() const override;
  /// "opencl: <device> on <platform> (<version>)".
  std::string description() const override;

  uint64_t maximumMemory() const override;
  uint64_t usedMemory() const override;
  /// Bytes of the device blocks of live allocations, each the allocation's
  /// size class (staging buffers are host memory and not counted; cached
  /// free blocks are in poolStats()).
  uint64_t physicalMemoryInUse() const override;
  size_t liveAllocations() const override;
  DeviceStats stats() const override;
  /// kernels (runs, whose kernels the manager's threads share), and where
  /// the configuration makes them reachable: program-cache (init reused an
  /// earlier manager's program), memory-pool (allocations and frees that
  /// consult the pool of freed blocks), pool-reuse (an allocation served
  /// from it), staging-buffers (staged transfers, whose buffers come from
  /// one ring) and parallel-copy (chunks split between the copy threads).
  std::vector<PathUse> pathUses() const override;
  /// CL_MEM_ALLOC_HOST_PTR buffers mapped for their storage's life, one per
  /// tensor: transfers move them by DMA, with no staging copy (also with
  /// pinned-staging=1). The same object for every call.
  Expected<std::shared_ptr<HostMemory>> pinnedHostMemory() override;
  Error injectFault(const FaultSpec &fault) override;

  /// The device chosen by init().
  const OpenCLDeviceInfo &deviceInfo() const;
  /// Number of clBuildProgram calls this manager made: 1 after init, or 0
  /// when it reused the program of an earlier manager (programReused()).
  uint64_t programBuilds() const;
  /// True when init() reused the context and kernel program that an earlier
  /// manager of the same device built in this process; the manager still has
  /// its own queue, kernels and buffers.
  bool programReused() const;
  /// True when init() built a program of its own (shared-context=0) from
  /// the binary the process kept of the device's first build from source
  /// (program-binaries), not from the source.
  bool programFromBinary() const;
  /// Wall-clock seconds init() took, and of that, seconds spent creating the
  /// context and building the kernel program (next to none when reused).
  double initSeconds() const;
  double buildSeconds() const;
  /// True when pageable transfers of at least stagingMinBytes() go through
  /// pinned (CL_MEM_ALLOC_HOST_PTR) staging buffers: pinned-staging=1, or
  /// auto on a device whose memory is not the host's.
  bool usesPinnedStaging() const;
  /// The parameter staging-min-bytes: smaller transfers go direct.
  uint64_t stagingMinBytes() const;
  /// Transfers this manager moved through its staging buffers.
  uint64_t stagedTransfers() const;
  /// The pool of freed device blocks (parameter `memory-pool-bytes`).
  OpenCLPoolStats poolStats() const;
  /// Plans \p fault on this manager's calls from now on (init-time faults
  /// come from the `driver-faults` parameter). InvalidArgument when nth is
  /// 0 or the status is not a negative (error) status; DeviceLost when the
  /// device is shut down. The failure takes the backend's own error path:
  /// what a real driver failing there would cause.
  Error injectDriverFault(const DriverFault &fault);
  /// Calls of each kind this manager made through the seam (index: an
  /// OpenCLCall), struck ones included.
  std::vector<uint64_t> driverCalls() const;

protected:
  Expected<DeviceLocation> allocate(uint64_t bytes) override;
  Error free(DeviceLocation location) override;
  Expected<uint64_t> allocationSize(DeviceLocation location) const override;
  void copyToDevice(DeviceLocation dst, const std::byte *src, uint64_t bytes,
                    CompletionCallback done) override;
  void copyFromDevice(DeviceLocation src, std::byte *dst, uint64_t bytes,
                      CompletionCallback done) override;
  Error compileFunction(const Function &function) override;
  void evictFunction(const std::string &name) override;
  void execute(const Function &function, std::vector<RunArgument> arguments,
               CompletionCallback done) override;
  void shutdownBackend() override;

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace drt::opencl

#endif // DRT_OPENCL_OPENCLDEVICE_H
