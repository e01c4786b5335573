//===- Function.cpp - The function model and its bindings -----------------===//
#include "drt/Function.h"
#include "drt/ExecutionContext.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

namespace drt {

Function &Function::addPlaceholder(std::string name, Type type) {
  placeholders_.push_back({std::move(name), std::move(type)});
  return *this;
}

Function &Function::addNode(Node node) {
  nodes_.push_back(std::move(node));
  return *this;
}

const Placeholder *Function::findPlaceholder(std::string_view name) const {
  int i = placeholderIndex(name);
  return i < 0 ? nullptr : &placeholders_[i];
}

int Function::placeholderIndex(std::string_view name) const {
  for (size_t i = 0; i < placeholders_.size(); ++i)
    if (placeholders_[i].name == name)
      return static_cast<int>(i);
  return -1;
}

bool Function::isOutput(std::string_view name) const {
  for (const Node &n : nodes_)
    if (n.output == name)
      return true;
  return false;
}

std::vector<std::string> Function::outputNames() const {
  std::vector<std::string> out;
  for (const Placeholder &p : placeholders_)
    if (isOutput(p.name))
      out.push_back(p.name);
  return out;
}

std::vector<std::string> Function::inputNames() const {
  std::vector<std::string> out;
  for (const Placeholder &p : placeholders_)
    if (!isOutput(p.name))
      out.push_back(p.name);
  return out;
}

namespace {
/// The factors an integer kind's scale accepts, as doubles: every integer in
/// [first, second] is one the kind holds (2^63 is not, so i64 stops at the
/// largest double below it). Float kinds have no such range.
std::optional<std::pair<double, double>> integerRange(ElemKind kind) {
  switch (kind) {
  case ElemKind::Int32:
    return std::pair(-2147483648.0, 2147483647.0);
  case ElemKind::Int64:
    return std::pair(-9223372036854775808.0, 9223372036854774784.0);
  case ElemKind::UInt8:
    return std::pair(0.0, 255.0);
  case ElemKind::Float32:
  case ElemKind::Float16:
  case ElemKind::BFloat16:
    break;
  }
  return std::nullopt;
}

/// The shortest text that reads back as \p factor ("0.5", "3e+20").
std::string printedFactor(double factor) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, factor);
  return std::string(buf, end);
}
} // namespace

Error Function::verify() const {
  auto fail = [&](const std::string &what) {
    return makeError(ErrorCode::InvalidArgument,
                     "function '" + name_ + "': " + what);
  };
  if (name_.empty())
    return fail("has no name");
  for (size_t i = 0; i < placeholders_.size(); ++i) {
    const Placeholder &p = placeholders_[i];
    if (p.name.empty())
      return fail("a placeholder has no name");
    // Found first at another position: declared before.
    if (placeholderIndex(p.name) != static_cast<int>(i))
      return fail("placeholder '" + p.name + "' is declared twice");
    if (p.type.dims.empty() || p.type.numElements() == 0)
      return fail("placeholder '" + p.name + "' has no elements");
  }
  if (nodes_.empty())
    return fail("has no nodes");
  // Which placeholders a node before the current one wrote, by position.
  std::vector<bool> written(placeholders_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &n = nodes_[i];
    // Named only in a problem: a function is verified on every addNetwork.
    auto where = [&] {
      return "node " + std::to_string(i) + " (" +
             std::string(opKindName(n.op)) + ")";
    };
    int outIndex = placeholderIndex(n.output);
    if (outIndex < 0)
      return fail(where() + " writes unknown placeholder '" + n.output + "'");
    const Placeholder *out = &placeholders_[outIndex];
    if (n.inputs.size() != opArity(n.op))
      return fail(where() + " has " + std::to_string(n.inputs.size()) +
                  " inputs, expected " + std::to_string(opArity(n.op)));
    for (const std::string &in : n.inputs) {
      int inIndex = placeholderIndex(in);
      if (inIndex < 0)
        return fail(where() + " reads unknown placeholder '" + in + "'");
      const Placeholder *p = &placeholders_[inIndex];
      if (p->type != out->type)
        return fail(where() + " reads '" + in + "' of type " +
                    p->type.toString() + " but writes '" + n.output +
                    "' of type " + out->type.toString());
      if (isOutput(in) && !written[inIndex])
        return fail(where() + " reads output '" + in +
                    "' before a node writes it");
      if (in == n.output)
        return fail(where() + " reads and writes '" + in + "'");
    }
    if (written[outIndex])
      return fail("placeholder '" + n.output + "' is written by two nodes");
    written[outIndex] = true;
    if (n.op != OpKind::Scale)
      continue;
    if (!std::isfinite(n.factor))
      return fail(where() + " has a non-finite factor");
    if (auto range = integerRange(out->type.kind);
        range && (n.factor != std::floor(n.factor) || n.factor < range->first ||
                  n.factor > range->second))
      return fail(where() + " scales " +
                  std::string(elemKindName(out->type.kind)) + " by factor " +
                  printedFactor(n.factor) +
                  ", which is not an integer the kind holds");
  }
  return Error::success();
}

Tensor &PlaceholderBindings::allocate(const std::string &name, Type type) {
  owned_.emplace_back(std::move(type), name);
  map_[name] = &owned_.back();
  return owned_.back();
}

Tensor *PlaceholderBindings::get(const std::string &name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : it->second;
}

} // namespace drt
