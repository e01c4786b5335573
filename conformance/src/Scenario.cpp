//===- Scenario.cpp - Residency scenarios ---------------------------------===//
#include "drt/conformance/Scenario.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace drt::conformance {

std::string_view commandKindName(CommandKind kind) {
  switch (kind) {
  case CommandKind::Create:
    return "create";
  case CommandKind::View:
    return "view";
  case CommandKind::Clone:
    return "clone";
  case CommandKind::MoveConstruct:
    return "move-construct";
  case CommandKind::MoveAssign:
    return "move-assign";
  case CommandKind::SelfMove:
    return "self-move";
  case CommandKind::Destroy:
    return "destroy";
  case CommandKind::ToDevice:
    return "to-device";
  case CommandKind::FromDevice:
    return "from-device";
  case CommandKind::Release:
    return "release";
  case CommandKind::DoubleRelease:
    return "double-release";
  case CommandKind::Read:
    return "read";
  case CommandKind::Write:
    return "write";
  case CommandKind::Refill:
    return "refill";
  case CommandKind::AddNetwork:
    return "add-network";
  case CommandKind::Run:
    return "run";
  case CommandKind::EvictNetwork:
    return "evict-network";
  case CommandKind::EnsureOutputs:
    return "ensure-outputs";
  case CommandKind::Shutdown:
    return "shutdown";
  case CommandKind::InjectFault:
    return "inject-fault";
  case CommandKind::Alloc:
    return "alloc";
  case CommandKind::Free:
    return "free";
  }
  return "?";
}

std::string Outcome::toString() const {
  switch (kind) {
  case Kind::Ok:
    return "ok";
  case Kind::Error:
    return "error " + std::string(errorCodeName(code));
  case Kind::Violation:
    return "violation " + std::string(violationKindName(violation));
  }
  return "?";
}

bool operator==(const Command &a, const Command &b) {
  return a.kind == b.kind && a.target == b.target && a.source == b.source &&
         a.device == b.device && a.elemKind == b.elemKind && a.dims == b.dims &&
         a.offset == b.offset && a.pattern == b.pattern &&
         a.release == b.release && a.location == b.location &&
         a.bytes == b.bytes && a.fault.site == b.fault.site &&
         a.fault.nth == b.fault.nth && a.fault.code == b.fault.code &&
         a.nodes == b.nodes && a.bindings == b.bindings && a.expect == b.expect;
}

std::vector<Placeholder>
networkPlaceholders(const std::vector<NetworkNode> &nodes, const Type &type) {
  std::vector<Placeholder> out;
  auto note = [&](const std::string &name) {
    for (const Placeholder &p : out)
      if (p.name == name)
        return;
    out.push_back({name, type});
  };
  for (const NetworkNode &n : nodes) {
    for (const std::string &in : n.inputs)
      note(in);
    note(n.output);
  }
  return out;
}

Function networkFunction(const Command &addNetwork) {
  Function f(addNetwork.target);
  Type type{addNetwork.elemKind, addNetwork.dims};
  for (const Placeholder &p : networkPlaceholders(addNetwork.nodes, type))
    f.addPlaceholder(p.name, p.type);
  for (const NetworkNode &n : addNetwork.nodes)
    f.addNode(Node{n.op, n.inputs, n.output, n.factor});
  return f;
}

