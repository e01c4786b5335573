//===- SameText.h - Equality of short names ----------------------*- C++
//-*-===//
//
// Internal to the conformance library.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_SAMETEXT_H
#define DRT_CONFORMANCE_SAMETEXT_H

#include <cstddef>
#include <string_view>

namespace drt::conformance {

/// True when \p a and \p b are the same text. The names of a scenario are a
/// few characters long, and a sweep compares some per tensor: a loop here
/// costs less than the call of memcmp that std::string's == makes.
inline bool sameText(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return false;
  return true;
}

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_SAMETEXT_H
