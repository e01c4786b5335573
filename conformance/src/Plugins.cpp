//===- Plugins.cpp - Backends loaded at run time --------------------------===//
#include "drt/conformance/Plugins.h"

#include "drt/BackendRegistry.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace drt::conformance {

std::vector<std::string> pluginsFromEnvironment() {
  std::vector<std::string> out;
  const char *value = std::getenv(PluginsVariable);
  if (!value)
    return out;
  std::string text = value;
  size_t start = 0;
  while (start <= text.size()) {
    size_t colon = text.find(':', start);
    std::string one = text.substr(
        start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!one.empty())
      out.push_back(one);
    if (colon == std::string::npos)
      break;
    start = colon + 1;
  }
  return out;
}

namespace {

std::vector<std::string> registeredNames() {
  std::vector<std::string> out;
  for (const BackendInfo &b : BackendRegistry::instance().list())
    out.push_back(b.name);
  return out;
}

} // namespace

Expected<LoadedPlugin> loadBackendPlugin(const std::string &path) {
  // Loads are serialised so that the registry's growth during one load is
  // what that load registered.
  static std::mutex mutex;
  static std::map<std::string, LoadedPlugin> loaded;
  std::lock_guard<std::mutex> lock(mutex);

  std::error_code error;
  std::filesystem::path canonical = std::filesystem::canonical(path, error);
  if (error)
    return makeError(ErrorCode::InvalidArgument,
                     "plugin '" + path + "': " + error.message());
  if (auto it = loaded.find(canonical.string()); it != loaded.end())
    return it->second;

  std::vector<std::string> before = registeredNames();
  // RTLD_NOW: a symbol the library needs and nothing provides is reported
  // here, with its name, instead of killing the process at its first use.
  if (!dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const char *reason = dlerror();
    return makeError(ErrorCode::InvalidArgument,
                     "plugin '" + path + "' cannot be loaded: " +
                         (reason ? reason : "unknown reason"));
  }
  LoadedPlugin plugin;
  plugin.path = canonical.string();
  for (const std::string &name : registeredNames())
    if (std::find(before.begin(), before.end(), name) == before.end())
      plugin.backends.push_back(name);
  if (plugin.backends.empty())
    return makeError(
        ErrorCode::InvalidArgument,
        "plugin '" + path +
            "' registered no new backend: it declares none "
            "(DRT_REGISTER_BACKEND), or only names registered already, or it "
            "links its own copy of the framework instead of "
            "libdrt_framework.so");
  loaded[plugin.path] = plugin;
  return plugin;
}

Expected<std::vector<LoadedPlugin>>
loadBackendPlugins(const std::vector<std::string> &paths) {
  std::vector<LoadedPlugin> out;
  for (const std::string &path : paths) {
    auto plugin = loadBackendPlugin(path);
    if (!plugin)
      return plugin.takeError();
    bool seen = std::any_of(out.begin(), out.end(), [&](const LoadedPlugin &p) {
      return p.path == plugin->path;
    });
    if (!seen)
      out.push_back(std::move(*plugin));
  }
  return out;
}

std::string pluginOptions(const std::vector<LoadedPlugin> &plugins) {
  std::string out;
  for (const LoadedPlugin &p : plugins)
    out += " --plugin " + p.path;
  return out;
}

} // namespace drt::conformance
