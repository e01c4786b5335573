//===- Kernels.h - OpenCL C kernels of the function model -------*- C++ -*-===//
//
// One program holds a kernel per (operation, element kind). Every kernel takes
// each buffer followed by an element offset (cl_ulong), so that view inputs
// (a placeholder's data starting inside an allocation) need no sub-buffers;
// scale kernels take the factor last. FP contraction is off so float32 results
// are one IEEE rounding per operation, as on the reference device.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_KERNELS_H
#define DRT_OPENCL_KERNELS_H

#include "drt/Function.h"
#include "drt/Type.h"

#include <cstddef>
#include <optional>

namespace drt::opencl {

/// The kernels of the program, in kernelNames order.
enum class KernelId : unsigned {
  AddF32,
  AddI32,
  MulF32,
  MulI32,
  ReluF32,
  ReluI32,
  ScaleF32,
  ScaleI32,
  Copy32,
};

/// Number of kernels in the program.
constexpr size_t NumKernels = 9;

/// The OpenCL C source of the program.
extern const char *const KernelSource;

/// Options passed to clBuildProgram.
extern const char *const KernelBuildOptions;

/// The kernel's function name in KernelSource.
const char *kernelName(KernelId id);

/// The kernel computing \p op over \p kind, or std::nullopt when the function
/// model has none (kinds other than float32 and int32).
std::optional<KernelId> kernelFor(OpKind op, ElemKind kind);

} // namespace drt::opencl

#endif // DRT_OPENCL_KERNELS_H
