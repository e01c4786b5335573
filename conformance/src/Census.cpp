//===- Census.cpp - What a run reached ------------------------------------===//
#include "drt/conformance/Census.h"
#include "drt/conformance/Report.h"

#include <algorithm>

namespace drt::conformance {

namespace {

std::string bytesText(uint64_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0)
    return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0)
    return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " B";
}

/// The class of a view offset in bytes: zero, aligned to the largest of a
/// few alignments, or unaligned.
std::string offsetClass(uint64_t bytes) {
  if (bytes == 0)
    return "0";
  for (uint64_t a : {65536u, 4096u, 64u, 16u, 4u})
    if (bytes % a == 0)
      return "multiple of " + std::to_string(a) + " B";
  return "not a multiple of 4 B";
}

} // namespace

void Census::addScenario(const Scenario &scenario, const InputSpace &space) {
  std::map<std::string, ElemKind> kinds;
  const Command *previous = nullptr;
  for (const Command &c : scenario.commands) {
    if (previous)
      ++counts["command pair"][std::string(commandKindName(previous->kind)) +
                               " > " + std::string(commandKindName(c.kind))];
    previous = &c;
    switch (c.kind) {
    case CommandKind::Create: {
      Type type{c.elemKind, c.dims};
      uint64_t bytes = type.sizeInBytes();
      size_t size = elemSize(c.elemKind);
      kinds[c.target] = c.elemKind;
      ++counts["size class"]
              [space.sizeClasses[sizeClassOf(space, bytes, size)].name];
      if (std::string at = boundaryRelation(space, bytes, size); !at.empty())
        ++counts["size at a boundary"][at];
      for (uint64_t a : {4u, 16u, 64u})
        if (bytes % a != 0)
          ++counts["size not a multiple of"][std::to_string(a) + " B"];
      ++counts["element kind"][std::string(elemKindName(c.elemKind))];
      ++counts["value class"][valueClassName(c.pattern)];
      ++counts["rank"][std::to_string(c.dims.size())];
      // What the scenario asks for; what the device gave is counted from
      // the run (addRun).
      ++counts["host storage asked"][c.device.empty() ? "pageable" : "pinned"];
      largestTensorBytes = std::max(largestTensorBytes, bytes);
      break;
    }
    case CommandKind::Write:
    case CommandKind::Refill:
      ++counts["value class"][valueClassName(c.pattern)];
      break;
    case CommandKind::View: {
      auto it = kinds.find(c.source);
      if (it != kinds.end()) {
        kinds[c.target] = it->second;
        ++counts["view offset"][offsetClass(c.offset * elemSize(it->second))];
      }
      break;
    }
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      if (auto it = kinds.find(c.source); it != kinds.end())
        kinds[c.target] = it->second;
      break;
    case CommandKind::AddNetwork: {
      ++counts["network nodes"][std::to_string(c.nodes.size())];
      ++counts["network kind"][std::string(elemKindName(c.elemKind))];
      Type type{c.elemKind, c.dims};
      ++counts["network size class"]
              [space
                   .sizeClasses[sizeClassOf(space, type.sizeInBytes(),
                                            elemSize(c.elemKind))]
                   .name];
      for (const NetworkNode &n : c.nodes)
        ++counts["network op"][std::string(opKindName(n.op))];
      break;
    }
    case CommandKind::InjectFault:
      ++counts["fault planned"][std::string(faultSiteName(c.fault.site)) + " " +
                                std::string(errorCodeName(c.fault.code))];
      break;
    case CommandKind::Alloc:
      ++counts["raw allocation"]
              [space.sizeClasses[sizeClassOf(space, c.bytes, 1)].name];
      break;
    default:
      break;
    }
  }
  for (const DeviceSpec &d : scenario.devices) {
    ++counts["device budget"][d.budget ? "set" : "none"];
    for (const auto &[key, value] : d.parameters)
      ++counts["device parameter"][key + "=" + value];
  }
}

