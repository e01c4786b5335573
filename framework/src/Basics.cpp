//===- Basics.cpp - Names, types, errors and configs ----------------------===//
#include "drt/DeviceConfig.h"
#include "drt/DeviceLocation.h"
#include "drt/Error.h"
#include "drt/Function.h"
#include "drt/LocationTable.h"
#include "drt/Type.h"

#include <array>
#include <atomic>
#include <charconv>
#include <limits>

namespace drt {

namespace {
template <typename E, size_t N>
std::optional<E> parseByName(std::string_view name,
                             const std::array<E, N> &values,
                             std::string_view (*nameOf)(E)) {
  for (E v : values)
    if (nameOf(v) == name)
      return v;
  return std::nullopt;
}
} // namespace

std::string_view errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::Success:
    return "Success";
  case ErrorCode::OutOfMemory:
    return "OutOfMemory";
  case ErrorCode::InvalidArgument:
    return "InvalidArgument";
  case ErrorCode::NotSupported:
    return "NotSupported";
  case ErrorCode::DeviceError:
    return "DeviceError";
  case ErrorCode::DeviceLost:
    return "DeviceLost";
  }
  return "?";
}

std::optional<ErrorCode> parseErrorCode(std::string_view name) {
  static constexpr std::array<ErrorCode, 6> all = {
      ErrorCode::Success,         ErrorCode::OutOfMemory,
      ErrorCode::InvalidArgument, ErrorCode::NotSupported,
      ErrorCode::DeviceError,     ErrorCode::DeviceLost};
  return parseByName(name, all, errorCodeName);
}

std::string Error::toString() const {
  if (isSuccess())
    return "Success";
  return std::string(errorCodeName(code_)) + ": " + message_;
}

size_t elemSize(ElemKind kind) {
  switch (kind) {
  case ElemKind::Float32:
  case ElemKind::Int32:
    return 4;
  case ElemKind::Int64:
    return 8;
  case ElemKind::UInt8:
    return 1;
  case ElemKind::Float16:
  case ElemKind::BFloat16:
    return 2;
  }
  return 1;
}

bool isFloatingPoint(ElemKind kind) {
  return kind == ElemKind::Float32 || kind == ElemKind::Float16 ||
         kind == ElemKind::BFloat16;
}

std::string_view elemKindName(ElemKind kind) {
  switch (kind) {
  case ElemKind::Float32:
    return "f32";
  case ElemKind::Int32:
    return "i32";
  case ElemKind::Int64:
    return "i64";
  case ElemKind::UInt8:
    return "u8";
  case ElemKind::Float16:
    return "f16";
  case ElemKind::BFloat16:
    return "bf16";
  }
  return "?";
}

std::optional<ElemKind> parseElemKind(std::string_view name) {
  return parseByName(name, AllElemKinds, elemKindName);
}

size_t Type::numElements() const {
  size_t n = 1;
  for (size_t d : dims)
    n *= d;
  return n;
}

size_t Type::sizeInBytes() const { return numElements() * elemSize(kind); }

std::string Type::toString() const {
  std::string s(elemKindName(kind));
  s += '[';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += 'x';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

uint32_t nextLocationTableTag() {
  static std::atomic<uint32_t> tags{0};
  return tags.fetch_add(1, std::memory_order_relaxed) & 0xffu;
}

std::string DeviceLocation::toString() const {
  if (isNull())
    return "loc#null";
  // LocationTable's layout: the slot plus one in the low 24 bits, the
  // generation in the high 32.
  return "loc#" + std::to_string((value & 0xffffffu)) + "." +
         std::to_string(value >> 32);
}

std::string_view opKindName(OpKind op) {
  switch (op) {
  case OpKind::Add:
    return "add";
  case OpKind::Mul:
    return "mul";
  case OpKind::Relu:
    return "relu";
  case OpKind::Scale:
    return "scale";
  case OpKind::Copy:
    return "copy";
  }
  return "?";
}

std::optional<OpKind> parseOpKind(std::string_view name) {
  static constexpr std::array<OpKind, 5> all = {
      OpKind::Add, OpKind::Mul, OpKind::Relu, OpKind::Scale, OpKind::Copy};
  return parseByName(name, all, opKindName);
}

unsigned opArity(OpKind op) {
  return op == OpKind::Add || op == OpKind::Mul ? 2 : 1;
}

std::string_view faultSiteName(FaultSite site) {
  switch (site) {
  case FaultSite::Allocation:
    return "alloc";
  case FaultSite::TransferToDevice:
    return "to-device";
  case FaultSite::TransferFromDevice:
    return "from-device";
  case FaultSite::Run:
    return "run";
  }
  return "?";
}

std::optional<FaultSite> parseFaultSite(std::string_view name) {
  static constexpr std::array<FaultSite, 4> all = {
      FaultSite::Allocation, FaultSite::TransferToDevice,
      FaultSite::TransferFromDevice, FaultSite::Run};
  return parseByName(name, all, faultSiteName);
}

std::optional<std::string> DeviceConfig::parameter(std::string_view key) const {
  auto it = parameters.find(std::string(key));
  if (it == parameters.end())
    return std::nullopt;
  return it->second;
}

Expected<uint64_t> DeviceConfig::uintParameter(std::string_view key,
                                               uint64_t fallback) const {
  auto text = parameter(key);
  if (!text)
    return fallback;
  uint64_t value = 0;
  auto [end, ec] =
      std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty())
    return makeError(ErrorCode::InvalidArgument,
                     "device '" + name + "': parameter '" + std::string(key) +
                         "' must be an unsigned integer, got '" + *text + "'");
  return value;
}

Expected<bool> DeviceConfig::boolParameter(std::string_view key,
                                           bool fallback) const {
  auto text = parameter(key);
  if (!text)
    return fallback;
  if (*text == "1" || *text == "true" || *text == "on")
    return true;
  if (*text == "0" || *text == "false" || *text == "off")
    return false;
  return makeError(ErrorCode::InvalidArgument,
                   "device '" + name + "': parameter '" + std::string(key) +
                       "' must be 1/0, true/false or on/off, got '" + *text +
                       "'");
}

std::string Capabilities::toString() const {
  std::string s;
  auto add = [&](bool on, const char *word) {
    if (!on)
      return;
    if (!s.empty())
      s += ' ';
    s += word;
  };
  add(residentTensors, "resident-tensors");
  add(asynchronousCompletion, "async");
  add(peerToPeer, "peer-to-peer");
  add(memoryBudget, "memory-budget");
  add(faultInjection, "fault-injection");
  add(deviceLoss, "device-loss");
  add(inOrderRuns, "in-order-runs");
  return s.empty() ? "none" : s;
}

} // namespace drt
