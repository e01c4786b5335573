//===- ElementArithmetic.h - The model's element-wise arithmetic -*- C++
//-*-===//
//
// The reference model's arithmetic of the function model: add, mul, relu,
// scale and copy over every element kind, bit for bit as docs/semantics.md
// section 7 defines them. Internal to the conformance library (the model and
// its tests); it shares no code with any backend, so that a backend and the
// model agreeing means two implementations agree.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_ELEMENTARITHMETIC_H
#define DRT_CONFORMANCE_ELEMENTARITHMETIC_H

#include "drt/Function.h"
#include "drt/Type.h"
#include "drt/conformance/Scenario.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace drt::conformance {

/// The element of type T at \p p, which need not be aligned.
template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Writes \p v at \p p, which need not be aligned.
template <typename T> void store(uint8_t *p, T v) {
  std::memcpy(p, &v, sizeof v);
}

/// How the model knows a byte of a modelled run's values.
enum ByteKnowledge : uint8_t {
  /// Not at all.
  Unknown = 0,
  /// Exactly.
  Exact = 1,
  /// Exactly, except that where its element is a NaN (the result of a float
  /// add, mul or scale) any NaN's bits stand for it (semantics §7).
  ExactUnlessNaN = 2,
};

/// One placeholder's values during a modelled run: its bytes, and per byte
/// how the model knows it (a ByteKnowledge); bytes rather than bits, which
/// cost a shift and a mask per access in the element loops.
struct Values {
  std::vector<uint8_t> data;
  std::vector<uint8_t> known;
};

/// Computes \p node over \p elements elements of \p kind into \p out (resized
/// to elements * elemSize(kind) bytes). \p in holds one Values per input of
/// the node, each at least that long. An output element is known when every
/// byte of the input elements it is computed from is known; an unknown output
/// element is zero bytes marked unknown. A known element is ExactUnlessNaN
/// when a float add, mul or scale computed it, as its input's when a copy
/// did, and Exact otherwise (relu gives +0 for a NaN, an integer op has no
/// NaN). The node must have passed
/// Function::verify (an integer scale factor is an integer the kind holds).
void computeNode(const NetworkNode &node, ElemKind kind,
                 const std::vector<const Values *> &in, Values &out,
                 size_t elements);

/// One element of \p op over \p kind: reads elemSize(kind) bytes at \p a (and
/// at \p b for add and mul; \p b is not read otherwise and may be null) and
/// writes elemSize(kind) bytes at \p out. \p factor is the scale factor, as
/// for computeNode.
void computeElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                    const uint8_t *b, uint8_t *out);

/// The binary16 value \p bits as a float (exact; a NaN stays a NaN, quiet).
float halfToFloat(uint16_t bits);
/// \p value rounded to binary16, to nearest even (past the largest finite
/// value: infinity). A NaN gives a quiet NaN with the same sign and the top
/// 9 bits of its payload.
uint16_t floatToHalf(float value);
/// The bfloat16 value \p bits as a float (exact: the upper half of a float).
float bfloat16ToFloat(uint16_t bits);
/// \p value rounded to bfloat16, to nearest even. A NaN gives a quiet NaN
/// with the same sign and the top 6 bits of its payload.
uint16_t floatToBFloat16(float value);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_ELEMENTARITHMETIC_H
