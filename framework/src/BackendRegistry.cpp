//===- BackendRegistry.cpp - Backends by name
//------------------------------===//
#include "drt/BackendRegistry.h"

#include <algorithm>
#include <cstdio>

namespace drt {

BackendRegistry &BackendRegistry::instance() {
  static BackendRegistry registry;
  return registry;
}

bool BackendRegistry::add(BackendInfo info) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BackendInfo &b : backends_)
    if (b.name == info.name)
      return false;
  backends_.push_back(std::move(info));
  return true;
}

const BackendInfo *BackendRegistry::find(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BackendInfo &b : backends_)
    if (b.name == name)
      return &b;
  return nullptr;
}

std::vector<BackendInfo> BackendRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<BackendInfo> out = backends_;
  std::sort(out.begin(), out.end(),
            [](const BackendInfo &a, const BackendInfo &b) {
              return a.name < b.name;
            });
  return out;
}

std::vector<std::string> BackendRegistry::productionNames() const {
  std::vector<std::string> out;
  for (const BackendInfo &b : list())
    if (!b.testOnly)
      out.push_back(b.name);
  return out;
}

Expected<std::unique_ptr<DeviceManager>>
BackendRegistry::create(const std::string &name, const DeviceConfig &config) {
  const BackendInfo *info = find(name);
  if (!info) {
    std::string known;
    for (const BackendInfo &b : list())
      known += (known.empty() ? "" : ", ") + b.name;
    return makeError(ErrorCode::InvalidArgument,
                     "unknown backend '" + name + "'; registered backends: " +
                         (known.empty() ? "none" : known));
  }
  DeviceConfig named = config;
  if (named.name.empty())
    named.name = name + "0";
  std::unique_ptr<DeviceManager> device = info->factory(named);
  if (!device)
    return makeError(ErrorCode::DeviceError,
                     "backend '" + name + "' failed to create a device");
  if (Error e = device->init())
    return e;
  return device;
}

BackendRegistration::BackendRegistration(BackendInfo info) {
  std::string name = info.name;
  if (!BackendRegistry::instance().add(std::move(info)))
    std::fprintf(stderr,
                 "drt: backend '%s' registered twice; keeping the first\n",
                 name.c_str());
}

} // namespace drt
