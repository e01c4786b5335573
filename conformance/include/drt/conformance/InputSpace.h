//===- drt/conformance/InputSpace.h - What scenarios draw from --*- C++ -*-===//
//
// One description of the input space: the size classes and boundary sizes,
// element kinds, value classes, view offsets and budgets that generated
// scenarios draw from. The generators draw from it, the shrinker simplifies
// towards the small end of each class, and the census reports which classes
// a run reached, so the three can never disagree about what "covered" means.
// A backend adds the sizes it declares interesting (its chunk, its page).
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_INPUTSPACE_H
#define DRT_CONFORMANCE_INPUTSPACE_H

#include "drt/Type.h"
#include "drt/conformance/Scenario.h"

#include <cstdint>
#include <string>
#include <vector>

namespace drt::conformance {

/// A named range of tensor sizes in bytes, both ends included.
struct SizeClass {
  std::string name;
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;
  /// Relative weight when a generator draws a class.
  unsigned weight = 1;
};

/// One fill pattern the generators may draw, with the name of its value
/// class ("zeros", "small exact values", "specials", ...).
struct ValueChoice {
  std::string name;
  uint64_t pattern = 0;
};

/// The input space scenarios are drawn from.
struct InputSpace {
  /// Element kinds tensors and networks are made of.
  std::vector<ElemKind> elemKinds;
  /// Size classes, smallest first. The first holds exactly one element.
  std::vector<SizeClass> sizeClasses;
  /// Byte sizes where a backend may change its path (powers of two, the
  /// page, chunk and staging sizes): drawn often, and one element around.
  std::vector<uint64_t> boundaries;
  /// Fill patterns, each in its value class; a generator draws a class
  /// first, then a pattern of it.
  std::vector<ValueChoice> values;
  /// Byte alignments whose multiples and non-multiples view offsets and
  /// sizes are drawn at.
  std::vector<uint64_t> alignments;
  /// Most bytes a generated scenario keeps live at once (bounds its cost).
  uint64_t maxLiveBytes = 0;
};

/// The built-in input space, with \p declaredSizes (bytes a backend declares
/// interesting) added to the boundaries.
InputSpace makeInputSpace(const std::vector<uint64_t> &declaredSizes = {});

/// The index of the size class \p bytes of elements of \p size bytes fall in
/// (a one-element tensor is in class 0 whatever its size).
size_t sizeClassOf(const InputSpace &space, uint64_t bytes, size_t size);

/// How \p bytes relates to the nearest boundary for elements of \p size
/// bytes: "at", "one element below", "one element above", or "" (none).
std::string boundaryRelation(const InputSpace &space, uint64_t bytes,
                             size_t size);

/// The name of the value class fill pattern \p pattern belongs to.
std::string valueClassName(uint64_t pattern);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_INPUTSPACE_H
