//===- drt/conformance/Plugins.h - Backends loaded at run time --*- C++ -*-===//
//
// A backend plugin is a shared library whose static initialisers register
// backends (DRT_REGISTER_BACKEND) in the registry of the libdrt_framework the
// program runs with. drt-conformance, drt-replay and the Behaviour tests load
// the plugins named by --plugin and by the DRT_PLUGINS environment variable,
// so a backend built anywhere is validated without rebuilding the suite.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_PLUGINS_H
#define DRT_CONFORMANCE_PLUGINS_H

#include "drt/Error.h"

#include <string>
#include <vector>

namespace drt::conformance {

/// The environment variable naming plugins to load: paths separated by ':'.
inline constexpr const char *PluginsVariable = "DRT_PLUGINS";

/// The non-empty ':'-separated paths of DRT_PLUGINS, in order; empty when the
/// variable is unset.
std::vector<std::string> pluginsFromEnvironment();

/// A loaded plugin: its canonical path and the backends it registered.
struct LoadedPlugin {
  std::string path;
  std::vector<std::string> backends;
};

/// Loads the shared library at \p path (resolving every symbol now) and
/// returns the backends its initialisers registered. A file that does not
/// exist or cannot be loaded is InvalidArgument naming the file and the
/// loader's reason (dlerror); a library that registers no backend (none
/// declared, or only names registered already) is InvalidArgument naming the
/// file. Loading a file loaded before (by the same canonical path) returns
/// what the first load registered.
Expected<LoadedPlugin> loadBackendPlugin(const std::string &path);

/// Loads \p paths in order, stopping at the first failure (returned as is).
/// The same file named twice is loaded once.
Expected<std::vector<LoadedPlugin>>
loadBackendPlugins(const std::vector<std::string> &paths);

/// " --plugin PATH" for each of \p plugins, or "": the options that make a
/// replay command load them again.
std::string pluginOptions(const std::vector<LoadedPlugin> &plugins);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_PLUGINS_H
