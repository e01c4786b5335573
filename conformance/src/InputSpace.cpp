//===- InputSpace.cpp - What scenarios draw from --------------------------===//
#include "drt/conformance/InputSpace.h"

#include <algorithm>

namespace drt::conformance {

InputSpace makeInputSpace(const std::vector<uint64_t> &declaredSizes) {
  constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;
  InputSpace s;
  s.elemKinds.assign(AllElemKinds.begin(), AllElemKinds.end());
  // Small sizes are cheap and where most residency bugs show; large ones
  // are where a backend's chunking, paging and staging change path.
  s.sizeClasses = {{"one element", 1, 8, 12},
                   {"small (up to 64 B)", 2, 64, 38},
                   {"medium (65 B to 4 KiB)", 65, 4 * KiB, 30},
                   {"page (4 KiB to 64 KiB)", 4 * KiB + 1, 64 * KiB, 15},
                   {"large (64 KiB to 1 MiB)", 64 * KiB + 1, MiB, 3},
                   {"huge (1 MiB to 4 MiB)", MiB + 1, 4 * MiB - 1, 1},
                   {"very large (4 MiB to 8 MiB)", 4 * MiB, 8 * MiB, 1}};
  for (uint64_t b = 16; b <= 8 * MiB; b *= 2)
    s.boundaries.push_back(b);
  s.boundaries.push_back(4 * KiB - 64);
  s.boundaries.push_back(3 * MiB);
  for (uint64_t b : declaredSizes)
    if (b > 0 && b <= 8 * MiB)
      s.boundaries.push_back(b);
  std::sort(s.boundaries.begin(), s.boundaries.end());
  s.boundaries.erase(std::unique(s.boundaries.begin(), s.boundaries.end()),
                     s.boundaries.end());
  for (uint64_t p = 0; p <= 9; ++p)
    s.values.push_back({valueClassName(p), p});
  // Each special class with a few variants (where its list starts, or the
  // seed of its random bits).
  for (const ValueClass &v : valueClasses())
    for (uint64_t variant = 0; variant < 8; ++variant)
      s.values.push_back({std::string(v.name), v.pattern + variant});
  // 64 KiB: a common chunk of staging buffers and offset fields.
  s.alignments = {1, 4, 16, 64, 4096, 64 * KiB};
  s.maxLiveBytes = 24 * MiB;
  return s;
}

size_t sizeClassOf(const InputSpace &space, uint64_t bytes, size_t size) {
  if (bytes <= size)
    return 0;
  for (size_t i = 1; i < space.sizeClasses.size(); ++i)
    if (bytes <= space.sizeClasses[i].maxBytes)
      return i;
  return space.sizeClasses.size() - 1;
}

std::string boundaryRelation(const InputSpace &space, uint64_t bytes,
                             size_t size) {
  for (uint64_t b : space.boundaries) {
    if (bytes == b)
      return "at";
    if (bytes + size == b)
      return "one element below";
    if (bytes == b + size)
      return "one element above";
  }
  return "";
}

std::string valueClassName(uint64_t pattern) {
  if (pattern == 0)
    return "zeros";
  if (const ValueClass *v = valueClassOf(pattern))
    return std::string(v->name);
  return "small exact values";
}

} // namespace drt::conformance
