//===- drt/FaultPlan.h - Counting planned faults ----------------*- C++ -*-===//
#ifndef DRT_FAULTPLAN_H
#define DRT_FAULTPLAN_H

#include "drt/DeviceConfig.h"
#include "drt/FunctionRef.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

namespace drt {

/// The faults planned on one device, for backends that declare
/// faultInjection. Thread-safe.
class FaultPlan {
public:
  /// Plans \p fault; InvalidArgument when fault.nth is 0 or the code is
  /// Success.
  Error add(const FaultSpec &fault);
  /// Counts one operation at \p site and returns the code it must fail with,
  /// or std::nullopt when no fault strikes it. Each planned fault strikes once.
  std::optional<ErrorCode> strike(FaultSite site);
  /// strike(), calling \p onDeviceLost before it returns DeviceLost, while
  /// no other strike can pass: a backend refuses work there
  /// (DeviceManager::refuseWork), so that no operation of another thread
  /// that counts after this one succeeds before the device is shut down.
  std::optional<ErrorCode> strike(FaultSite site,
                                  FunctionRef<void()> onDeviceLost);
  /// Number of faults planned and not yet struck.
  size_t pending() const;

private:
  struct Planned {
    FaultSite site;
    unsigned remaining;
    ErrorCode code;
  };
  mutable std::mutex mutex_;
  std::vector<Planned> planned_;
  /// True while a fault is planned: strike's fast path, with none planned,
  /// takes no lock.
  std::atomic<bool> armed_{false};
};

} // namespace drt

#endif // DRT_FAULTPLAN_H
