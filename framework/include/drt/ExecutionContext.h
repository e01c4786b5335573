//===- drt/ExecutionContext.h - Placeholder bindings for a run --*- C++ -*-===//
#ifndef DRT_EXECUTIONCONTEXT_H
#define DRT_EXECUTIONCONTEXT_H

#include "drt/Tensor.h"

#include <deque>
#include <map>
#include <string>

namespace drt {

/// Maps placeholder names to tensors. A binding either refers to a tensor the
/// caller owns (bind) or to one the bindings own (allocate).
class PlaceholderBindings {
public:
  /// Binds \p name to \p tensor, which must outlive the bindings' use.
  void bind(const std::string &name, Tensor &tensor) { map_[name] = &tensor; }
  /// Creates a zero-filled host tensor owned by the bindings and binds it.
  Tensor &allocate(const std::string &name, Type type);
  /// The tensor bound to \p name, or nullptr.
  Tensor *get(const std::string &name) const;
  /// Removes the binding for \p name (an owned tensor stays alive until the
  /// bindings are destroyed).
  void unbind(const std::string &name) { map_.erase(name); }
  /// All bindings, ordered by name.
  const std::map<std::string, Tensor *> &all() const { return map_; }

private:
  std::map<std::string, Tensor *> map_;
  std::deque<Tensor> owned_;
};

/// What one run needs: the bindings of its placeholders.
class ExecutionContext {
public:
  /// The bindings of this run.
  PlaceholderBindings &bindings() { return bindings_; }
  const PlaceholderBindings &bindings() const { return bindings_; }

  /// The network this context was last run with (set by runFunction), so
  /// that ensureOutputsAvailable knows which bindings are outputs.
  const std::string &lastNetwork() const { return lastNetwork_; }
  /// Records the network this context was last run with.
  void setLastNetwork(std::string name) { lastNetwork_ = std::move(name); }

private:
  PlaceholderBindings bindings_;
  std::string lastNetwork_;
};

} // namespace drt

#endif // DRT_EXECUTIONCONTEXT_H
