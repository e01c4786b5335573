//===- TransferBench.cpp - drt transfers and runs against raw OpenCL ------===//
//
// What device resident tensors cost over the hardware, measured side by side
// in one process on one OpenCL device (DRT_OPENCL_PLATFORM and
// DRT_OPENCL_DEVICE choose it, as for the backend):
//
//  - transfer/MECHANISM/DIRECTION/BYTES: one transfer, timed alone (manual
//    time), for the mechanisms
//      raw         blocking clEnqueueWrite/ReadBuffer, pageable host memory,
//                  into a buffer created once
//      raw_pinned  the same from and into mapped CL_MEM_ALLOC_HOST_PTR memory
//      drt         transferToDeviceSync / transferFromDeviceSync of a
//                  pageable tensor (allocation from the pool included), the
//                  backend's defaults (pinned-staging=auto: staged from
//                  64 KiB where the device's memory is not the host's)
//      drt_direct  the same with pinned-staging=0 (never staged)
//      drt_staged  the same with pinned-staging=1 staging-min-bytes=0
//                  (every size staged, in chunks)
//      drt_pinned  a tensor with pinned host storage (pinnedHostMemory())
//      memcpy      a host memcpy of the bytes, pre-faulted
//    and DIRECTION to_device, from_device or round_trip (a from_device
//    read follows an upload that is not timed, on every side);
//  - chain/MECHANISM/N: N dependent runs of a scale over 16 MiB of f32 with
//    one upload before and one read-back after: raw (the same kernel from
//    the backend's program enqueued N times, one blocking read),
//    drt_resident (outputs stay on the device between runs) and
//    drt_host_round_trips (every run copies its input in and its output
//    out). Counter host_bytes: bytes across the host boundary per chain;
//    issued_us (drt's): the host's time until the last run was issued.
//
// DRT_BENCH_PARAMS ("key=value,...") adds backend parameters to every drt
// mechanism's manager. ci/bench runs it and writes the Markdown table of
// ratios.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "OpenCLDriver.h"
#include "OpenCLSupport.h"

#include "drt/ExecutionContext.h"
#include "drt/SyncTransfer.h"
#include "drt/opencl/OpenCLDevice.h"

#include <CL/cl.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace drt;
using Clock = std::chrono::steady_clock;

enum class Direction { ToDevice, FromDevice, RoundTrip };
const char *directionName(Direction d) {
  return d == Direction::ToDevice     ? "to_device"
         : d == Direction::FromDevice ? "from_device"
                                      : "round_trip";
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// 64-byte aligned host memory, touched once so that no page faults are
/// timed.
struct HostBuffer {
  explicit HostBuffer(size_t bytes)
      : data(static_cast<std::byte *>(
            ::operator new[](bytes, std::align_val_t(64)))),
        size(bytes) {
    std::memset(data, 1, bytes);
  }
  ~HostBuffer() { ::operator delete[](data, std::align_val_t(64)); }
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;
  std::byte *data;
  size_t size;
};

/// The device the backend picks by default (DRT_OPENCL_PLATFORM and
/// DRT_OPENCL_DEVICE choose it), chosen by the backend's own selection.
struct RawDevice {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::string error;

  RawDevice() {
    opencl::OpenCLDriver driver;
    Expected<opencl::SelectedDevice> selected =
        opencl::selectDevice(driver, DeviceConfig{});
    if (!selected) {
      error = selected.takeError().toString();
      return;
    }
    device = selected->device;
    cl_int rc = CL_SUCCESS;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &rc);
    if (rc == CL_SUCCESS)
      queue = clCreateCommandQueue(context, device, 0, &rc);
    if (rc != CL_SUCCESS)
      error = "context or queue: " + std::to_string(rc);
  }
  ~RawDevice() {
    if (queue)
      clReleaseCommandQueue(queue);
    if (context)
      clReleaseContext(context);
  }
};

