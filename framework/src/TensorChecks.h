//===- TensorChecks.h - Checks inlined into operations ----------*- C++ -*-===//
//
// Tensor::requireNonEmpty, defined here so that every call of it in the
// framework is inlined: a throwing violation handler then throws from the
// frame of the operation itself (transferToDevice, a host read), one frame
// less for the unwinding to pass through.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_TENSORCHECKS_H
#define DRT_FRAMEWORK_TENSORCHECKS_H

#include "drt/Tensor.h"

#include "ViolationReport.h"

namespace drt {

[[gnu::always_inline]] inline void
Tensor::requireNonEmpty(const char *operation) const {
  if (isEmpty())
    reportViolationOf(
        ViolationKind::UseOfMovedFrom,
        {operation, " on an empty (moved-from) tensor '", name_, "'"});
}

} // namespace drt

#endif // DRT_FRAMEWORK_TENSORCHECKS_H
