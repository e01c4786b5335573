//===- OpenCLDriver.h - The seam between the backend and OpenCL -*- C++ -*-===//
//
// Every OpenCL entry point the backend calls goes through an OpenCLDriver:
// one member per entry point, with the entry point's signature. A driver
// counts the calls of each kind and, where a DriverFault is planned, makes
// the planned call fail with its status instead of calling OpenCL (a release
// call releases all the same, then fails), so that
// a test (or the suite's inject-fault, or the `driver-faults` parameter)
// drives the backend's own error paths with what a real driver returns.
// The fast path, with no fault planned, is one relaxed atomic load and one
// relaxed increment. With delayCommands() (the `driver-delay-us` parameter),
// each transfer, copy and kernel waits for a CommandDelay's gate first; with
// jitterCalls() (`driver-jitter-us`), every call first holds its calling
// thread for a random moment.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_OPENCLDRIVER_H
#define DRT_OPENCL_OPENCLDRIVER_H

#include "CommandDelay.h"
#include "drt/opencl/OpenCLDevice.h"

#include <CL/cl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace drt::opencl {

class OpenCLDriver {
public:
  /// Plans \p fault: the fault.nth-th call of fault.call from now on fails.
  void plan(const DriverFault &fault) {
    std::lock_guard<std::mutex> lock(mutex_);
    planned_.push_back({fault.call, fault.nth, fault.status});
    armed_.store(true, std::memory_order_relaxed);
  }

