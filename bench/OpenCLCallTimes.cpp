//===- OpenCLCallTimes.cpp - Time spent in OpenCL calls, per thread -------===//
//
// A library to preload (LD_PRELOAD) into a program that uses OpenCL through
// its loader: it stands in for the OpenCL entry points that transfers, runs
// and completions use, forwards each call to the next definition, and adds
// the call's time to its thread's account. It also times
// pthread_mutex_lock outside OpenCL calls: the waits for the program's own
// locks. At exit it writes one line per thread and call to the file named
// by DRT_CALL_TIMES (or standard error):
//
//   thread 1 clEnqueueNDRangeKernel calls 16000 us 51234.5
//
// Threads are numbered in the order of their first timed call. What this
// separates, on a machine without a profiler: how much of a program's time
// goes to the driver, on which thread, and how much to waiting for locks,
// measured the same way for drt's backend and for raw OpenCL loops.
//
//===----------------------------------------------------------------------===//

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace {

enum Call : unsigned {
  SetKernelArg,
  EnqueueNDRangeKernel,
  EnqueueWriteBuffer,
  EnqueueReadBuffer,
  EnqueueCopyBuffer,
  EnqueueMapBuffer,
  EnqueueUnmapMemObject,
  Flush,
  Finish,
  WaitForEvents,
  GetEventInfo,
  ReleaseEvent,
  RetainMemObject,
  ReleaseMemObject,
  CreateBuffer,
  CreateContext,
  BuildProgram,
  MutexLock,
  NumCalls,
};

const char *const CallNames[NumCalls] = {
    "clSetKernelArg",
    "clEnqueueNDRangeKernel",
    "clEnqueueWriteBuffer",
    "clEnqueueReadBuffer",
    "clEnqueueCopyBuffer",
    "clEnqueueMapBuffer",
    "clEnqueueUnmapMemObject",
    "clFlush",
    "clFinish",
    "clWaitForEvents",
    "clGetEventInfo",
    "clReleaseEvent",
    "clRetainMemObject",
    "clReleaseMemObject",
    "clCreateBuffer",
    "clCreateContext",
    "clBuildProgram",
    "pthread_mutex_lock (outside OpenCL calls)"};

struct Account {
  std::array<std::atomic<uint64_t>, NumCalls> calls{};
  std::array<std::atomic<uint64_t>, NumCalls> nanoseconds{};
};

constexpr int MaxThreads = 64;
Account Accounts[MaxThreads];
std::atomic<int> ThreadsSeen{0};

thread_local int ThreadIndex = -1;
/// Depth of OpenCL calls on this thread: locks taken inside them are the
/// driver's time, already counted.
thread_local int InsideCall = 0;

uint64_t now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

Account *account() {
  if (ThreadIndex < 0)
    ThreadIndex = ThreadsSeen.fetch_add(1);
  return ThreadIndex < MaxThreads ? &Accounts[ThreadIndex] : nullptr;
}

void charge(Call call, uint64_t start) {
  uint64_t spent = now() - start;
  if (Account *a = account()) {
    a->calls[call].fetch_add(1, std::memory_order_relaxed);
    a->nanoseconds[call].fetch_add(spent, std::memory_order_relaxed);
  }
}

template <typename F> F next(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {
    std::fprintf(stderr, "OpenCLCallTimes: no next definition of %s\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

/// Calls the next definition of the entry point \p name, timed as \p call.
template <typename R, typename... Args>
R timed(Call call, const char *name, R (*&real)(Args...), Args... args) {
  if (!real)
    real = next<R (*)(Args...)>(name);
  ++InsideCall;
  uint64_t start = now();
  R result = real(args...);
  charge(call, start);
  --InsideCall;
  return result;
}

struct Report {
  ~Report() {
    const char *path = std::getenv("DRT_CALL_TIMES");
    FILE *out = path ? std::fopen(path, "a") : stderr;
    if (!out)
      out = stderr;
    int threads = ThreadsSeen.load();
    for (int t = 0; t < threads && t < MaxThreads; ++t)
      for (unsigned c = 0; c < NumCalls; ++c) {
        uint64_t n = Accounts[t].calls[c].load();
        if (n)
          std::fprintf(out, "thread %d %s calls %llu us %.1f\n", t + 1,
                       CallNames[c], (unsigned long long)n,
                       double(Accounts[t].nanoseconds[c].load()) / 1e3);
      }
    if (out != stderr)
      std::fclose(out);
  }
} TheReport;

} // namespace

#define DRT_TIMED(CALL, NAME, R, PARAMS, ARGS)                                 \
  extern "C" R NAME PARAMS {                                                   \
    static R(*real) PARAMS = nullptr;                                          \
    return timed(CALL, #NAME, real, ARGS);                                     \
  }

#define P(...) (__VA_ARGS__)
#define A(...) __VA_ARGS__

DRT_TIMED(SetKernelArg, clSetKernelArg, cl_int,
          P(cl_kernel k, cl_uint i, size_t s, const void *v), A(k, i, s, v))
DRT_TIMED(EnqueueNDRangeKernel, clEnqueueNDRangeKernel, cl_int,
          P(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o,
            const size_t *g, const size_t *l, cl_uint n, const cl_event *w,
            cl_event *e),
          A(q, k, d, o, g, l, n, w, e))
DRT_TIMED(EnqueueWriteBuffer, clEnqueueWriteBuffer, cl_int,
          P(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s,
            const void *p, cl_uint n, const cl_event *w, cl_event *e),
          A(q, m, b, o, s, p, n, w, e))
DRT_TIMED(EnqueueReadBuffer, clEnqueueReadBuffer, cl_int,
          P(cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s,
            void *p, cl_uint n, const cl_event *w, cl_event *e),
          A(q, m, b, o, s, p, n, w, e))
DRT_TIMED(EnqueueCopyBuffer, clEnqueueCopyBuffer, cl_int,
          P(cl_command_queue q, cl_mem a, cl_mem b, size_t oa, size_t ob,
            size_t s, cl_uint n, const cl_event *w, cl_event *e),
          A(q, a, b, oa, ob, s, n, w, e))
DRT_TIMED(EnqueueMapBuffer, clEnqueueMapBuffer, void *,
          P(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o,
            size_t s, cl_uint n, const cl_event *w, cl_event *e, cl_int *rc),
          A(q, m, b, f, o, s, n, w, e, rc))
DRT_TIMED(EnqueueUnmapMemObject, clEnqueueUnmapMemObject, cl_int,
          P(cl_command_queue q, cl_mem m, void *p, cl_uint n, const cl_event *w,
            cl_event *e),
          A(q, m, p, n, w, e))
DRT_TIMED(Flush, clFlush, cl_int, P(cl_command_queue q), A(q))
DRT_TIMED(Finish, clFinish, cl_int, P(cl_command_queue q), A(q))
DRT_TIMED(WaitForEvents, clWaitForEvents, cl_int,
          P(cl_uint n, const cl_event *l), A(n, l))
DRT_TIMED(GetEventInfo, clGetEventInfo, cl_int,
          P(cl_event e, cl_event_info i, size_t s, void *v, size_t *r),
          A(e, i, s, v, r))
DRT_TIMED(ReleaseEvent, clReleaseEvent, cl_int, P(cl_event e), A(e))
DRT_TIMED(RetainMemObject, clRetainMemObject, cl_int, P(cl_mem m), A(m))
DRT_TIMED(ReleaseMemObject, clReleaseMemObject, cl_int, P(cl_mem m), A(m))
DRT_TIMED(CreateBuffer, clCreateBuffer, cl_mem,
          P(cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *rc),
          A(c, f, s, h, rc))
DRT_TIMED(CreateContext, clCreateContext, cl_context,
          P(const cl_context_properties *p, cl_uint n, const cl_device_id *d,
            void(CL_CALLBACK *f)(const char *, const void *, size_t, void *),
            void *u, cl_int *rc),
          A(p, n, d, f, u, rc))
DRT_TIMED(BuildProgram, clBuildProgram, cl_int,
          P(cl_program p, cl_uint n, const cl_device_id *d, const char *o,
            void(CL_CALLBACK *f)(cl_program, void *), void *u),
          A(p, n, d, o, f, u))

extern "C" int pthread_mutex_lock(pthread_mutex_t *m) {
  static int (*real)(pthread_mutex_t *) = nullptr;
  if (!real)
    real = next<int (*)(pthread_mutex_t *)>("pthread_mutex_lock");
  if (InsideCall)
    return real(m);
  // An uncontended lock is not a wait worth timing; a contended one is.
  if (pthread_mutex_trylock(m) == 0)
    return 0;
  uint64_t start = now();
  int rc = real(m);
  charge(MutexLock, start);
  return rc;
}
