//===- Kernels.cpp - OpenCL C kernels of the function model ---------------===//
#include "Kernels.h"

namespace drt::opencl {

// int32 arithmetic goes through uint so that it wraps modulo 2^32 (signed
// overflow is undefined in OpenCL C); copy moves bits, NaN payloads included.
const char *const KernelSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF

__kernel void add_f32(__global const float *a, ulong ao,
                      __global const float *b, ulong bo,
                      __global float *out, ulong oo) {
  size_t i = get_global_id(0);
  out[oo + i] = a[ao + i] + b[bo + i];
}

__kernel void add_i32(__global const int *a, ulong ao,
                      __global const int *b, ulong bo,
                      __global int *out, ulong oo) {
  size_t i = get_global_id(0);
  out[oo + i] = as_int(as_uint(a[ao + i]) + as_uint(b[bo + i]));
}

__kernel void mul_f32(__global const float *a, ulong ao,
                      __global const float *b, ulong bo,
                      __global float *out, ulong oo) {
  size_t i = get_global_id(0);
  out[oo + i] = a[ao + i] * b[bo + i];
}

__kernel void mul_i32(__global const int *a, ulong ao,
                      __global const int *b, ulong bo,
                      __global int *out, ulong oo) {
  size_t i = get_global_id(0);
  out[oo + i] = as_int(as_uint(a[ao + i]) * as_uint(b[bo + i]));
}

__kernel void relu_f32(__global const float *a, ulong ao,
                       __global float *out, ulong oo) {
  size_t i = get_global_id(0);
  float x = a[ao + i];
  out[oo + i] = x > 0.0f ? x : 0.0f;
}

__kernel void relu_i32(__global const int *a, ulong ao,
                       __global int *out, ulong oo) {
  size_t i = get_global_id(0);
  int x = a[ao + i];
  out[oo + i] = x > 0 ? x : 0;
}

__kernel void scale_f32(__global const float *a, ulong ao,
                        __global float *out, ulong oo, float factor) {
  size_t i = get_global_id(0);
  out[oo + i] = a[ao + i] * factor;
}

__kernel void scale_i32(__global const int *a, ulong ao,
                        __global int *out, ulong oo, int factor) {
  size_t i = get_global_id(0);
  out[oo + i] = as_int(as_uint(a[ao + i]) * as_uint(factor));
}

__kernel void copy_32(__global const uint *a, ulong ao,
                      __global uint *out, ulong oo) {
  size_t i = get_global_id(0);
  out[oo + i] = a[ao + i];
}
)CLC";

const char *const KernelBuildOptions = "-cl-std=CL1.2";

const char *kernelName(KernelId id) {
  static const char *const Names[NumKernels] = {
      "add_f32",  "add_i32",   "mul_f32",   "mul_i32", "relu_f32",
      "relu_i32", "scale_f32", "scale_i32", "copy_32"};
  return Names[static_cast<unsigned>(id)];
}

std::optional<KernelId> kernelFor(OpKind op, ElemKind kind) {
  bool f32 = kind == ElemKind::Float32;
  if (!f32 && kind != ElemKind::Int32)
    return std::nullopt;
  switch (op) {
  case OpKind::Add:
    return f32 ? KernelId::AddF32 : KernelId::AddI32;
  case OpKind::Mul:
    return f32 ? KernelId::MulF32 : KernelId::MulI32;
  case OpKind::Relu:
    return f32 ? KernelId::ReluF32 : KernelId::ReluI32;
  case OpKind::Scale:
    return f32 ? KernelId::ScaleF32 : KernelId::ScaleI32;
  case OpKind::Copy:
    return KernelId::Copy32;
  }
  return std::nullopt;
}

} // namespace drt::opencl
