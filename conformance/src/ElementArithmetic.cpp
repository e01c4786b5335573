//===- ElementArithmetic.cpp - The model's element-wise arithmetic --------===//
//
// Integers are computed on unsigned types, so that add, mul and scale wrap
// modulo 2^bits without undefined behaviour. f16 and bf16 are computed in
// float and rounded once to the kind: float's 24 significant bits are at
// least 2p + 2 for both (p = 11 and 8), so rounding the float sum or product
// to the kind gives the exact result rounded once (docs/semantics.md section
// 7 says why). The conversions are written on bits here, independently of
// the backends' own.
//
//===----------------------------------------------------------------------===//
#include "ElementArithmetic.h"

#include <algorithm>

#include <bit>
#include <cstring>

namespace drt::conformance {

float halfToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000 |
                                (mantissa ? 0x400000 | mantissa << 13 : 0));
  if (exponent == 0) {
    if (mantissa == 0)
      return std::bit_cast<float>(sign);
    // A denormal, mantissa * 2^-24: normalise it (float holds it as normal).
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    return std::bit_cast<float>(sign | uint32_t(127 - 14 - shift) << 23 |
                                (mantissa & 0x3ff) << 13);
  }
  return std::bit_cast<float>(sign | (exponent - 15 + 127) << 23 |
                              mantissa << 13);
}

uint16_t floatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000)
    return uint16_t(sign | 0x7e00 | ((magnitude >> 13) & 0x3ff));
  // 65520 is halfway between the largest finite half (65504, odd mantissa)
  // and 2^16: from there on the result is infinity.
  if (magnitude >= 0x477ff000)
    return uint16_t(sign | 0x7c00);
  int exponent = int(magnitude >> 23) - 127;
  uint32_t significand = (magnitude & 0x7fffff) | 0x800000;
  // The result's unit in the last place is 2^(exponent - 10) for a normal
  // half and 2^-24 for a denormal: drop the bits of the significand below it.
  int dropped = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  if (dropped > 24)
    return sign; // below half the smallest denormal, 2^-25: rounds to zero
  uint32_t kept = significand >> dropped;
  uint32_t rest = significand & ((uint32_t(1) << dropped) - 1);
  uint32_t half = uint32_t(1) << (dropped - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  if (exponent < -14)
    return uint16_t(sign | kept); // a carry into 0x400 is the smallest normal
  // kept holds the implicit bit at 0x400; a carry to 0x800 moves into the
  // exponent field, as the encoding is monotonic.
  return uint16_t(sign + ((uint32_t(exponent + 14) << 10) + kept));
}

float bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

uint16_t floatToBFloat16(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffff) > 0x7f800000)
    return uint16_t((x >> 16) | 0x0040);
  uint32_t rest = x & 0xffff;
  uint32_t kept = x >> 16;
  if (rest > 0x8000 || (rest == 0x8000 && (kept & 1)))
    ++kept; // a carry out of the mantissa raises the exponent; past the
            // largest finite value it reaches infinity (0x7f80)
  return uint16_t(kept);
}

namespace {

/// An integer kind computed as the unsigned type U: wrap-around arithmetic,
/// relu on the signed reading S.
template <typename U, typename S>
void integerElement(OpKind op, double factor, const uint8_t *a,
                    const uint8_t *b, uint8_t *out) {
  U x = load<U>(a);
  U r = 0;
  switch (op) {
  case OpKind::Add:
    r = U(x + load<U>(b));
    break;
  case OpKind::Mul:
    r = U(x * load<U>(b));
    break;
  case OpKind::Relu:
    r = S(x) > 0 ? x : U(0);
    break;
  case OpKind::Scale:
    // verify() admits only integers that S holds; converting through S
    // (int64_t for the widest) gives the factor's two's complement bits.
    r = U(x * U(S(int64_t(factor))));
    break;
  case OpKind::Copy:
    r = x;
    break;
  }
  store(out, r);
}

/// A float kind stored as Bits: widened to float exactly by \p widen,
/// computed in float, rounded once by \p narrow.
template <typename Bits>
void floatElement(OpKind op, double factor, const uint8_t *a, const uint8_t *b,
                  uint8_t *out, float (*widen)(Bits), Bits (*narrow)(float)) {
  Bits bits = load<Bits>(a);
  if (op == OpKind::Copy) {
    store(out, bits);
    return;
  }
  float x = widen(bits);
  float r = 0;
  switch (op) {
  case OpKind::Add:
    r = x + widen(load<Bits>(b));
    break;
  case OpKind::Mul:
    r = x * widen(load<Bits>(b));
    break;
  case OpKind::Relu:
    r = x > 0 ? x : 0.0f;
    break;
  case OpKind::Scale:
    // The factor is first rounded to float, then to the kind (docs/semantics.md
    // section 7); the product is then computed like mul.
    r = x * widen(narrow(float(factor)));
    break;
  case OpKind::Copy:
    break;
  }
  store(out, narrow(r));
}

float sameFloat(float v) { return v; }

} // namespace

void computeElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                    const uint8_t *b, uint8_t *out) {
  switch (kind) {
  case ElemKind::Float32:
    // float to float: narrowing is the identity, the float operation itself
    // rounds once.
    floatElement<float>(op, factor, a, b, out, sameFloat, sameFloat);
    break;
  case ElemKind::Float16:
    floatElement<uint16_t>(op, factor, a, b, out, halfToFloat, floatToHalf);
    break;
  case ElemKind::BFloat16:
    floatElement<uint16_t>(op, factor, a, b, out, bfloat16ToFloat,
                           floatToBFloat16);
    break;
  case ElemKind::Int32:
    integerElement<uint32_t, int32_t>(op, factor, a, b, out);
    break;
  case ElemKind::Int64:
    integerElement<uint64_t, int64_t>(op, factor, a, b, out);
    break;
  case ElemKind::UInt8:
    integerElement<uint8_t, uint8_t>(op, factor, a, b, out);
    break;
  }
}

void computeNode(const NetworkNode &node, ElemKind kind,
                 const std::vector<const Values *> &in, Values &out,
                 size_t elements) {
  size_t size = elemSize(kind);
  out.data.assign(elements * size, 0);
  out.known.assign(elements * size, Unknown);
  bool floatKind = kind == ElemKind::Float32 || kind == ElemKind::Float16 ||
                   kind == ElemKind::BFloat16;
  bool openResult =
      floatKind && node.op != OpKind::Relu && node.op != OpKind::Copy;
  for (size_t i = 0; i < elements; ++i) {
    bool known = true;
    for (const Values *v : in)
      for (size_t b = 0; b < size; ++b)
        known = known && v->known[i * size + b] != Unknown;
    if (!known)
      continue;
    computeElement(node.op, kind, node.factor, in[0]->data.data() + i * size,
                   in.size() > 1 ? in[1]->data.data() + i * size : nullptr,
                   out.data.data() + i * size);
    if (node.op == OpKind::Copy)
      std::copy_n(in[0]->known.begin() + ptrdiff_t(i * size), size,
                  out.known.begin() + ptrdiff_t(i * size));
    else
      std::fill_n(out.known.begin() + ptrdiff_t(i * size), size,
                  uint8_t(openResult ? ExactUnlessNaN : Exact));
  }
}

} // namespace drt::conformance