std::vector<uint8_t> patternBytes(ElemKind kind, uint64_t pattern,
                                  size_t firstElement, size_t elements) {
  size_t size = elemSize(kind);
  std::vector<uint8_t> out(elements * size, 0);
  if (pattern == 0)
    return out;
  for (size_t k = 0; k < elements; ++k) {
    uint64_t i = firstElement + k;
    uint8_t *dst = out.data() + k * size;
    switch (kind) {
    case ElemKind::Float32: {
      float v = float(int((i * (2 * pattern + 1) + pattern) % 17) - 8) * 0.25f;
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case ElemKind::Int32: {
      uint32_t v = uint32_t(i * 2654435761u + pattern * 40503u);
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case ElemKind::Int64: {
      uint64_t v = i * 0x9E3779B97F4A7C15ull + pattern;
      std::memcpy(dst, &v, sizeof v);
      break;
    }
    case ElemKind::UInt8:
      *dst = uint8_t(i * 31 + pattern * 7);
      break;
    }
  }
  return out;
}

namespace {

/// Why the runner cannot hold the tensor \p create makes, or "" when it can
/// (or when the type is one the contract refuses anyway).
std::string sizeProblem(const Command &create, const std::string &step) {
  Type type{create.elemKind, create.dims};
  size_t bytes = elemSize(create.elemKind);
  for (size_t d : create.dims)
    if (d == 0 || __builtin_mul_overflow(bytes, d, &bytes))
      return "";
  if (bytes > MaxTensorBytes || bytes <= MaxScenarioTensorBytes)
    return "";
  return step + "tensor '" + create.target + "' of type " + type.toString() +
         " holds " + std::to_string(bytes) + " bytes, more than the " +
         std::to_string(MaxScenarioTensorBytes) +
         " bytes a scenario may create (the runner and the model hold every "
         "tensor in host memory); types over " +
         std::to_string(MaxTensorBytes) +
         " bytes, which the contract refuses, may be written";
}

} // namespace

std::string validateScenario(const Scenario &scenario) {
  std::set<std::string> devices, tensors, networks;
  std::map<std::string, std::string> locations;
  for (const DeviceSpec &d : scenario.devices)
    if (!devices.insert(d.name).second)
      return "device '" + d.name + "' is declared twice";
  for (size_t i = 0; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    std::string step = "step " + std::to_string(i + 1) + " (" +
                       std::string(commandKindName(c.kind)) + "): ";
    auto needTensor = [&](const std::string &name) -> std::string {
      return tensors.count(name) ? "" : step + "unknown tensor '" + name + "'";
    };
    auto needDevice = [&]() -> std::string {
      return devices.count(c.device)
                 ? ""
                 : step + "unknown device '" + c.device + "'";
    };
    auto newTensor = [&](const std::string &name) -> std::string {
      if (!tensors.insert(name).second)
        return step + "tensor '" + name + "' already exists";
      return "";
    };
    std::string problem;
    switch (c.kind) {
    case CommandKind::Create:
      problem = newTensor(c.target);
      if (problem.empty())
        problem = sizeProblem(c, step);
      break;
    case CommandKind::View:
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      problem = needTensor(c.source);
      if (problem.empty())
        problem = newTensor(c.target);
      break;
    case CommandKind::MoveAssign:
      problem = needTensor(c.source);
      if (problem.empty())
        problem = needTensor(c.target);
      break;
    case CommandKind::SelfMove:
    case CommandKind::Read:
    case CommandKind::Write:
    case CommandKind::Refill:
      problem = needTensor(c.target);
      break;
    case CommandKind::Destroy:
      problem = needTensor(c.target);
      tensors.erase(c.target);
      break;
    case CommandKind::ToDevice:
      problem = needTensor(c.target);
      if (problem.empty())
        problem = needDevice();
      if (problem.empty() && !c.location.empty()) {
        auto it = locations.find(c.location);
        if (it == locations.end())
          problem = step + "unknown location '" + c.location + "'";
        else if (it->second != c.device)
          problem = step + "location '" + c.location + "' belongs to device '" +
                    it->second + "'";
      }
      break;
    case CommandKind::FromDevice:
    case CommandKind::Release:
    case CommandKind::DoubleRelease:
      problem = needTensor(c.target);
      if (problem.empty())
        problem = needDevice();
      break;
    case CommandKind::AddNetwork:
      problem = needDevice();
      if (problem.empty() && c.nodes.empty())
        problem = step + "network '" + c.target + "' has no nodes";
      networks.insert(c.target);
      break;
    case CommandKind::Run:
      if (!networks.count(c.target))
        problem = step + "unknown network '" + c.target + "'";
      for (const auto &[placeholder, tensor] : c.bindings)
        if (problem.empty())
          problem = needTensor(tensor);
      break;
    case CommandKind::EvictNetwork:
    case CommandKind::EnsureOutputs:
      if (!networks.count(c.target))
        problem = step + "unknown network '" + c.target + "'";
      break;
    case CommandKind::Shutdown:
    case CommandKind::InjectFault:
      problem = needDevice();
      break;
    case CommandKind::Alloc:
      problem = needDevice();
      if (problem.empty() && locations.count(c.target))
        problem = step + "location '" + c.target + "' already exists";
      locations[c.target] = c.device;
      break;
    case CommandKind::Free: {
      problem = needDevice();
      auto it = locations.find(c.target);
      if (problem.empty() && it == locations.end())
        problem = step + "unknown location '" + c.target + "'";
      else if (problem.empty() && it->second != c.device)
        problem = step + "location '" + c.target + "' belongs to device '" +
                  it->second + "'";
      break;
    }
    }
    if (!problem.empty())
      return problem;
  }
  return "";
}

} // namespace drt::conformance
