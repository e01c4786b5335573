//===- ViolationAssertions.h - Checking violations in tests -----*- C++ -*-===//
//
// With a ScopedThrowingViolationHandler installed, EXPECT_VIOLATION(stmt, kind)
// fails unless \p stmt reports a violation of \p kind.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_TESTS_VIOLATIONASSERTIONS_H
#define DRT_TESTS_VIOLATIONASSERTIONS_H

#include "drt/Violation.h"

#include <gtest/gtest.h>

#define EXPECT_VIOLATION(stmt, kindValue)                                      \
  do {                                                                         \
    try {                                                                      \
      stmt;                                                                    \
      ADD_FAILURE() << "no violation from: " #stmt;                            \
    } catch (const ::drt::ContractViolationError &v) {                         \
      EXPECT_EQ(v.kind(), kindValue) << v.what();                              \
    }                                                                          \
  } while (0)

#endif // DRT_TESTS_VIOLATIONASSERTIONS_H
