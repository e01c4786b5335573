//===- Kernels.cpp - OpenCL C kernels of the function model ---------------===//
#include "Kernels.h"

namespace drt::opencl {

// Integers are computed on unsigned types so that they wrap modulo 2^bits
// (signed overflow is undefined in OpenCL C), and the bits are reinterpreted
// back with as_int/as_long. f16 is read and written with vload_half and
// vstore_half_rte, which are core OpenCL C (no cl_khr_fp16): half values are
// widened to float exactly and rounded back once, to nearest even. bf16 is a
// ushort holding the upper half of a float: widening is a shift; narrowing
// rounds to nearest even on the bits and keeps a NaN a NaN. Computing f16
// and bf16 in float and rounding once gives the exactly rounded result
// (docs/semantics.md section 7). Copy moves bits, NaN payloads included.
// Every kernel takes its element count last and leaves the work-items past
// it idle: a launch is rounded up to whole work-groups of one size
// (KernelWorkGroupSize), so that a compiler that specialises a kernel per
// work-group size (POCL does, at the first launch of each) builds it once
// instead of once per tensor shape.
const char *const KernelSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF

float bf16_to_float(ushort h) { return as_float((uint)h << 16); }

ushort float_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The factor of an f16 scale: rounded from float to half (to nearest even)
   through private memory, since half values cannot be declared. */
float round_to_half(float f) {
  ushort h;
  vstore_half_rte(f, 0, (__private half *)&h);
  return vload_half(0, (__private const half *)&h);
}

/* Element access per float kind: S is the stored type, LOAD widens an
   element to float, STORE rounds a float into an element, FACTOR rounds the
   (float) scale factor to the kind. */
#define f32_S float
#define f32_LOAD(p, i) (p)[i]
#define f32_STORE(p, i, v) ((p)[i] = (v))
#define f32_FACTOR(f) (f)
#define f16_S half
#define f16_LOAD(p, i) vload_half((i), (p))
#define f16_STORE(p, i, v) vstore_half_rte((v), (i), (p))
#define f16_FACTOR(f) round_to_half(f)
#define bf16_S ushort
#define bf16_LOAD(p, i) bf16_to_float((p)[i])
#define bf16_STORE(p, i, v) ((p)[i] = float_to_bf16(v))
#define bf16_FACTOR(f) bf16_to_float(float_to_bf16(f))

#define FLOAT_KERNELS(K)                                                       \
  __kernel void add_##K(__global const K##_S *a, ulong ao,                    \
                        __global const K##_S *b, ulong bo,                    \
                        __global K##_S *out, ulong oo, ulong n) {              \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    K##_STORE(out, oo + i, K##_LOAD(a, ao + i) + K##_LOAD(b, bo + i));         \
  }                                                                            \
  __kernel void mul_##K(__global const K##_S *a, ulong ao,                    \
                        __global const K##_S *b, ulong bo,                    \
                        __global K##_S *out, ulong oo, ulong n) {              \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    K##_STORE(out, oo + i, K##_LOAD(a, ao + i) * K##_LOAD(b, bo + i));         \
  }                                                                            \
  __kernel void relu_##K(__global const K##_S *a, ulong ao,                   \
                         __global K##_S *out, ulong oo, ulong n) {             \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    float x = K##_LOAD(a, ao + i);                                             \
    K##_STORE(out, oo + i, x > 0.0f ? x : 0.0f);                               \
  }                                                                            \
  __kernel void scale_##K(__global const K##_S *a, ulong ao,                  \
                          __global K##_S *out, ulong oo, float factor,         \
                          ulong n) {                                           \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    K##_STORE(out, oo + i, K##_LOAD(a, ao + i) * K##_FACTOR(factor));          \
  }

/* Integer kinds: T is the stored (signed, for relu) type, U the unsigned
   type the arithmetic wraps in, AS reinterprets U bits as T. */
#define i32_T int
#define i32_U uint
#define i32_AS(x) as_int(x)
#define i64_T long
#define i64_U ulong
#define i64_AS(x) as_long(x)
#define u8_T uchar
#define u8_U uchar
#define u8_AS(x) ((uchar)(x))

