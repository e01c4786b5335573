//===- VerifiedReading.h - A reading a sweep may reuse ----------*- C++ -*-===//
//
// A sweep compares every tensor's residency with the model at every step.
// Most records do not change in a step, and a record's version
// (ResidencyRecord::version) names one record in one state: a reading that
// matched the model stays a valid reading, and stays matching, while the
// backend's record keeps its version and the model's record its number,
// state and device. Internal to the conformance library (the runner and its
// tests).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_VERIFIEDREADING_H
#define DRT_CONFORMANCE_VERIFIEDREADING_H

#include "drt/Tensor.h"
#include "drt/conformance/Model.h"

#include "SameText.h"

#include <cstdint>
#include <string>

namespace drt::conformance {

/// The last reading of a backend's residency record that matched the
/// model's record, or none.
class VerifiedReading {
public:
  /// Keeps \p reading as one that matched \p model, the model's record
  /// number \p recordId.
  void remember(const ResidencySnapshot &reading, int recordId,
                const ModelRecord &model) {
    reading_ = reading;
    recordId_ = recordId;
    state_ = model.state;
    if (!sameText(device_, model.device))
      device_ = model.device;
  }
  /// True when the kept reading holds still: \p observed has the version
  /// it had then, and \p model is the record number \p recordId in the
  /// same state on the same device.
  bool holds(const ResidencyRecord &observed, int recordId,
             const ModelRecord &model) const {
    return version() && observed.version() == version() &&
           recordId == recordId_ && model.state == state_ &&
           sameText(model.device, device_);
  }
  /// True when \p reading of record \p recordId keeps the kept reading's
  /// version though \p model has left the kept state or device: the record
  /// changed without a new version, which ResidencyRecord::version
  /// promises (and which holds() relies on).
  bool versionKeptAcrossChange(const ResidencySnapshot &reading, int recordId,
                               const ModelRecord &model) const {
    return version() && reading.version == version() && recordId == recordId_ &&
           (model.state != state_ || !sameText(model.device, device_));
  }
  /// The kept reading (meaningful while holds()).
  const ResidencySnapshot &reading() const { return reading_; }
  /// Its record's version; 0, which no record has, when none is kept.
  uint64_t version() const { return reading_.version; }

private:
  ResidencySnapshot reading_;
  int recordId_ = -1;
  ResidencyState state_ = ResidencyState::Host;
  std::string device_;
};

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_VERIFIEDREADING_H
