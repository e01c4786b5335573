//===- drt/DeviceConfig.h - Device configuration and capabilities -*- C++
//-*-===//
#ifndef DRT_DEVICECONFIG_H
#define DRT_DEVICECONFIG_H

#include "drt/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace drt {

/// How a DeviceManager is configured.
struct DeviceConfig {
  /// The device's name in messages ("fake0", "opencl1", ...).
  std::string name;
  /// Device memory budget in bytes; 0 means the backend's default (its whole
  /// memory). The backend enforces it with its own accounting.
  uint64_t memoryBudget = 0;
  /// When set, runFunction brings every output back to host itself.
  bool copyDeviceTensorsToHost = false;
  /// Which of the devices of one backend that a caller creates together
  /// this one is (0 for the first). A backend that finds several physical
  /// devices and is not told which to use places device n on the n-th of
  /// them (modulo their count), so that two devices of a scenario are two
  /// physical devices where there are two.
  uint32_t ordinal = 0;
  /// Backend parameters ("async" = "1", "seed" = "42", ...): the ones the
  /// backend declares (BackendInfo::parameters); its init() refuses any
  /// other. BackendRegistry::create passes on a key written "BACKEND:KEY"
  /// as KEY to backend BACKEND only.
  std::map<std::string, std::string> parameters;

  /// The parameter \p key, or std::nullopt.
  std::optional<std::string> parameter(std::string_view key) const;
  /// The parameter \p key as an unsigned integer, \p fallback when absent, or
  /// InvalidArgument naming the parameter and its text when malformed.
  Expected<uint64_t> uintParameter(std::string_view key,
                                   uint64_t fallback) const;
  /// The parameter \p key as a boolean ("1"/"0", "true"/"false", "on"/"off"),
  /// \p fallback when absent, or InvalidArgument when malformed.
  Expected<bool> boolParameter(std::string_view key, bool fallback) const;
};

/// What a backend declares it can do. The conformance suite gates its
/// generators by these and treats a declared capability that misbehaves as a
/// failure.
struct Capabilities {
  /// Tensors can stay resident in device memory between calls.
  bool residentTensors = true;
  /// Completions may arrive on another thread after the call returns.
  bool asynchronousCompletion = false;
  /// Reserved for direct device-to-device copies between two managers of
  /// this backend, which no hook offers yet: the framework moves every
  /// record between devices through the host, whatever this says. Kept so
  /// that backends built against this layout keep working; leave it false.
  bool peerToPeer = false;
  /// The backend enforces DeviceConfig::memoryBudget (OutOfMemory past it).
  bool memoryBudget = true;
  /// injectFault() is implemented.
  bool faultInjection = false;
  /// shutdown() makes resident tensors Lost and completes in-flight work with
  /// DeviceLost.
  bool deviceLoss = true;
  /// execute() performs runs in the order they are issued, each seeing what
  /// the runs issued before it wrote, also while those are still in flight
  /// (one in-order queue, say). The framework then issues a run whose
  /// records are busy only with earlier runs on the same device, and
  /// resident there, without waiting for them (docs/semantics.md, section 7).
  bool inOrderRuns = false;

  /// "resident-tensors async fault-injection ...", for listings.
  std::string toString() const;

  friend bool operator==(const Capabilities &, const Capabilities &) = default;
};

/// Where an injected fault strikes.
enum class FaultSite { Allocation, TransferToDevice, TransferFromDevice, Run };

/// The site's name as used in scenario files ("alloc", "to-device", ...).
std::string_view faultSiteName(FaultSite site);
/// Parses a name produced by faultSiteName.
std::optional<FaultSite> parseFaultSite(std::string_view name);

/// A planned fault: the \p nth next operation at \p site (1 = the next one)
/// fails with \p code. DeviceLost additionally shuts the device down.
struct FaultSpec {
  FaultSite site = FaultSite::Allocation;
  unsigned nth = 1;
  ErrorCode code = ErrorCode::DeviceError;
};

/// Counters a backend keeps for observation.
struct DeviceStats {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t transfersToDevice = 0;
  uint64_t transfersFromDevice = 0;
  uint64_t bytesToDevice = 0;
  uint64_t bytesFromDevice = 0;
  /// Device-to-device copies (the goal for runs is zero per output).
  uint64_t deviceCopies = 0;
  uint64_t runs = 0;
};

} // namespace drt

#endif // DRT_DEVICECONFIG_H
