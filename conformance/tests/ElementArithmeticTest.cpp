//===- ElementArithmeticTest.cpp - The model's element arithmetic ---------===//
//
// Checks the reference model's arithmetic against an oracle written here
// from the contract's words (docs/semantics.md section 7): the exact result,
// computed in double where that is exact, rounded once to the kind by
// comparing distances to the two neighbouring values of the kind.
//
//===----------------------------------------------------------------------===//
#include "ElementArithmetic.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

using namespace drt;
using namespace drt::conformance;

namespace {

/// A 16-bit float format, decoded independently of the code under test.
struct Format {
  int mantissaBits;
  int exponentBits;

  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  uint16_t infinityBits() const {
    return uint16_t(((1 << exponentBits) - 1) << mantissaBits);
  }
  bool isNaN(uint16_t bits) const { return (bits & 0x7fff) > infinityBits(); }
  /// The value of non-NaN \p bits.
  double decode(uint16_t bits) const {
    int exponent = (bits & 0x7fff) >> mantissaBits;
    double mantissa = bits & ((1 << mantissaBits) - 1);
    double magnitude = exponent == (1 << exponentBits) - 1 ? HUGE_VAL
                       : exponent == 0
                           ? std::ldexp(mantissa, 1 - bias() - mantissaBits)
                           : std::ldexp(mantissa + std::ldexp(1, mantissaBits),
                                        exponent - bias() - mantissaBits);
    return bits & 0x8000 ? -magnitude : magnitude;
  }
  /// hi + lo (exactly, |lo| below half an ulp of hi in double) rounded to
  /// nearest even in this format. Positive bit patterns are ordered like
  /// their values, so a binary search finds the neighbours.
  uint16_t round(double hi, double lo = 0) const {
    uint16_t sign = std::signbit(hi) ? 0x8000 : 0;
    double x = std::fabs(hi);
    double rest = std::signbit(hi) ? -lo : lo;
    if (std::isinf(x))
      return sign | infinityBits();
    // The largest finite pattern below or at x.
    unsigned low = 0, high = infinityBits();
    while (high - low > 1) {
      unsigned mid = (low + high) / 2;
      (decode(uint16_t(mid)) <= x ? low : high) = mid;
    }
    double below = decode(uint16_t(low));
    // The value past the largest finite one: where the exponent would go on.
    double above = high == infinityBits() ? std::ldexp(1, bias() + 1)
                                          : decode(uint16_t(high));
    double toBelow = x - below, toAbove = above - x; // exact: few bits
    unsigned chosen;
    if (toBelow < toAbove || (toBelow == toAbove && rest < 0))
      chosen = low;
    else if (toBelow > toAbove || rest > 0)
      chosen = high;
    else
      chosen = low % 2 == 0 ? low : high;
    return uint16_t(sign | chosen);
  }
};

constexpr Format Half{10, 5};
constexpr Format BFloat{7, 8};

uint16_t compute16(OpKind op, ElemKind kind, uint16_t a, uint16_t b,
                   double factor = 1) {
  uint8_t in0[2], in1[2], out[2];
  std::memcpy(in0, &a, 2);
  std::memcpy(in1, &b, 2);
  computeElement(op, kind, factor, in0, in1, out);
  uint16_t r;
  std::memcpy(&r, out, 2);
  return r;
}

template <typename T>
T computeAs(OpKind op, ElemKind kind, T a, T b, double factor = 1) {
  uint8_t in0[sizeof(T)], in1[sizeof(T)], out[sizeof(T)];
  std::memcpy(in0, &a, sizeof a);
  std::memcpy(in1, &b, sizeof b);
  computeElement(op, kind, factor, in0, in1, out);
  T r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

/// The exact a + b as hi + lo (Knuth's two-sum).
std::pair<double, double> twoSum(double a, double b) {
  double s = a + b;
  double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

TEST(ElementArithmetic, HalfAndBFloat16WidenExactlyAndRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t h = uint16_t(bits);
    if (Half.isNaN(h)) {
      float f = halfToFloat(h);
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      // Quiet, same sign, same payload bits.
      EXPECT_EQ(floatToHalf(f), h | 0x0200) << std::hex << bits;
    } else {
      ASSERT_EQ(double(halfToFloat(h)), Half.decode(h)) << std::hex << bits;
      ASSERT_EQ(floatToHalf(halfToFloat(h)), h) << std::hex << bits;
    }
    if (BFloat.isNaN(h)) {
      EXPECT_EQ(floatToBFloat16(bfloat16ToFloat(h)), h | 0x0040)
          << std::hex << bits;
    } else {
      ASSERT_EQ(double(bfloat16ToFloat(h)), BFloat.decode(h))
          << std::hex << bits;
      ASSERT_EQ(floatToBFloat16(bfloat16ToFloat(h)), h) << std::hex << bits;
    }
  }
}

TEST(ElementArithmetic, NarrowingRoundsToNearestEvenAtEveryTie) {
  // Every midpoint between neighbouring values is a float: the tie itself
  // goes to the even neighbour, one float ulp off it to the nearer one.
  for (const auto &[format, narrow] :
       {std::pair{Half, &floatToHalf}, std::pair{BFloat, &floatToBFloat16}}) {
    for (uint32_t bits = 0; bits < format.infinityBits(); ++bits) {
      for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
        double low = std::fabs(format.decode(uint16_t(bits)));
        double high = bits + 1 == format.infinityBits()
                          ? std::ldexp(1, format.bias() + 1)
                          : format.decode(uint16_t(bits + 1));
        float mid = float((low + high) / 2);
        ASSERT_EQ(double(mid), (low + high) / 2);
        float s = sign ? -1.0f : 1.0f;
        uint16_t even = uint16_t(bits % 2 == 0 ? bits : bits + 1);
        EXPECT_EQ(narrow(s * mid), sign | even) << std::hex << bits;
        EXPECT_EQ(narrow(s * std::nextafter(mid, 0.0f)), sign | bits)
            << std::hex << bits;
        EXPECT_EQ(narrow(s * std::nextafter(mid, HUGE_VALF)),
                  sign | uint16_t(bits + 1))
            << std::hex << bits;
      }
    }
  }
}

TEST(ElementArithmetic, NarrowingMatchesTheOracleOverFloats) {
  // A stride through every float bit pattern (NaNs excepted) covers every
  // exponent, denormals of both kinds and overflow.
  for (uint64_t bits = 0; bits < 0x100000000; bits += 4099) {
    float f = std::bit_cast<float>(uint32_t(bits));
    if (std::isnan(f))
      continue;
    ASSERT_EQ(floatToHalf(f), Half.round(f)) << std::hex << bits;
    ASSERT_EQ(floatToBFloat16(f), BFloat.round(f)) << std::hex << bits;
  }
}

TEST(ElementArithmetic, HalfAndBFloat16ResultsAreTheExactResultRoundedOnce) {
  std::mt19937_64 random(20240611);
  for (const auto &[format, kind] : {std::pair{Half, ElemKind::Float16},
                                     std::pair{BFloat, ElemKind::BFloat16}}) {
    SCOPED_TRACE(std::string(elemKindName(kind)));
    for (int i = 0; i < 200000; ++i) {
      uint16_t a = uint16_t(random()), b = uint16_t(random());
      // Half the pairs close in magnitude, where sums cancel and round.
      if (i % 2)
        b = uint16_t((a & 0xff00) | (b & 0x80ff));
      double x = format.decode(a), y = format.decode(b);
      bool nan = format.isNaN(a) || format.isNaN(b);
      uint16_t sum = compute16(OpKind::Add, kind, a, b);
      uint16_t prod = compute16(OpKind::Mul, kind, a, b);
      if (nan || (std::isinf(x) && std::isinf(y) && x != y))
        EXPECT_TRUE(format.isNaN(sum)) << std::hex << a << " + " << b;
      else {
        auto [hi, lo] = twoSum(x, y);
        // An exact zero sum is +0 unless both operands are -0.
        uint16_t expected =
            hi == 0 && lo == 0
                ? uint16_t(std::signbit(x) && std::signbit(y) ? 0x8000 : 0)
                : format.round(hi, lo);
        ASSERT_EQ(sum, expected) << std::hex << a << " + " << b;
      }
      if (nan || (std::isinf(x) && y == 0) || (std::isinf(y) && x == 0))
        EXPECT_TRUE(format.isNaN(prod)) << std::hex << a << " * " << b;
      else // 22 significant bits at most: exact in double
        ASSERT_EQ(prod, format.round(x * y)) << std::hex << a << " * " << b;
    }
  }
}

TEST(ElementArithmetic, ScaleRoundsTheFactorToFloatThenToTheKind) {
  // 1 + 2^-11 + 2^-30 is 1 + 2^-11 as a float: a tie in f16, so the factor
  // is 1; rounded straight to f16 it would be 1 + 2^-10.
  double factor = 1 + std::ldexp(1, -11) + std::ldexp(1, -30);
  EXPECT_EQ(compute16(OpKind::Scale, ElemKind::Float16, 0x4000, 0, factor),
            0x4000);
  EXPECT_EQ(compute16(OpKind::Scale, ElemKind::BFloat16, 0x4000, 0,
                      1 + std::ldexp(1, -8) + std::ldexp(1, -30)),
            0x4000);
  std::mt19937_64 random(7);
  for (int i = 0; i < 20000; ++i) {
    double f = std::ldexp(double(random() >> 11), -52) * 4 - 2;
    uint16_t a = uint16_t(random());
    for (const auto &[format, kind] : {std::pair{Half, ElemKind::Float16},
                                       std::pair{BFloat, ElemKind::BFloat16}}) {
      if (format.isNaN(a))
        continue;
      double kindFactor = format.decode(format.round(double(float(f))));
      double x = format.decode(a);
      uint16_t got = compute16(OpKind::Scale, kind, a, 0, f);
      if (std::isinf(x) && kindFactor == 0)
        EXPECT_TRUE(format.isNaN(got));
      else
        ASSERT_EQ(got, format.round(x * kindFactor))
            << elemKindName(kind) << " " << std::hex << a << " * " << f;
    }
  }
}

TEST(ElementArithmetic, Float32ScaleIsSinglePrecision) {
  float x = 0.75f;
  float got = computeAs<float>(OpKind::Scale, ElemKind::Float32, x, 0, 0.3);
  EXPECT_EQ(std::bit_cast<uint32_t>(got), 0x3e666667u);
  EXPECT_NE(std::bit_cast<uint32_t>(got),
            std::bit_cast<uint32_t>(float(double(x) * 0.3)))
      << "the double-precision product rounds differently";
  float sum = computeAs<float>(OpKind::Add, ElemKind::Float32, 1.0f,
                               std::ldexp(1.0f, -24));
  EXPECT_EQ(sum, 1.0f) << "a tie rounds to even";
}

TEST(ElementArithmetic, ReluGivesPositiveZeroForNaNAndNegativeZero) {
  EXPECT_EQ(compute16(OpKind::Relu, ElemKind::Float16, 0x7e00, 0), 0);
  EXPECT_EQ(compute16(OpKind::Relu, ElemKind::Float16, 0x8000, 0), 0);
  EXPECT_EQ(compute16(OpKind::Relu, ElemKind::BFloat16, 0xff80, 0), 0);
  EXPECT_EQ(compute16(OpKind::Relu, ElemKind::BFloat16, 0x0001, 0), 0x0001)
      << "a positive denormal is kept";
  EXPECT_EQ(
      computeAs<uint32_t>(OpKind::Relu, ElemKind::Float32, 0xffc00000u, 0), 0u);
}

TEST(ElementArithmetic, CopyKeepsSignallingNaNPayloads) {
  EXPECT_EQ(compute16(OpKind::Copy, ElemKind::Float16, 0x7c01, 0), 0x7c01);
  EXPECT_EQ(compute16(OpKind::Copy, ElemKind::BFloat16, 0xffa5, 0), 0xffa5);
  EXPECT_EQ(
      computeAs<uint32_t>(OpKind::Copy, ElemKind::Float32, 0x7fa5a5a5u, 0),
      0x7fa5a5a5u);
}

TEST(ElementArithmetic, IntegersWrapModuloTheirWidth) {
  EXPECT_EQ(computeAs<int64_t>(OpKind::Add, ElemKind::Int64, INT64_MIN, -1),
            INT64_MAX);
  EXPECT_EQ(computeAs<int64_t>(OpKind::Mul, ElemKind::Int64, INT64_MIN, -1),
            INT64_MIN);
  EXPECT_EQ(computeAs<int64_t>(OpKind::Scale, ElemKind::Int64, 3, 0,
                               -9223372036854775808.0),
            INT64_MIN);
  EXPECT_EQ(computeAs<int64_t>(OpKind::Relu, ElemKind::Int64, -5, 0), 0);
  EXPECT_EQ(
      computeAs<int32_t>(OpKind::Scale, ElemKind::Int32, -1, 0, -2147483648.0),
      INT32_MIN);
  EXPECT_EQ(computeAs<int32_t>(OpKind::Mul, ElemKind::Int32, 46341, 46341),
            int32_t(0x80001219));
  EXPECT_EQ(computeAs<uint8_t>(OpKind::Add, ElemKind::UInt8, 200, 100), 44);
  EXPECT_EQ(computeAs<uint8_t>(OpKind::Mul, ElemKind::UInt8, 16, 16), 0);
  EXPECT_EQ(computeAs<uint8_t>(OpKind::Scale, ElemKind::UInt8, 17, 0, 255),
            239);
  for (unsigned v = 0; v < 256; ++v)
    EXPECT_EQ(computeAs<uint8_t>(OpKind::Relu, ElemKind::UInt8, uint8_t(v), 0),
              v)
        << "relu over u8 is the identity";
}

TEST(ElementArithmetic, AnUnknownInputByteMakesItsOutputElementUnknown) {
  NetworkNode add{OpKind::Add, {"a", "b"}, "o", 1.0};
  Values a{{1, 0, 2, 0, 3, 0}, {1, 1, 1, 0, 1, 1}};
  Values b{{1, 0, 1, 0, 1, 0}, std::vector<uint8_t>(6, 1)};
  Values out;
  computeNode(add, ElemKind::Float16, {&a, &b}, out, 3);
  EXPECT_EQ(out.known, (std::vector<uint8_t>{2, 2, 0, 0, 2, 2}))
      << "known f16 sums are exact unless NaN";
  EXPECT_EQ(out.data[2], 0) << "unknown elements are zero bytes";
  EXPECT_EQ(out.data.size(), 6u);
}

TEST(ElementArithmetic, OnlyFloatArithmeticLeavesANaNsBitsOpen) {
  auto knownOf = [](OpKind op, ElemKind kind, std::vector<uint8_t> in) {
    NetworkNode node{op, {"a", "b"}, "o", 1.0};
    if (opArity(op) == 1)
      node.inputs.pop_back();
    Values a{std::vector<uint8_t>(in.size(), 0x7f), in};
    Values b{std::vector<uint8_t>(in.size(), 1),
             std::vector<uint8_t>(in.size(), Exact)};
    Values out;
    computeNode(node, kind, {&a, &b}, out, in.size() / elemSize(kind));
    return out.known;
  };
  const std::vector<uint8_t> exact(4, Exact);
  const std::vector<uint8_t> open(4, ExactUnlessNaN);
  for (ElemKind kind :
       {ElemKind::Float32, ElemKind::Float16, ElemKind::BFloat16}) {
    for (OpKind op : {OpKind::Add, OpKind::Mul, OpKind::Scale})
      EXPECT_EQ(knownOf(op, kind, exact), open)
          << opKindName(op) << " over " << elemKindName(kind);
    EXPECT_EQ(knownOf(OpKind::Relu, kind, open), exact)
        << "relu gives +0 for any NaN over " << elemKindName(kind);
    EXPECT_EQ(knownOf(OpKind::Copy, kind, exact), exact)
        << "a copy moves bits over " << elemKindName(kind);
    EXPECT_EQ(knownOf(OpKind::Copy, kind, open), open)
        << "a copy keeps what its input leaves open over "
        << elemKindName(kind);
  }
  for (ElemKind kind : {ElemKind::Int32, ElemKind::UInt8, ElemKind::Int64})
    for (OpKind op : {OpKind::Add, OpKind::Mul, OpKind::Scale, OpKind::Relu})
      EXPECT_EQ(knownOf(op, kind, std::vector<uint8_t>(8, Exact)),
                std::vector<uint8_t>(8, Exact))
          << opKindName(op) << " over " << elemKindName(kind);
}

} // namespace
