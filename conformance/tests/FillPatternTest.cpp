//===- FillPatternTest.cpp - Fill patterns and value classes --------------===//
#include "drt/conformance/Scenario.h"

#include "ElementArithmetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>

using namespace drt;
using namespace drt::conformance;

namespace {

/// Element i of \p bytes as an unsigned number of elemSize(kind) bytes.
uint64_t elementOf(ElemKind kind, const std::vector<uint8_t> &bytes, size_t i) {
  size_t size = elemSize(kind);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  switch (size) {
  case 1:
    std::memcpy(&u8, bytes.data() + i, 1);
    return u8;
  case 2:
    std::memcpy(&u16, bytes.data() + 2 * i, 2);
    return u16;
  case 4:
    std::memcpy(&u32, bytes.data() + 4 * i, 4);
    return u32;
  default:
    std::memcpy(&u64, bytes.data() + 8 * i, 8);
    return u64;
  }
}

/// Every distinct element of \p pattern over \p kind (the lists are short:
/// 64 elements cover them).
std::set<uint64_t> valuesOf(ElemKind kind, uint64_t pattern) {
  std::vector<uint8_t> bytes = patternBytes(kind, pattern, 0, 64);
  std::set<uint64_t> out;
  for (size_t i = 0; i < 64; ++i)
    out.insert(elementOf(kind, bytes, i));
  return out;
}

uint64_t classPattern(std::string_view name) {
  for (const ValueClass &c : valueClasses())
    if (c.name == name)
      return c.pattern;
  ADD_FAILURE() << "no value class " << name;
  return 0;
}

TEST(FillPattern, StoredScenariosKeepTheirSmallExactValues) {
  // The formulas stored scenarios were written against, for patterns 0-9.
  for (uint64_t pattern = 0; pattern < 10; ++pattern) {
    for (uint64_t i = 0; i < 50; ++i) {
      auto at = [&](ElemKind kind) {
        return elementOf(kind, patternBytes(kind, pattern, i, 1), 0);
      };
      float f =
          pattern == 0
              ? 0.0f
              : float(int((i * (2 * pattern + 1) + pattern) % 17) - 8) * 0.25f;
      EXPECT_EQ(at(ElemKind::Float32), std::bit_cast<uint32_t>(f));
      EXPECT_EQ(at(ElemKind::Int32),
                pattern == 0 ? 0
                             : uint32_t(i * 2654435761u + pattern * 40503u));
      EXPECT_EQ(at(ElemKind::Int64),
                pattern == 0 ? 0 : i * 0x9E3779B97F4A7C15ull + pattern);
      EXPECT_EQ(at(ElemKind::UInt8),
                pattern == 0 ? 0 : uint8_t(i * 31 + pattern * 7));
      // f16 and bf16 hold the same values exactly.
      EXPECT_EQ(halfToFloat(uint16_t(at(ElemKind::Float16))), f);
      EXPECT_EQ(bfloat16ToFloat(uint16_t(at(ElemKind::BFloat16))), f);
    }
  }
}

TEST(FillPattern, WritesInPlaceFromAnyElementAndCutsAPartialElement) {
  for (ElemKind kind : AllElemKinds) {
    for (uint64_t pattern :
         {uint64_t(3), classPattern("specials") + 2, classPattern("random")}) {
      std::vector<uint8_t> whole = patternBytes(kind, pattern, 0, 20);
      size_t size = elemSize(kind);
      std::vector<uint8_t> part(7 * size + size / 2, 0xee);
      fillPattern(kind, pattern, 5, part);
      EXPECT_TRUE(
          std::equal(part.begin(), part.end(), whole.begin() + 5 * size))
          << elemKindName(kind) << " pattern " << pattern;
    }
  }
  std::vector<uint8_t> zeros(13, 0xff);
  fillPattern(ElemKind::Int32, 0, 0, zeros);
  EXPECT_EQ(zeros, std::vector<uint8_t>(13, 0));
}

TEST(FillPattern, ValueClassesAreDistinctAndNamed) {
  std::set<std::string_view> names;
  std::set<uint64_t> patterns;
  for (const ValueClass &c : valueClasses()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_TRUE(patterns.insert(c.pattern).second) << c.name;
    EXPECT_GE(c.pattern, ValueClassBase) << c.name;
    EXPECT_EQ(c.pattern % ValueClassBase, 0u) << c.name;
    EXPECT_FALSE(c.summary.empty()) << c.name;
    EXPECT_EQ(valueClassOf(c.pattern), &c);
    EXPECT_EQ(valueClassOf(c.pattern + ValueClassBase - 1), &c);
  }
  EXPECT_EQ(names, (std::set<std::string_view>{"specials", "extremes",
                                               "rounding", "random"}));
  EXPECT_EQ(valueClassOf(9), nullptr);
  EXPECT_EQ(valueClassOf(ValueClassBase - 1), nullptr);
}

TEST(FillPattern, FloatSpecialsAndExtremesHaveEveryBoundary) {
  struct Bits {
    ElemKind kind;
    uint64_t quietNaN, signallingNaN, infinity, negativeZero, minDenormal,
        maxDenormal, minNormal, maxFinite, sign;
  };
  const Bits kinds[] = {
      {ElemKind::Float32, 0x7fc00000, 0x7f800001, 0x7f800000, 0x80000000, 1,
       0x007fffff, 0x00800000, 0x7f7fffff, 0x80000000},
      {ElemKind::Float16, 0x7e00, 0x7c01, 0x7c00, 0x8000, 1, 0x03ff, 0x0400,
       0x7bff, 0x8000},
      {ElemKind::BFloat16, 0x7fc0, 0x7f81, 0x7f80, 0x8000, 1, 0x007f, 0x0080,
       0x7f7f, 0x8000},
  };
  for (const Bits &k : kinds) {
    SCOPED_TRACE(std::string(elemKindName(k.kind)));
    std::set<uint64_t> specials = valuesOf(k.kind, classPattern("specials"));
    for (uint64_t v : {k.quietNaN, k.signallingNaN, k.infinity,
                       k.infinity | k.sign, k.negativeZero, uint64_t(0)})
      EXPECT_TRUE(specials.count(v)) << std::hex << v;
    // A negative NaN with a payload beyond the quiet bit.
    EXPECT_TRUE(std::any_of(specials.begin(), specials.end(), [&](uint64_t v) {
      return (v & k.sign) && (v & ~k.sign) > k.quietNaN;
    }));
    std::set<uint64_t> extremes = valuesOf(k.kind, classPattern("extremes"));
    for (uint64_t v : {k.minDenormal, k.maxDenormal, k.minNormal, k.maxFinite})
      EXPECT_TRUE(extremes.count(v) && extremes.count(v | k.sign))
          << std::hex << v;
    EXPECT_GE(valuesOf(k.kind, classPattern("rounding")).size(), 8u);
  }
}

TEST(FillPattern, IntegerExtremesAreTheBoundsAndTheirNeighbours) {
  EXPECT_EQ(valuesOf(ElemKind::Int32, classPattern("extremes")),
            (std::set<uint64_t>{0x80000000, 0x7fffffff, 0xffffffff, 0, 1,
                                0x80000001, 0x7ffffffe}));
  EXPECT_EQ(valuesOf(ElemKind::Int64, classPattern("extremes")),
            (std::set<uint64_t>{0x8000000000000000, 0x7fffffffffffffff,
                                0xffffffffffffffff, 0, 1, 0x8000000000000001,
                                0x7ffffffffffffffe}));
  std::set<uint64_t> u8 = valuesOf(ElemKind::UInt8, classPattern("extremes"));
  for (uint64_t v : {0, 1, 254, 255})
    EXPECT_TRUE(u8.count(v)) << v;
  EXPECT_EQ(valuesOf(ElemKind::Int32, classPattern("specials")),
            valuesOf(ElemKind::Int32, classPattern("extremes")))
      << "integers have no special values beyond their extremes";
}

TEST(FillPattern, VariantsRotateListsAndSeedRandomBits) {
  uint64_t rounding = classPattern("rounding");
  std::vector<uint8_t> first = patternBytes(ElemKind::Float16, rounding, 1, 9);
  std::vector<uint8_t> shifted =
      patternBytes(ElemKind::Float16, rounding + 1, 0, 9);
  EXPECT_EQ(first, shifted) << "variant 1 starts one element later";
  uint64_t random = classPattern("random");
  std::vector<uint8_t> a = patternBytes(ElemKind::Int64, random + 1, 0, 256);
  std::vector<uint8_t> b = patternBytes(ElemKind::Int64, random + 2, 0, 256);
  EXPECT_NE(a, b) << "seeds give different bits";
  uint64_t ored = 0, anded = ~uint64_t(0);
  for (size_t i = 0; i < 256; ++i) {
    ored |= elementOf(ElemKind::Int64, a, i);
    anded &= elementOf(ElemKind::Int64, a, i);
  }
  EXPECT_EQ(ored, ~uint64_t(0)) << "every bit is set somewhere";
  EXPECT_EQ(anded, 0u) << "every bit is clear somewhere";
  EXPECT_EQ(valuesOf(ElemKind::UInt8, random + 5).size() > 40, true)
      << "random bytes take many values";
}

TEST(FillPattern, ALongFillEqualsItsElementsOneByOne) {
  // Long fills copy a computed block over the rest: every byte must still
  // be the element's own, from any first element, with a partial last one.
  std::vector<uint64_t> patterns = {1, 5, 9};
  for (const ValueClass &c : valueClasses())
    patterns.push_back(c.pattern + 3);
  for (ElemKind kind : AllElemKinds)
    for (uint64_t pattern : patterns)
      for (size_t first : {size_t(0), size_t(7), size_t(1000)}) {
        size_t size = elemSize(kind);
        std::vector<uint8_t> whole(3 * 4096 * size + size / 2 + 1);
        fillPattern(kind, pattern, first, whole);
        std::vector<uint8_t> one(size);
        for (size_t at = 0; at < whole.size(); at += size) {
          fillPattern(kind, pattern, first + at / size, one);
          size_t n = std::min(size, whole.size() - at);
          ASSERT_TRUE(
              std::equal(one.begin(), one.begin() + n, whole.begin() + at))
              << elemKindName(kind) << " pattern " << pattern << " from "
              << first << ": element " << at / size << " differs";
        }
      }
}

} // namespace