/// Mapped CL_MEM_ALLOC_HOST_PTR memory of \p device.
struct RawPinned {
  RawPinned(RawDevice &device, size_t bytes) : queue(device.queue) {
    cl_int rc = CL_SUCCESS;
    buffer = clCreateBuffer(device.context,
                            CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes,
                            nullptr, &rc);
    if (rc == CL_SUCCESS)
      data =
          clEnqueueMapBuffer(queue, buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE,
                             0, bytes, 0, nullptr, nullptr, &rc);
    if (data)
      std::memset(data, 1, bytes);
  }
  ~RawPinned() {
    if (data)
      clEnqueueUnmapMemObject(queue, buffer, data, 0, nullptr, nullptr);
    clFinish(queue);
    if (buffer)
      clReleaseMemObject(buffer);
  }
  cl_command_queue queue;
  cl_mem buffer = nullptr;
  void *data = nullptr;
};

void rawTransfer(benchmark::State &state, Direction direction, bool pinned) {
  size_t bytes = size_t(state.range(0));
  RawDevice device;
  if (!device.error.empty())
    return state.SkipWithError(device.error.c_str());
  cl_int rc = CL_SUCCESS;
  cl_mem target =
      clCreateBuffer(device.context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  if (rc != CL_SUCCESS)
    return state.SkipWithError("clCreateBuffer failed");
  HostBuffer pageable(pinned ? 1 : bytes);
  RawPinned mapped(device, pinned ? bytes : 1);
  void *host = pinned ? mapped.data : pageable.data;
  // The first write touches the device pages; it is not timed.
  clEnqueueWriteBuffer(device.queue, target, CL_TRUE, 0, bytes, host, 0,
                       nullptr, nullptr);
  for (auto _ : state) {
    // As on the drt side, whose read-back releases the device copy, a read
    // follows an upload that is not timed: a blocking write of pageable
    // memory may return before its DMA is done, and the read waits for it.
    if (direction == Direction::FromDevice)
      rc |= clEnqueueWriteBuffer(device.queue, target, CL_TRUE, 0, bytes, host,
                                 0, nullptr, nullptr);
    auto start = Clock::now();
    if (direction != Direction::FromDevice)
      rc |= clEnqueueWriteBuffer(device.queue, target, CL_TRUE, 0, bytes, host,
                                 0, nullptr, nullptr);
    if (direction != Direction::ToDevice)
      rc |= clEnqueueReadBuffer(device.queue, target, CL_TRUE, 0, bytes, host,
                                0, nullptr, nullptr);
    state.SetIterationTime(secondsSince(start));
  }
  clReleaseMemObject(target);
  if (rc != CL_SUCCESS)
    state.SkipWithError("a transfer failed");
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes) *
                          (direction == Direction::RoundTrip ? 2 : 1));
}

enum class Storage { Pageable, Direct, Staged, Pinned };

/// Adds DRT_BENCH_PARAMS ("key=value,key=value": backend parameters for
/// every drt mechanism, to compare settings side by side) to \p parameters;
/// InvalidArgument naming a part without '='.
Error addParametersFromEnvironment(ParameterMap &parameters) {
  const char *text = std::getenv("DRT_BENCH_PARAMS");
  std::string_view rest = text ? text : "";
  while (!rest.empty()) {
    std::string_view part = rest.substr(0, rest.find(','));
    rest.remove_prefix(std::min(rest.size(), part.size() + 1));
    size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return makeError(ErrorCode::InvalidArgument, "DRT_BENCH_PARAMS: '" +
                                                       std::string(part) +
                                                       "' is not key=value");
    parameters[std::string(part.substr(0, eq))] =
        std::string(part.substr(eq + 1));
  }
  return Error::success();
}

