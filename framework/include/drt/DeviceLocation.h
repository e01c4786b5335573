//===- drt/DeviceLocation.h - Opaque handles to device memory ---*- C++ -*-===//
#ifndef DRT_DEVICELOCATION_H
#define DRT_DEVICELOCATION_H

#include <cstdint>
#include <string>

namespace drt {

/// An opaque handle to one allocation in a device's memory, owned by the
/// backend that issued it. Backends issue generation-checked handles (see
/// LocationTable), so a released or forged handle is detected and rejected
/// instead of reaching the driver. The value 0 is never issued.
struct DeviceLocation {
  uint64_t value = 0;

  /// True for any handle other than the null handle.
  bool isNull() const { return value == 0; }
  /// "loc#slot.generation", for messages.
  std::string toString() const;

  friend bool operator==(const DeviceLocation &,
                         const DeviceLocation &) = default;
};

} // namespace drt

#endif // DRT_DEVICELOCATION_H
