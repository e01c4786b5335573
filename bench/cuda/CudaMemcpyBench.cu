//===- CudaMemcpyBench.cu - cudaMemcpy as the physical reference ----------===//
//
// The speed the hardware gives a transfer, for drt-bench-transfer's table on
// an NVIDIA machine: synchronous cudaMemcpy between a device buffer and host
// memory that is pinned (cudaMallocHost: the DMA limit) or pageable (plain
// aligned memory, touched first), in each direction and as a round trip, at
// the sizes drt-bench-transfer uses. Each figure is the median wall time of
// repeated copies after warm-up. Prints the results as JSON in the shape of
// Google Benchmark's output, names "cuda/MEMORY/DIRECTION/BYTES", which
// bench/transfer-table.py merges. Built with nvcc by ci/gpu:
//   nvcc -O2 -std=c++17 -o drt-cuda-memcpy-bench bench/cuda/CudaMemcpyBench.cu
//
//===----------------------------------------------------------------------===//
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

/// Median wall time in microseconds of \p copy, repeated for about a
/// quarter of a second (at least 5 times) after 3 warm-ups.
template <typename F> double medianMicros(F copy) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i)
    copy();
  std::vector<double> times;
  auto begin = Clock::now();
  while (times.size() < 5 ||
         (Clock::now() - begin < std::chrono::milliseconds(250) &&
          times.size() < 100000)) {
    auto start = Clock::now();
    copy();
    times.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return times[times.size() / 2];
}

} // namespace

int main() {
  const std::vector<size_t> sizes = {4,       4 << 10,  64 << 10,
                                     1 << 20, 16 << 20, 256 << 20};
  size_t largest = sizes.back();
  void *device = nullptr;
  check(cudaMalloc(&device, largest), "cudaMalloc");
  void *pinned = nullptr;
  check(cudaMallocHost(&pinned, largest), "cudaMallocHost");
  std::memset(pinned, 1, largest);
  void *pageable = std::aligned_alloc(4096, largest);
  std::memset(pageable, 1, largest);
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);

  std::printf("{\n  \"context\": {\"device\": \"%s\", \"cuda_driver\": %d, "
              "\"cuda_runtime\": %d},\n  \"benchmarks\": [\n",
              prop.name, driver, runtime);
  bool first = true;
  for (const char *memory : {"pinned", "pageable"}) {
    void *host = std::string(memory) == "pinned" ? pinned : pageable;
    for (const char *direction : {"round_trip", "to_device", "from_device"}) {
      std::string dir = direction;
      for (size_t bytes : sizes) {
        double us = medianMicros([&] {
          if (dir != "from_device")
            check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice),
                  "cudaMemcpy to device");
          if (dir != "to_device")
            check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost),
                  "cudaMemcpy from device");
        });
        std::printf("%s    {\"name\": \"cuda/%s/%s/%zu\", \"run_name\": "
                    "\"cuda/%s/%s/%zu\", \"real_time\": %.3f, "
                    "\"time_unit\": \"us\"}",
                    first ? "" : ",\n", memory, direction, bytes, memory,
                    direction, bytes, us);
        first = false;
      }
    }
  }
  std::printf("\n  ]\n}\n");
  cudaFreeHost(pinned);
  cudaFree(device);
  std::free(pageable);
  return 0;
}