  /// Counts one call of \p call; the status it must fail with when a
  /// planned fault strikes it, else nullopt.
  std::optional<cl_int> strike(OpenCLCall call) {
    if (jitterUs_)
      holdCallingThread();
    calls_[size_t(call)].fetch_add(1, std::memory_order_relaxed);
    if (!armed_.load(std::memory_order_relaxed))
      return std::nullopt;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = planned_.begin(); it != planned_.end(); ++it) {
      if (it->call != call || --it->remaining != 0)
        continue;
      cl_int status = it->status;
      planned_.erase(it);
      armed_.store(!planned_.empty(), std::memory_order_relaxed);
      return status;
    }
    return std::nullopt;
  }

  /// Counts one call of the release \p call and makes it with \p release,
  /// which a planned fault does not prevent: the backend sees the planned
  /// status, and the object is released all the same. A test that plans
  /// hundreds of failures in one process would otherwise pile up driver
  /// objects (an event or a buffer keeps its context alive), and NVIDIA's
  /// driver refuses new contexts after a few hundred of them.
  template <typename Release>
  cl_int releasing(OpenCLCall call, Release release) {
    std::optional<cl_int> status = strike(call);
    cl_int rc = release();
    return status ? *status : rc;
  }

  /// From now on, holds each transfer, copy and kernel it enqueues back for
  /// a random time of up to \p most before the device may start it
  /// (CommandDelay). Called before any command is enqueued.
  void delayCommands(std::chrono::microseconds most) {
    delay_ = std::make_unique<CommandDelay>(most);
  }

  /// From now on, holds the calling thread of every call for a random time
  /// of up to \p most first, yielding to the other threads meanwhile, as a
  /// driver whose calls take their time: the backend's code between two
  /// calls meets other threads' calls far more often than when each takes
  /// a microsecond. Called before the first call init() makes after
  /// choosing its parameters.
  void jitterCalls(std::chrono::microseconds most) {
    jitterUs_ = uint64_t(most.count());
  }

  /// Device-to-device copies enqueued so far (see enqueueCopyBuffer).
  uint64_t deviceCopies() const {
    return deviceCopies_.load(std::memory_order_relaxed);
  }

  /// Calls of each kind so far.
  std::vector<uint64_t> calls() const {
    std::vector<uint64_t> out;
    for (const auto &c : calls_)
      out.push_back(c.load(std::memory_order_relaxed));
    return out;
  }

  // The entry points, in the order of OpenCLCall.
  cl_int getPlatformIDs(cl_uint n, cl_platform_id *platforms, cl_uint *count) {
    if (auto st = strike(OpenCLCall::GetPlatformIDs))
      return *st;
    return clGetPlatformIDs(n, platforms, count);
  }
  cl_int getPlatformInfo(cl_platform_id p, cl_platform_info what, size_t size,
                         void *value, size_t *sizeRet) {
    if (auto st = strike(OpenCLCall::GetPlatformInfo))
      return *st;
    return clGetPlatformInfo(p, what, size, value, sizeRet);
  }
  cl_int getDeviceIDs(cl_platform_id p, cl_device_type type, cl_uint n,
                      cl_device_id *devices, cl_uint *count) {
    if (auto st = strike(OpenCLCall::GetDeviceIDs))
      return *st;
    return clGetDeviceIDs(p, type, n, devices, count);
  }
  cl_int getDeviceInfo(cl_device_id d, cl_device_info what, size_t size,
                       void *value, size_t *sizeRet) {
    if (auto st = strike(OpenCLCall::GetDeviceInfo))
      return *st;
    return clGetDeviceInfo(d, what, size, value, sizeRet);
  }
  cl_context createContext(const cl_context_properties *properties, cl_uint n,
                           const cl_device_id *devices, cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateContext))
      return failed<cl_context>(rc, *st);
    return clCreateContext(properties, n, devices, nullptr, nullptr, rc);
  }
  cl_int retainContext(cl_context c) {
    if (auto st = strike(OpenCLCall::RetainContext))
      return *st;
    return clRetainContext(c);
  }
  cl_int releaseContext(cl_context c) {
    return releasing(OpenCLCall::ReleaseContext,
                     [&] { return clReleaseContext(c); });
  }
  cl_command_queue createCommandQueue(cl_context c, cl_device_id d,
                                      cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateCommandQueue))
      return failed<cl_command_queue>(rc, *st);
    return clCreateCommandQueue(c, d, 0, rc);
  }
  cl_int releaseCommandQueue(cl_command_queue q) {
    return releasing(OpenCLCall::ReleaseCommandQueue,
                     [&] { return clReleaseCommandQueue(q); });
  }
  cl_program createProgramWithSource(cl_context c, const char *source,
                                     cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateProgramWithSource))
      return failed<cl_program>(rc, *st);
    return clCreateProgramWithSource(c, 1, &source, nullptr, rc);
  }
  cl_int buildProgram(cl_program p, cl_device_id d, const char *options) {
    if (auto st = strike(OpenCLCall::BuildProgram))
      return *st;
    return clBuildProgram(p, 1, &d, options, nullptr, nullptr);
  }
  cl_int getProgramBuildInfo(cl_program p, cl_device_id d,
                             cl_program_build_info what, size_t size,
                             void *value, size_t *sizeRet) {
    if (auto st = strike(OpenCLCall::GetProgramBuildInfo))
      return *st;
    return clGetProgramBuildInfo(p, d, what, size, value, sizeRet);
  }
  cl_int retainProgram(cl_program p) {
    if (auto st = strike(OpenCLCall::RetainProgram))
      return *st;
    return clRetainProgram(p);
  }
  cl_int releaseProgram(cl_program p) {
    return releasing(OpenCLCall::ReleaseProgram,
                     [&] { return clReleaseProgram(p); });
  }
  cl_kernel createKernel(cl_program p, const char *name, cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateKernel))
      return failed<cl_kernel>(rc, *st);
    return clCreateKernel(p, name, rc);
  }
  cl_int releaseKernel(cl_kernel k) {
    return releasing(OpenCLCall::ReleaseKernel,
                     [&] { return clReleaseKernel(k); });
  }
  cl_int setKernelArg(cl_kernel k, cl_uint index, size_t size,
                      const void *value) {
    if (auto st = strike(OpenCLCall::SetKernelArg))
      return *st;
    return clSetKernelArg(k, index, size, value);
  }
  cl_mem createBuffer(cl_context c, cl_mem_flags flags, size_t size,
                      cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateBuffer))
      return failed<cl_mem>(rc, *st);
    return clCreateBuffer(c, flags, size, nullptr, rc);
  }
  cl_int retainMemObject(cl_mem m) {
    if (auto st = strike(OpenCLCall::RetainMemObject))
      return *st;
    return clRetainMemObject(m);
  }
  cl_int releaseMemObject(cl_mem m) {
    return releasing(OpenCLCall::ReleaseMemObject,
                     [&] { return clReleaseMemObject(m); });
  }
  cl_int enqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                            size_t offset, size_t size, const void *src,
                            cl_event *event) {
    if (auto st = strike(OpenCLCall::EnqueueWriteBuffer))
      return *st;
    Gate gate(delay_.get(), q);
    return clEnqueueWriteBuffer(q, m, blocking, offset, size, src, gate.count(),
                                gate.list(), event);
  }
  cl_int enqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                           size_t offset, size_t size, void *dst,
                           cl_event *event) {
    if (auto st = strike(OpenCLCall::EnqueueReadBuffer))
      return *st;
    Gate gate(delay_.get(), q);
    return clEnqueueReadBuffer(q, m, blocking, offset, size, dst, gate.count(),
                               gate.list(), event);
  }
  /// Copies between two buffers. Every copy counts as a device-to-device
  /// copy (deviceCopies()), so a copy added anywhere is counted.
  cl_int enqueueCopyBuffer(cl_command_queue q, cl_mem from, cl_mem to,
                           size_t size, cl_event *event) {
    if (auto st = strike(OpenCLCall::EnqueueCopyBuffer))
      return *st;
    Gate gate(delay_.get(), q);
    cl_int rc = clEnqueueCopyBuffer(q, from, to, 0, 0, size, gate.count(),
                                    gate.list(), event);
    if (rc == CL_SUCCESS)
      deviceCopies_.fetch_add(1, std::memory_order_relaxed);
    return rc;
  }
  void *enqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blocking,
                         cl_map_flags flags, size_t size, cl_event *event,
                         cl_int *rc) {
    if (auto st = strike(OpenCLCall::EnqueueMapBuffer))
      return failed<void *>(rc, *st);
    return clEnqueueMapBuffer(q, m, blocking, flags, 0, size, 0, nullptr, event,
                              rc);
  }
  cl_int enqueueUnmapMemObject(cl_command_queue q, cl_mem m, void *mapped) {
    if (auto st = strike(OpenCLCall::EnqueueUnmapMemObject))
      return *st;
    return clEnqueueUnmapMemObject(q, m, mapped, 0, nullptr, nullptr);
  }
  cl_int enqueueNDRangeKernel(cl_command_queue q, cl_kernel k,
                              const size_t *global, const size_t *local,
                              cl_event *event) {
    if (auto st = strike(OpenCLCall::EnqueueNDRangeKernel))
      return *st;
    Gate gate(delay_.get(), q);
    return clEnqueueNDRangeKernel(q, k, 1, nullptr, global, local, gate.count(),
                                  gate.list(), event);
  }
  cl_int flush(cl_command_queue q) {
    if (auto st = strike(OpenCLCall::Flush))
      return *st;
    return clFlush(q);
  }
  cl_int finish(cl_command_queue q) {
    if (auto st = strike(OpenCLCall::Finish))
      return *st;
    return clFinish(q);
  }
  cl_int waitForEvents(cl_event event) {
    if (auto st = strike(OpenCLCall::WaitForEvents))
      return *st;
    return clWaitForEvents(1, &event);
  }
  cl_int getEventInfo(cl_event event, cl_event_info what, size_t size,
                      void *value) {
    if (auto st = strike(OpenCLCall::GetEventInfo))
      return *st;
    return clGetEventInfo(event, what, size, value, nullptr);
  }
  cl_int releaseEvent(cl_event event) {
    return releasing(OpenCLCall::ReleaseEvent,
                     [&] { return clReleaseEvent(event); });
  }
  cl_program createProgramWithBinary(cl_context c, cl_device_id d,
                                     const std::vector<unsigned char> &binary,
                                     cl_int *rc) {
    if (auto st = strike(OpenCLCall::CreateProgramWithBinary))
      return failed<cl_program>(rc, *st);
    size_t size = binary.size();
    const unsigned char *bytes = binary.data();
    return clCreateProgramWithBinary(c, 1, &d, &size, &bytes, nullptr, rc);
  }
  cl_int getProgramInfo(cl_program p, cl_program_info what, size_t size,
                        void *value) {
    if (auto st = strike(OpenCLCall::GetProgramInfo))
      return *st;
    return clGetProgramInfo(p, what, size, value, nullptr);
  }

