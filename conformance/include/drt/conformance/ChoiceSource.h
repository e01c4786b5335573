//===- drt/conformance/ChoiceSource.h - Where choices come from -*- C++ -*-===//
//
// The generators make every choice (a command kind, a tensor, a size, a
// value, an offset, a fault) by asking a choice source for a number below a
// bound. A seeded random source makes generation deterministic for a seed;
// a byte source takes the numbers from a fuzzer's input, so that the fuzzer
// drives the very same generator: every input decodes to a valid scenario
// drawn from the same input space, and the fuzzer explores it by coverage.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_CHOICESOURCE_H
#define DRT_CONFORMANCE_CHOICESOURCE_H

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace drt::conformance {

/// A source of choices: numbers below a bound.
class ChoiceSource {
public:
  virtual ~ChoiceSource() = default;
  /// A number in [0, n); 0 when n is 0 or 1.
  virtual uint64_t below(uint64_t n) = 0;
  /// True once the source has nothing left to give (a generator then ends
  /// the scenario); a random source never runs out.
  virtual bool exhausted() const { return false; }

  /// A number in [lo, hi].
  uint64_t between(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  /// True with probability \p percent / 100.
  bool percent(unsigned percent) { return below(100) < percent; }
  /// An element of \p v (which must not be empty).
  template <typename T> const T &pick(const std::vector<T> &v) {
    return v[below(v.size())];
  }
};

/// SplitMix64's output function: spreads a counter over all 64 bits.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// FNV-1a over \p text, continuing from \p hash (the offset basis when
/// starting).
inline uint64_t fnv1a(std::string_view text,
                      uint64_t hash = 14695981039346656037ull) {
  for (char c : text)
    hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  return hash;
}

/// A small deterministic random source (SplitMix64).
class RandomSource final : public ChoiceSource {
public:
  explicit RandomSource(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  uint64_t below(uint64_t n) override { return n ? next() % n : 0; }

private:
  uint64_t state_;
};

/// Choices read from a byte string, front to back: a choice below n takes
/// the fewest whole bytes that can hold n - 1 (none when n is 1, one byte up
/// to 256), little-endian, reduced modulo n. When the bytes run out every
/// choice is 0 and the source is exhausted. A byte therefore keeps its
/// meaning when a mutation changes a later one, which is what lets a
/// coverage-guided fuzzer build on the inputs it has.
class ByteChoiceSource final : public ChoiceSource {
public:
  /// Reads from \p bytes, which must outlive the source.
  explicit ByteChoiceSource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t below(uint64_t n) override {
    if (n <= 1)
      return 0;
    uint64_t value = 0;
    int shift = 0;
    for (uint64_t rest = n - 1; rest != 0; rest >>= 8, shift += 8) {
      if (used_ == bytes_.size()) {
        exhausted_ = true;
        return 0;
      }
      value |= uint64_t(bytes_[used_++]) << shift;
    }
    return value % n;
  }
  bool exhausted() const override {
    return exhausted_ || used_ == bytes_.size();
  }
  /// Bytes read so far.
  size_t consumed() const { return used_; }

private:
  std::span<const uint8_t> bytes_;
  size_t used_ = 0;
  bool exhausted_ = false;
};

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_CHOICESOURCE_H