void Census::addRun(const RunResult &run) {
  for (const auto &[label, n] : run.labels) {
    // "to-device@Mirrored": which command met which residency state.
    if (label.find('@') != std::string::npos)
      counts["command at a state"][label] += uint64_t(n);
    else if (label.rfind("fault-struck-", 0) == 0)
      counts["fault struck"][label.substr(13)] += uint64_t(n);
    else if (label.rfind("run-of-elements-", 0) == 0)
      counts["run elements"][label.substr(16)] += uint64_t(n);
    // Cases in which the backend took one of its internal paths, and in
    // which two uses of one met.
    else if (label.rfind("path:", 0) == 0)
      counts["backend path taken"][label.substr(5)] += uint64_t(n);
    else if (label.rfind("path-overlapped:", 0) == 0)
      counts["backend path overlapped"][label.substr(16)] += uint64_t(n);
    else if (label == "create-pinned")
      counts["pinned storage asked for"]["granted"] += uint64_t(n);
    else if (label == "create-pinned-fell-back-to-pageable")
      counts["pinned storage asked for"]["pageable: the device has none"] +=
          uint64_t(n);
  }
  for (const auto &[device, n] : run.allocations)
    mostAllocationsOnOneDevice =
        std::max<uint64_t>(mostAllocationsOnOneDevice, n);
  for (const auto &[device, n] : run.slotReuses)
    mostSlotReusesOnOneDevice =
        std::max<uint64_t>(mostSlotReusesOnOneDevice, n);
}

void Census::merge(const Census &other) {
  for (const auto &[dimension, classes] : other.counts)
    for (const auto &[name, n] : classes)
      counts[dimension][name] += n;
  mostAllocationsOnOneDevice =
      std::max(mostAllocationsOnOneDevice, other.mostAllocationsOnOneDevice);
  mostSlotReusesOnOneDevice =
      std::max(mostSlotReusesOnOneDevice, other.mostSlotReusesOnOneDevice);
  largestTensorBytes = std::max(largestTensorBytes, other.largestTensorBytes);
}

std::vector<std::string>
Census::missingKeyClasses(const InputSpace &space) const {
  std::vector<std::string> missing;
  auto need = [&](const std::string &dimension, const std::string &name) {
    auto it = counts.find(dimension);
    if (it == counts.end() || !it->second.count(name))
      missing.push_back(dimension + ": " + name);
  };
  for (const SizeClass &c : space.sizeClasses)
    need("size class", c.name);
  for (ElemKind k : space.elemKinds)
    need("element kind", std::string(elemKindName(k)));
  for (const ValueChoice &v : space.values)
    need("value class", v.name);
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return missing;
}

std::string Census::toString() const {
  std::string s;
  for (const auto &[dimension, classes] : counts) {
    // Some dimensions have many classes: show the rarest eight and the four
    // most common.
    std::vector<std::pair<uint64_t, std::string>> sorted;
    for (const auto &[name, n] : classes)
      sorted.emplace_back(n, name);
    std::sort(sorted.begin(), sorted.end());
    s += dimension + " (" + std::to_string(classes.size()) + " classes):";
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted.size() > 16 && i == 8) {
        s += " ...";
        i = sorted.size() - 4;
      }
      s += " " + sorted[i].second + " " + std::to_string(sorted[i].first) + ";";
    }
    s += "\n";
  }
  s += "largest tensor: " + bytesText(largestTensorBytes) +
       "; most allocations on one device in one scenario: " +
       std::to_string(mostAllocationsOnOneDevice) +
       "; most slot reuses on one device: " +
       std::to_string(mostSlotReusesOnOneDevice) + "\n";
  return s;
}

std::string Census::toJson() const {
  std::string s = "{";
  bool firstDimension = true;
  for (const auto &[dimension, classes] : counts) {
    s += (firstDimension ? "" : ", ") + jsonString(dimension) + ": {";
    firstDimension = false;
    bool first = true;
    for (const auto &[name, n] : classes) {
      s += (first ? "" : ", ") + jsonString(name) + ": " + std::to_string(n);
      first = false;
    }
    s += "}";
  }
  s += std::string(firstDimension ? "" : ", ") +
       "\"largestTensorBytes\": " + std::to_string(largestTensorBytes) +
       ", \"mostAllocationsOnOneDevice\": " +
       std::to_string(mostAllocationsOnOneDevice) +
       ", \"mostSlotReusesOnOneDevice\": " +
       std::to_string(mostSlotReusesOnOneDevice) + "}";
  return s;
}

} // namespace drt::conformance
