//===- drt/Type.h - Element kinds and tensor types --------------*- C++ -*-===//
#ifndef DRT_TYPE_H
#define DRT_TYPE_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace drt {

/// The largest tensor type drt accepts, in bytes (docs/semantics.md §1):
/// Tensor::create refuses a larger type and the constructor reports it as an
/// invalid-tensor-type violation. Far below any size computation's overflow,
/// far above any device drt targets.
inline constexpr size_t MaxTensorBytes = size_t(1) << 46;

/// The element kinds a tensor can hold: IEEE binary32 (Float32), two's
/// complement integers (Int32, Int64), an unsigned byte (UInt8), IEEE binary16
/// (Float16) and bfloat16 (BFloat16: the upper half of a binary32, 8 exponent
/// and 7 mantissa bits). docs/semantics.md section 7 defines the arithmetic
/// over each.
enum class ElemKind { Float32, Int32, Int64, UInt8, Float16, BFloat16 };

/// Every element kind, in declaration order.
inline constexpr std::array<ElemKind, 6> AllElemKinds = {
    ElemKind::Float32, ElemKind::Int32,   ElemKind::Int64,
    ElemKind::UInt8,   ElemKind::Float16, ElemKind::BFloat16};

/// Bytes per element of \p kind.
size_t elemSize(ElemKind kind);
/// True for the floating-point kinds (f32, f16, bf16), whose NaN results
/// have unspecified payloads.
bool isFloatingPoint(ElemKind kind);
/// The kind's name as used in scenario files ("f32", "i32", "i64", "u8",
/// "f16", "bf16").
std::string_view elemKindName(ElemKind kind);
/// Parses a name produced by elemKindName.
std::optional<ElemKind> parseElemKind(std::string_view name);

/// A tensor type: an element kind and a shape.
struct Type {
  ElemKind kind = ElemKind::Float32;
  std::vector<size_t> dims;

  /// The product of the dimensions (1 for a scalar with no dimensions).
  size_t numElements() const;
  /// numElements() * elemSize(kind).
  size_t sizeInBytes() const;
  /// "f32[2x3]".
  std::string toString() const;

  friend bool operator==(const Type &, const Type &) = default;
};

} // namespace drt

#endif // DRT_TYPE_H
