//===- Kernels.h - OpenCL C kernels of the function model -------*- C++ -*-===//
//
// One program holds a kernel per (operation, element kind) for add, mul, relu
// and scale, and a copy kernel per element width. Every kernel takes each
// buffer followed by an element offset (cl_ulong, in elements of the
// buffer's kind), so that view inputs (a placeholder's data starting inside
// an allocation) need no sub-buffers; scale kernels take the factor last, as
// scaleFactorKind says. FP contraction is off so float results are one IEEE
// rounding per operation, as on the reference device.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_KERNELS_H
#define DRT_OPENCL_KERNELS_H

#include "drt/Function.h"
#include "drt/Type.h"

#include <cstddef>
#include <optional>

namespace drt::opencl {

/// The kernels of the program, in kernelName order: for each of add, mul,
/// relu and scale one kernel per element kind (in ElemKind order), then copy
/// by element width.
enum class KernelId : unsigned {
  AddF32,
  AddI32,
  AddI64,
  AddU8,
  AddF16,
  AddBF16,
  MulF32,
  MulI32,
  MulI64,
  MulU8,
  MulF16,
  MulBF16,
  ReluF32,
  ReluI32,
  ReluI64,
  ReluU8,
  ReluF16,
  ReluBF16,
  ScaleF32,
  ScaleI32,
  ScaleI64,
  ScaleU8,
  ScaleF16,
  ScaleBF16,
  Copy8,
  Copy16,
  Copy32,
  Copy64,
};

/// Number of kernels in the program.
constexpr size_t NumKernels = 28;

/// Work-items per work-group of every launch: the global size is the
/// element count (the kernel's last argument, a cl_ulong) rounded up to a
/// multiple of it. A device that refuses it is launched without a
/// work-group size instead.
constexpr size_t KernelWorkGroupSize = 64;

/// The OpenCL C source of the program.
extern const char *const KernelSource;

/// Options passed to clBuildProgram.
extern const char *const KernelBuildOptions;

/// The kernel's function name in KernelSource ("add_f32", "copy_16").
const char *kernelName(KernelId id);

/// The kernel computing \p op over \p kind (every op over every kind has
/// one).
KernelId kernelFor(OpKind op, ElemKind kind);

/// How a scale kernel over \p kind takes its factor: a cl_float already
/// rounded to float for the float kinds (the kernel rounds it on to f16 or
/// bf16), the kind's own integer type (cl_int, cl_long, cl_uchar) otherwise.
/// The factor itself is a Node's, checked by Function::verify.
ElemKind scaleFactorKind(ElemKind kind);

} // namespace drt::opencl

#endif // DRT_OPENCL_KERNELS_H
