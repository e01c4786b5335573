//===- drt-opencl-devices.cpp - List OpenCL devices, time backend init ----===//
//
// Usage: drt-opencl-devices [--init] [key=value ...]
//   Prints every OpenCL device the loader reports. With --init it also
//   initialises the OpenCL backend (with the given device parameters, e.g.
//   device-index=1 pinned-staging=1) and prints the chosen device and how long
//   init and the kernel build took.
//
//===----------------------------------------------------------------------===//
#include "drt/opencl/OpenCLDevice.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  bool initialise = false;
  drt::DeviceConfig config;
  config.name = "opencl0";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--init") {
      initialise = true;
      continue;
    }
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr,
                   "usage: %s [--init] [key=value ...]\n"
                   "  keys: platform, device, device-index, pinned-staging\n",
                   argv[0]);
      return 2;
    }
    config.parameters[arg.substr(0, eq)] = arg.substr(eq + 1);
  }

  std::fputs(drt::opencl::formatOpenCLDeviceList().c_str(), stdout);
  if (!initialise)
    return 0;

  drt::opencl::OpenCLDeviceManager device(config);
  if (drt::Error e = device.init()) {
    std::fprintf(stderr, "init failed: %s\n", e.toString().c_str());
    return 1;
  }
  std::printf("chosen: %s\n", device.deviceInfo().toString().c_str());
  std::printf("init: %.3f ms (kernel build %.3f ms, %llu program build)\n",
              device.initSeconds() * 1e3, device.buildSeconds() * 1e3,
              static_cast<unsigned long long>(device.programBuilds()));
  return 0;
}