#define INTEGER_KERNELS(K)                                                     \
  __kernel void add_##K(__global const K##_T *a, ulong ao,                    \
                        __global const K##_T *b, ulong bo,                    \
                        __global K##_T *out, ulong oo, ulong n) {              \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    out[oo + i] = K##_AS((K##_U)((K##_U)a[ao + i] + (K##_U)b[bo + i]));        \
  }                                                                            \
  __kernel void mul_##K(__global const K##_T *a, ulong ao,                    \
                        __global const K##_T *b, ulong bo,                    \
                        __global K##_T *out, ulong oo, ulong n) {              \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    out[oo + i] = K##_AS((K##_U)((K##_U)a[ao + i] * (K##_U)b[bo + i]));        \
  }                                                                            \
  __kernel void relu_##K(__global const K##_T *a, ulong ao,                   \
                         __global K##_T *out, ulong oo, ulong n) {             \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    K##_T x = a[ao + i];                                                       \
    out[oo + i] = x > (K##_T)0 ? x : (K##_T)0;                                 \
  }                                                                            \
  __kernel void scale_##K(__global const K##_T *a, ulong ao,                  \
                          __global K##_T *out, ulong oo, K##_T factor,         \
                          ulong n) {                                           \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    out[oo + i] = K##_AS((K##_U)((K##_U)a[ao + i] * (K##_U)factor));           \
  }

#define COPY_KERNEL(BITS, T)                                                   \
  __kernel void copy_##BITS(__global const T *a, ulong ao,                    \
                            __global T *out, ulong oo, ulong n) {              \
    size_t i = get_global_id(0);                                               \
    if (i >= n)                                                                \
      return;                                                                  \
    out[oo + i] = a[ao + i];                                                   \
  }

FLOAT_KERNELS(f32)
FLOAT_KERNELS(f16)
FLOAT_KERNELS(bf16)
INTEGER_KERNELS(i32)
INTEGER_KERNELS(i64)
INTEGER_KERNELS(u8)
COPY_KERNEL(8, uchar)
COPY_KERNEL(16, ushort)
COPY_KERNEL(32, uint)
COPY_KERNEL(64, ulong)
)CLC";

const char *const KernelBuildOptions = "-cl-std=CL1.2";

namespace {
/// The kinds in the order of KernelId within each operation.
constexpr ElemKind KindOrder[] = {ElemKind::Float32, ElemKind::Int32,
                                  ElemKind::Int64,   ElemKind::UInt8,
                                  ElemKind::Float16, ElemKind::BFloat16};
constexpr unsigned NumKinds = sizeof KindOrder / sizeof KindOrder[0];

unsigned kindIndex(ElemKind kind) {
  for (unsigned i = 0; i < NumKinds; ++i)
    if (KindOrder[i] == kind)
      return i;
  return 0;
}
} // namespace

const char *kernelName(KernelId id) {
  static const char *const Names[NumKernels] = {
      "add_f32",   "add_i32",  "add_i64",   "add_u8",     "add_f16",
      "add_bf16",  "mul_f32",  "mul_i32",   "mul_i64",    "mul_u8",
      "mul_f16",   "mul_bf16", "relu_f32",  "relu_i32",   "relu_i64",
      "relu_u8",   "relu_f16", "relu_bf16", "scale_f32",  "scale_i32",
      "scale_i64", "scale_u8", "scale_f16", "scale_bf16", "copy_8",
      "copy_16",   "copy_32",  "copy_64"};
  return Names[static_cast<unsigned>(id)];
}

KernelId kernelFor(OpKind op, ElemKind kind) {
  unsigned first = 0;
  switch (op) {
  case OpKind::Add:
    first = unsigned(KernelId::AddF32);
    break;
  case OpKind::Mul:
    first = unsigned(KernelId::MulF32);
    break;
  case OpKind::Relu:
    first = unsigned(KernelId::ReluF32);
    break;
  case OpKind::Scale:
    first = unsigned(KernelId::ScaleF32);
    break;
  case OpKind::Copy:
    switch (elemSize(kind)) {
    case 1:
      return KernelId::Copy8;
    case 2:
      return KernelId::Copy16;
    case 8:
      return KernelId::Copy64;
    default:
      return KernelId::Copy32;
    }
  }
  return KernelId(first + kindIndex(kind));
}

ElemKind scaleFactorKind(ElemKind kind) {
  return isFloatingPoint(kind) ? ElemKind::Float32 : kind;
}

} // namespace drt::opencl
