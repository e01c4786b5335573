//===- HostMemoryTest.cpp - Tensor storage from a HostMemory --------------===//
//
// Tensors whose host storage comes from a HostMemory: where the bytes come
// from, that they go back exactly once, and that a failed creation gives
// back what it took. The program replaces the global operator new so that
// a test can make the next allocation fail; it is a program of its own for
// that reason.
//
//===----------------------------------------------------------------------===//
#include "drt/HostMemory.h"
#include "drt/Tensor.h"

#include "ViolationAssertions.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
/// When set, the next operator new on this thread throws std::bad_alloc.
thread_local bool failNextNew = false;
} // namespace

// GCC takes the free() of a replacement operator delete for a mismatched
// deallocation; it pairs with the malloc() of the operator new here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void *operator new(std::size_t bytes) {
  if (failNextNew) {
    failNextNew = false;
    throw std::bad_alloc();
  }
  if (void *p = std::malloc(bytes ? bytes : 1))
    return p;
  throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace drt;

namespace {

/// Memory from aligned_alloc that counts its allocations and gives back,
/// or fails every allocation when told to.
class CountingMemory : public HostMemory {
public:
  std::string describe() const override { return "counting memory"; }
  bool isPinned() const override { return pinned; }
  Expected<std::byte *> allocate(size_t bytes) override {
    if (refuse)
      return makeError(ErrorCode::OutOfMemory,
                       std::to_string(bytes) +
                           " bytes of counting memory: " + "refused");
    ++allocations;
    lastBytes = bytes;
    size_t rounded = (bytes + 63) / 64 * 64;
    last = static_cast<std::byte *>(std::aligned_alloc(64, rounded));
    return last;
  }
  void deallocate(std::byte *data, size_t bytes) noexcept override {
    ++deallocations;
    EXPECT_EQ(data, last);
    EXPECT_EQ(bytes, lastBytes);
    std::free(data);
  }

  bool pinned = true;
  bool refuse = false;
  int allocations = 0;
  int deallocations = 0;
  std::byte *last = nullptr;
  size_t lastBytes = 0;
};

class HostMemoryTest : public ::testing::Test {
  ScopedThrowingViolationHandler handler_;
};

} // namespace

TEST_F(HostMemoryTest, TensorsTakeTheirStorageFromItAndGiveItBackOnce) {
  auto memory = std::make_shared<CountingMemory>();
  {
    Expected<Tensor> made =
        Tensor::create(Type{ElemKind::Float32, {4, 4}}, "t", memory);
    ASSERT_TRUE(made.hasValue()) << made.takeError().toString();
    Tensor t = std::move(*made);
    EXPECT_EQ(memory->allocations, 1);
    EXPECT_EQ(memory->lastBytes, 64u);
    EXPECT_TRUE(t.isPinned());
    std::span<const std::byte> bytes = t.hostBytes();
    EXPECT_EQ(bytes.data(), memory->last);
    for (std::byte b : bytes)
      EXPECT_EQ(b, std::byte{0});
    // A view keeps the storage: the bytes go back with the last of them.
    Tensor view = t.getUnowned({4}, 4);
    t = Tensor();
    EXPECT_EQ(memory->deallocations, 0);
    EXPECT_TRUE(view.isPinned());
  }
  EXPECT_EQ(memory->deallocations, 1);

  memory->pinned = false;
  Expected<Tensor> pageable =
      Tensor::create(Type{ElemKind::Int32, {3}}, "p", memory);
  ASSERT_TRUE(pageable.hasValue());
  EXPECT_FALSE(pageable->isPinned());
  Expected<Tensor> plain =
      Tensor::create(Type{ElemKind::Int32, {3}}, "q", nullptr);
  ASSERT_TRUE(plain.hasValue());
  EXPECT_FALSE(plain->isPinned());
  EXPECT_EQ(memory->allocations, 2);
}

TEST_F(HostMemoryTest, WithGuardsTheBlockHasRoomForThemAndGoesBackWhole) {
  auto memory = std::make_shared<CountingMemory>();
  EXPECT_FALSE(hostGuardsEnabled());
  {
    HostGuardScope guards;
    EXPECT_TRUE(hostGuardsEnabled());
    Expected<Tensor> made =
        Tensor::create(Type{ElemKind::Float32, {4}}, "g", memory);
    ASSERT_TRUE(made.hasValue()) << made.takeError().toString();
    EXPECT_EQ(memory->lastBytes, 16u + 2 * HostGuardBytes);
    std::span<const std::byte> bytes = made->hostBytes();
    EXPECT_EQ(bytes.data(), memory->last + HostGuardBytes);
    EXPECT_EQ(bytes.size(), 16u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u);
    for (std::byte b : bytes)
      EXPECT_EQ(b, std::byte{0});
    // deallocate() checks that the whole block comes back.
  }
  EXPECT_EQ(memory->deallocations, 1);
  EXPECT_FALSE(hostGuardsEnabled());
  Expected<Tensor> plain =
      Tensor::create(Type{ElemKind::Float32, {4}}, "p", memory);
  ASSERT_TRUE(plain.hasValue());
  EXPECT_EQ(memory->lastBytes, 16u);
  EXPECT_EQ(plain->hostBytes().data(), memory->last);
}

TEST_F(HostMemoryTest, ARefusedAllocationIsItsErrorNamingTensorAndMemory) {
  auto memory = std::make_shared<CountingMemory>();
  memory->refuse = true;
  Expected<Tensor> made =
      Tensor::create(Type{ElemKind::Float32, {8}}, "big", memory);
  ASSERT_FALSE(made.hasValue());
  Error e = made.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(e.message().find("'big'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("counting memory"), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("32 bytes"), std::string::npos) << e.message();
  EXPECT_EQ(memory->deallocations, 0);
}

TEST_F(HostMemoryTest, AFailureAfterTheAllocationGivesTheBlockBack) {
  auto memory = std::make_shared<CountingMemory>();
  Type type{ElemKind::Float32, {8}};
  // The allocation succeeds; making the storage that takes it over fails.
  failNextNew = true;
  Expected<Tensor> made = Tensor::create(std::move(type), "t", memory);
  failNextNew = false;
  ASSERT_FALSE(made.hasValue());
  Error e = made.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(e.message().find("'t'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("counting memory"), std::string::npos)
      << e.message();
  EXPECT_EQ(memory->allocations, 1);
  EXPECT_EQ(memory->deallocations, 1);
}

TEST_F(HostMemoryTest, AFailedPageableCreationNamesTheTensor) {
  Type type{ElemKind::Float32, {8}};
  failNextNew = true;
  Expected<Tensor> made = Tensor::create(std::move(type), "pageable");
  failNextNew = false;
  ASSERT_FALSE(made.hasValue());
  Error e = made.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(e.message().find("'pageable'"), std::string::npos) << e.message();
}