void drtTransfer(benchmark::State &state, Direction direction,
                 Storage storage) {
  size_t bytes = size_t(state.range(0));
  DeviceConfig config;
  config.name = "bench";
  if (storage == Storage::Direct)
    config.parameters["pinned-staging"] = "0";
  if (storage == Storage::Staged)
    config.parameters = {{"pinned-staging", "1"}, {"staging-min-bytes", "0"}};
  if (Error e = addParametersFromEnvironment(config.parameters))
    return state.SkipWithError(e.toString().c_str());
  opencl::OpenCLDeviceManager device(config);
  if (Error e = device.init())
    return state.SkipWithError(e.toString().c_str());
  Type type{ElemKind::UInt8, {bytes}};
  std::shared_ptr<HostMemory> memory;
  if (storage == Storage::Pinned) {
    Expected<std::shared_ptr<HostMemory>> pinned = device.pinnedHostMemory();
    if (!pinned)
      return state.SkipWithError(pinned.takeError().toString().c_str());
    memory = *pinned;
  }
  Expected<Tensor> made = Tensor::create(type, "t", memory);
  if (!made)
    return state.SkipWithError(made.takeError().toString().c_str());
  Tensor t = std::move(*made);
  std::memset(t.mutableHostBytes().data(), 1, bytes);
  // The first upload creates the device block; later ones reuse it.
  Error error = transferToDeviceSync(device, t);
  if (!error)
    error = device.releaseDeviceTensor(t);
  for (auto _ : state) {
    if (direction == Direction::FromDevice && !error)
      error = transferToDeviceSync(device, t);
    auto start = Clock::now();
    if (direction != Direction::FromDevice && !error)
      error = transferToDeviceSync(device, t);
    if (direction != Direction::ToDevice && !error)
      error = transferFromDeviceSync(device, t, /*release=*/true);
    state.SetIterationTime(secondsSince(start));
    if (direction == Direction::ToDevice && !error)
      error = device.releaseDeviceTensor(t);
  }
  if (error)
    return state.SkipWithError(error.toString().c_str());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes) *
                          (direction == Direction::RoundTrip ? 2 : 1));
  state.counters["driver_allocations"] =
      double(device.poolStats().driverAllocations);
}

void memcpyTransfer(benchmark::State &state, Direction direction) {
  size_t bytes = size_t(state.range(0));
  HostBuffer from(bytes), to(bytes);
  for (auto _ : state) {
    auto start = Clock::now();
    std::memcpy(to.data, from.data, bytes);
    if (direction == Direction::RoundTrip)
      std::memcpy(from.data, to.data, bytes);
    benchmark::ClobberMemory();
    state.SetIterationTime(secondsSince(start));
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes) *
                          (direction == Direction::RoundTrip ? 2 : 1));
}

const std::vector<int64_t> Sizes = {4,       4 << 10,  64 << 10,
                                    1 << 20, 16 << 20, 256 << 20};

void registerTransfers() {
  for (Direction d :
       {Direction::RoundTrip, Direction::ToDevice, Direction::FromDevice}) {
    std::string dir = directionName(d);
    auto add = [&](const std::string &mechanism, auto function) {
      auto *b = benchmark::RegisterBenchmark(
          ("transfer/" + mechanism + "/" + dir).c_str(), function);
      for (int64_t size : Sizes)
        b->Arg(size);
      b->UseManualTime()->Unit(benchmark::kMicrosecond);
    };
    add("raw", [d](benchmark::State &s) { rawTransfer(s, d, false); });
    add("drt",
        [d](benchmark::State &s) { drtTransfer(s, d, Storage::Pageable); });
    add("drt_direct",
        [d](benchmark::State &s) { drtTransfer(s, d, Storage::Direct); });
    add("drt_staged",
        [d](benchmark::State &s) { drtTransfer(s, d, Storage::Staged); });
    add("raw_pinned", [d](benchmark::State &s) { rawTransfer(s, d, true); });
    add("drt_pinned",
        [d](benchmark::State &s) { drtTransfer(s, d, Storage::Pinned); });
    add("memcpy", [d](benchmark::State &s) { memcpyTransfer(s, d); });
  }
}

//===----------------------------------------------------------------------===//
// Chains of dependent runs.
//===----------------------------------------------------------------------===//

/// The chain's tensors: 16 MiB of f32, where the transfers dominate, and
/// 64 KiB, where what each run costs the host does.
const std::vector<int64_t> ChainElements = {int64_t(4) << 20, 16 << 10};
constexpr float ChainFactor = 1.0f;

