//===- FaultPlan.cpp - Counting planned faults
//-----------------------------===//
#include "drt/FaultPlan.h"

namespace drt {

Error FaultPlan::add(const FaultSpec &fault) {
  if (fault.nth == 0)
    return makeError(ErrorCode::InvalidArgument,
                     "fault at " + std::string(faultSiteName(fault.site)) +
                         ": nth must be at least 1");
  if (fault.code == ErrorCode::Success)
    return makeError(ErrorCode::InvalidArgument,
                     "fault at " + std::string(faultSiteName(fault.site)) +
                         ": the code must be a failure");
  std::lock_guard<std::mutex> lock(mutex_);
  planned_.push_back({fault.site, fault.nth, fault.code});
  armed_.store(true, std::memory_order_release);
  return Error::success();
}

std::optional<ErrorCode> FaultPlan::strike(FaultSite site) {
  return strike(site, [] {});
}

std::optional<ErrorCode> FaultPlan::strike(FaultSite site,
                                           FunctionRef<void()> onDeviceLost) {
  if (!armed_.load(std::memory_order_acquire))
    return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<ErrorCode> hit;
  for (auto it = planned_.begin(); it != planned_.end();) {
    if (it->site == site && --it->remaining == 0) {
      if (!hit)
        hit = it->code;
      it = planned_.erase(it);
    } else {
      ++it;
    }
  }
  // Before armed_ can clear: a strike that takes the fast path after this
  // one finds the device refusing work.
  if (hit == ErrorCode::DeviceLost)
    onDeviceLost();
  armed_.store(!planned_.empty(), std::memory_order_release);
  return hit;
}

size_t FaultPlan::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return planned_.size();
}

} // namespace drt
