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

/// out[i] = f(a[i], b[i]) over \p n elements of T (unaligned).
template <typename T, typename F>
void binarySpan(const uint8_t *a, const uint8_t *b, uint8_t *out, size_t n,
                F f) {
  for (size_t i = 0; i < n; ++i)
    store(out + i * sizeof(T),
          f(load<T>(a + i * sizeof(T)), load<T>(b + i * sizeof(T))));
}

/// out[i] = f(a[i]) over \p n elements of T (unaligned).
template <typename T, typename F>
void unarySpan(const uint8_t *a, uint8_t *out, size_t n, F f) {
  for (size_t i = 0; i < n; ++i)
    store(out + i * sizeof(T), f(load<T>(a + i * sizeof(T))));
}

/// An integer kind computed as the unsigned type U: wrap-around arithmetic,
/// relu on the signed reading S. The operation is chosen once per span, so
/// that the element loops are plain loops.
template <typename U, typename S>
void integerSpan(OpKind op, double factor, const uint8_t *a, const uint8_t *b,
                 uint8_t *out, size_t n) {
  switch (op) {
  case OpKind::Add:
    binarySpan<U>(a, b, out, n, [](U x, U y) { return U(x + y); });
    break;
  case OpKind::Mul:
    binarySpan<U>(a, b, out, n, [](U x, U y) { return U(x * y); });
    break;
  case OpKind::Relu:
    unarySpan<U>(a, out, n, [](U x) { return S(x) > 0 ? x : U(0); });
    break;
  case OpKind::Scale: {
    // verify() admits only integers that S holds; converting through S
    // (int64_t for the widest) gives the factor's two's complement bits.
    U f = U(S(int64_t(factor)));
    unarySpan<U>(a, out, n, [f](U x) { return U(x * f); });
    break;
  }
  case OpKind::Copy:
    std::memcpy(out, a, n * sizeof(U));
    break;
  }
}

/// A float kind stored as Bits: widened to float exactly by Widen, computed
/// in float, rounded once by Narrow.
template <typename Bits, float (*Widen)(Bits), Bits (*Narrow)(float)>
void floatSpan(OpKind op, double factor, const uint8_t *a, const uint8_t *b,
               uint8_t *out, size_t n) {
  switch (op) {
  case OpKind::Add:
    binarySpan<Bits>(a, b, out, n, [](Bits x, Bits y) {
      return Narrow(Widen(x) + Widen(y));
    });
    break;
  case OpKind::Mul:
    binarySpan<Bits>(a, b, out, n, [](Bits x, Bits y) {
      return Narrow(Widen(x) * Widen(y));
    });
    break;
  case OpKind::Relu:
    unarySpan<Bits>(a, out, n, [](Bits x) {
      float v = Widen(x);
      return Narrow(v > 0 ? v : 0.0f);
    });
    break;
  case OpKind::Scale: {
    // The factor is first rounded to float, then to the kind (docs/semantics.md
    // section 7); the product is then computed like mul.
    float f = Widen(Narrow(float(factor)));
    unarySpan<Bits>(a, out, n, [f](Bits x) { return Narrow(Widen(x) * f); });
    break;
  }
  case OpKind::Copy:
    // Bits move unchanged: a copy never goes through a float register.
    std::memcpy(out, a, n * sizeof(Bits));
    break;
  }
}

float sameFloat(float v) { return v; }

/// \p n elements of \p op over \p kind, as computeElement computes each.
void computeElements(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                     const uint8_t *b, uint8_t *out, size_t n) {
  switch (kind) {
  case ElemKind::Float32:
    // float to float: narrowing is the identity, the float operation itself
    // rounds once.
    floatSpan<float, sameFloat, sameFloat>(op, factor, a, b, out, n);
    break;
  case ElemKind::Float16:
    floatSpan<uint16_t, halfToFloat, floatToHalf>(op, factor, a, b, out, n);
    break;
  case ElemKind::BFloat16:
    floatSpan<uint16_t, bfloat16ToFloat, floatToBFloat16>(op, factor, a, b, out,
                                                          n);
    break;
  case ElemKind::Int32:
    integerSpan<uint32_t, int32_t>(op, factor, a, b, out, n);
    break;
  case ElemKind::Int64:
    integerSpan<uint64_t, int64_t>(op, factor, a, b, out, n);
    break;
  case ElemKind::UInt8:
    integerSpan<uint8_t, uint8_t>(op, factor, a, b, out, n);
    break;
  }
}

/// Whether every byte of \p n elements of \p size bytes from element
/// \p first is known in each of \p in.
bool allKnown(const std::vector<const Values *> &in, size_t first, size_t n,
              size_t size) {
  for (const Values *v : in)
    if (std::memchr(v->known.data() + first * size, Unknown, n * size))
      return false;
  return true;
}

} // namespace

void computeElement(OpKind op, ElemKind kind, double factor, const uint8_t *a,
                    const uint8_t *b, uint8_t *out) {
  computeElements(op, kind, factor, a, b, out, 1);
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
  // Known elements are computed in runs: most inputs are known throughout,
  // and then the whole node is one run.
  auto computeRun = [&](size_t first, size_t n) {
    size_t at = first * size;
    computeElements(node.op, kind, node.factor, in[0]->data.data() + at,
                    in.size() > 1 ? in[1]->data.data() + at : nullptr,
                    out.data.data() + at, n);
    if (node.op == OpKind::Copy)
      std::copy_n(in[0]->known.begin() + ptrdiff_t(at), n * size,
                  out.known.begin() + ptrdiff_t(at));
    else
      std::fill_n(out.known.begin() + ptrdiff_t(at), n * size,
                  uint8_t(openResult ? ExactUnlessNaN : Exact));
  };
  if (elements == 0)
    return;
  if (allKnown(in, 0, elements, size)) {
    computeRun(0, elements);
    return;
  }
  for (size_t i = 0; i < elements;) {
    if (!allKnown(in, i, 1, size)) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < elements && allKnown(in, end, 1, size))
      ++end;
    computeRun(i, end - i);
    i = end;
  }
}

} // namespace drt::conformance