/// The raw loop as it is (no events), or with what drt's runs carry in the
/// driver: an event per kernel and a flush after each, the events waited
/// for and released after the read-back. What separates the two is the
/// driver's price of that bookkeeping; what separates the second from drt
/// is drt's own.
void rawChain(benchmark::State &state, bool eventPerRun) {
  int runs = int(state.range(0));
  size_t elements = size_t(state.range(1));
  RawDevice device;
  if (!device.error.empty())
    return state.SkipWithError(device.error.c_str());
  cl_int rc = CL_SUCCESS;
  const char *source = opencl::KernelSource;
  cl_program program =
      clCreateProgramWithSource(device.context, 1, &source, nullptr, &rc);
  rc |= clBuildProgram(program, 1, &device.device, opencl::KernelBuildOptions,
                       nullptr, nullptr);
  cl_kernel kernel = clCreateKernel(
      program,
      opencl::kernelName(opencl::kernelFor(OpKind::Scale, ElemKind::Float32)),
      &rc);
  size_t bytes = elements * sizeof(float);
  cl_mem a =
      clCreateBuffer(device.context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  cl_mem b =
      clCreateBuffer(device.context, CL_MEM_READ_WRITE, bytes, nullptr, &rc);
  if (rc != CL_SUCCESS)
    return state.SkipWithError("building the raw chain failed");
  HostBuffer host(bytes);
  cl_ulong zero = 0;
  cl_float factor = ChainFactor;
  cl_ulong count = elements;
  std::vector<cl_event> events(size_t(runs), nullptr);
  for (auto _ : state) {
    auto start = Clock::now();
    rc |= clEnqueueWriteBuffer(device.queue, a, CL_FALSE, 0, bytes, host.data,
                               0, nullptr, nullptr);
    for (int r = 0; r < runs; ++r) {
      cl_mem in = r % 2 ? b : a, out = r % 2 ? a : b;
      rc |= clSetKernelArg(kernel, 0, sizeof(cl_mem), &in);
      rc |= clSetKernelArg(kernel, 1, sizeof zero, &zero);
      rc |= clSetKernelArg(kernel, 2, sizeof(cl_mem), &out);
      rc |= clSetKernelArg(kernel, 3, sizeof zero, &zero);
      rc |= clSetKernelArg(kernel, 4, sizeof factor, &factor);
      rc |= clSetKernelArg(kernel, 5, sizeof count, &count);
      // Launched as the backend launches it (Kernels.h).
      size_t local = opencl::KernelWorkGroupSize;
      size_t global = (elements + local - 1) / local * local;
      rc |= clEnqueueNDRangeKernel(device.queue, kernel, 1, nullptr, &global,
                                   &local, 0, nullptr,
                                   eventPerRun ? &events[size_t(r)] : nullptr);
      if (eventPerRun)
        rc |= clFlush(device.queue);
    }
    rc |= clEnqueueReadBuffer(device.queue, runs % 2 ? b : a, CL_TRUE, 0, bytes,
                              host.data, 0, nullptr, nullptr);
    if (eventPerRun)
      for (cl_event &e : events) {
        rc |= clWaitForEvents(1, &e);
        rc |= clReleaseEvent(e);
        e = nullptr;
      }
    state.SetIterationTime(secondsSince(start));
  }
  clReleaseMemObject(a);
  clReleaseMemObject(b);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  if (rc != CL_SUCCESS)
    state.SkipWithError("the raw chain failed");
  state.counters["host_bytes"] = double(2 * bytes);
}

Function chainStep(const char *name, const char *from, const char *to,
                   size_t elements) {
  Type type{ElemKind::Float32, {elements}};
  Function fn(name);
  fn.addPlaceholder(from, type).addPlaceholder(to, type);
  fn.addNode(Node{OpKind::Scale, {from}, to, ChainFactor});
  return fn;
}

/// How drt's chain issues its runs.
enum class ChainRuns {
  /// Resident outputs, each run issued without waiting for the one before:
  /// a device that performs runs in order takes them back to back.
  Issued,
  /// Resident outputs, each run waited for before the next is issued.
  Waited,
  /// Outputs brought back to host after every run
  /// (copyDeviceTensorsToHost).
  HostRoundTrips,
};

void drtChain(benchmark::State &state, ChainRuns how) {
  int runs = int(state.range(0));
  size_t elements = size_t(state.range(1));
  bool resident = how != ChainRuns::HostRoundTrips;
  DeviceConfig config;
  config.name = "bench";
  config.copyDeviceTensorsToHost = !resident;
  opencl::OpenCLDeviceManager device(config);
  if (Error e = device.init())
    return state.SkipWithError(e.toString().c_str());
  Error error = addNetworkSync(device, chainStep("ab", "a", "b", elements));
  if (!error)
    error = addNetworkSync(device, chainStep("ba", "b", "a", elements));
  ExecutionContext context;
  Type type{ElemKind::Float32, {elements}};
  Tensor &a = context.bindings().allocate("a", type);
  Tensor &b = context.bindings().allocate("b", type);
  std::memset(a.mutableHostBytes().data(), 0, type.sizeInBytes());
  // The first error of the runs issued without waiting, and how many of
  // them have not called back: a callback may come after the records it
  // held are released, so an iteration waits for every one.
  std::mutex mutex;
  std::condition_variable calledBack;
  int uncalled = 0;
  Error issuedError;
  auto note = [&](Error e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (e && !issuedError)
      issuedError = std::move(e);
    if (--uncalled == 0)
      calledBack.notify_all();
  };
  // Bytes across the host boundary inside the timed part.
  uint64_t hostBytes = 0;
  double issuedSeconds = 0;
  auto bytesMoved = [&device] {
    DeviceStats s = device.stats();
    return s.bytesToDevice + s.bytesFromDevice;
  };
  for (auto _ : state) {
    // As the raw loop's second buffer, b stays on the device between
    // iterations (outside the timed part), so runs write it in place.
    if (resident && !error &&
        b.residencySnapshot().state == ResidencyState::Host)
      error = transferToDeviceSync(device, b);
    uint64_t before = bytesMoved();
    auto start = Clock::now();
    if (resident && !error)
      error = transferToDeviceSync(device, a);
    for (int r = 0; r < runs && !error; ++r) {
      const char *network = r % 2 ? "ba" : "ab";
      if (how == ChainRuns::Issued) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++uncalled;
        }
        device.runFunction(network, context, note);
      } else
        error = runFunctionSync(device, network, context);
    }
    // What the host spends issuing the upload and the runs.
    issuedSeconds += secondsSince(start);
    Tensor &last = *context.bindings().get(runs % 2 ? "b" : "a");
    // The read-back waits for the last run, which waits for the others.
    if (resident && !error)
      error = transferFromDeviceSync(device, last);
    state.SetIterationTime(secondsSince(start));
    hostBytes += bytesMoved() - before;
    {
      std::unique_lock<std::mutex> lock(mutex);
      calledBack.wait(lock, [&] { return uncalled == 0; });
      if (!error)
        error = std::move(issuedError);
      issuedError = Error::success();
    }
    if (!error)
      error = device.releaseDeviceTensor(a);
  }
  if (error)
    return state.SkipWithError(error.toString().c_str());
  state.counters["host_bytes"] = double(hostBytes) / double(state.iterations());
  state.counters["issued_us"] =
      1e6 * issuedSeconds / double(state.iterations());
  state.counters["device_copies"] = double(device.stats().deviceCopies);
}

void registerChains() {
  for (const char *mechanism :
       {"raw", "raw_event_per_run", "drt_resident", "drt_resident_waited",
        "drt_host_round_trips"}) {
    std::string name = std::string("chain/") + mechanism;
    std::string m = mechanism;
    auto *b =
        benchmark::RegisterBenchmark(name.c_str(), [m](benchmark::State &s) {
          if (m == "raw" || m == "raw_event_per_run")
            rawChain(s, m == "raw_event_per_run");
          else
            drtChain(s, m == "drt_resident" ? ChainRuns::Issued
                        : m == "drt_resident_waited"
                            ? ChainRuns::Waited
                            : ChainRuns::HostRoundTrips);
        });
    for (int64_t elements : ChainElements)
      for (int64_t runs : {1, 4, 16})
        b->Args({runs, elements});
    b->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
}

} // namespace

int main(int argc, char **argv) {
  registerTransfers();
  registerChains();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