private:
  /// A quarter of the calls go at once; the others wait from a
  /// microsecond to jitterUs_, yielding the processor while they wait
  /// (sleeping would add the kernel's timer slack, about 50 us, to each).
  void holdCallingThread() {
    thread_local std::minstd_rand random(
        uint32_t(std::hash<std::thread::id>{}(std::this_thread::get_id()) | 1));
    uint64_t draw = random();
    if (draw % 4 == 0)
      return;
    auto until = std::chrono::steady_clock::now() +
                 std::chrono::microseconds(1 + (draw >> 2) % jitterUs_);
    do
      std::this_thread::yield();
    while (std::chrono::steady_clock::now() < until);
  }

  template <typename T> static T failed(cl_int *rc, cl_int status) {
    if (rc)
      *rc = status;
    return nullptr;
  }

  /// The wait list of one command: a CommandDelay's gate, or nothing.
  class Gate {
  public:
    Gate(CommandDelay *delay, cl_command_queue q)
        : event_(delay ? delay->gate(q) : nullptr) {}
    ~Gate() {
      if (event_)
        clReleaseEvent(event_);
    }
    Gate(const Gate &) = delete;
    Gate &operator=(const Gate &) = delete;
    cl_uint count() const { return event_ ? 1 : 0; }
    const cl_event *list() const { return event_ ? &event_ : nullptr; }

  private:
    cl_event event_;
  };

  struct Planned {
    OpenCLCall call;
    unsigned remaining;
    cl_int status;
  };
  std::mutex mutex_;
  std::vector<Planned> planned_;
  std::atomic<bool> armed_{false};
  std::array<std::atomic<uint64_t>, NumOpenCLCalls> calls_{};
  std::atomic<uint64_t> deviceCopies_{0};
  std::unique_ptr<CommandDelay> delay_;
  uint64_t jitterUs_ = 0;
};

} // namespace drt::opencl

#endif // DRT_OPENCL_OPENCLDRIVER_H
