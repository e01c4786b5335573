//===- HostMemoryRetentionTest.cpp - Freed host memory kept for reuse -----===//
//
// ctest runs each test in a process of its own, so the setting stays in
// this test's process.
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/HostMemoryRetention.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DRT_TEST_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||     \
    __has_feature(memory_sanitizer)
#define DRT_TEST_SANITIZER_ALLOCATOR 1
#endif
#endif

namespace {

TEST(HostMemoryRetention, ATensorSizedBlockComesFromTheHeapAndStaysThere) {
#if !defined(__GLIBC__) || defined(DRT_TEST_SANITIZER_ALLOCATOR)
  GTEST_SKIP() << "the setting is glibc's, and a sanitizer's allocator "
                  "replaces glibc's malloc";
#else
  drt::conformance::retainFreedHostMemory();
  constexpr size_t Bytes = size_t(8) << 20;
  struct mallinfo2 before = mallinfo2();
  void *block = std::malloc(Bytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, Bytes);
  struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblks, before.hblks)
      << "an 8 MiB block was mapped on its own: freeing it unmaps it, and "
         "the next one is faulted in and zero-filled again";
  std::free(block);
  struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.fordblks, Bytes)
      << "the freed 8 MiB were given back to the system";
#endif
}

} // namespace
