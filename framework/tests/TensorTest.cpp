//===- TensorTest.cpp - Host-side tensor rules ----------------------------===//
//
// The rules that need no device: construction, views sharing storage and
// record, clone independence, move semantics, violations on misuse.
//
//===----------------------------------------------------------------------===//
#include "drt/Tensor.h"
#include "drt/HostMemory.h"
#include "drt/Violation.h"

#include "ViolationAssertions.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <unistd.h>

using namespace drt;

namespace {
class TensorTest : public ::testing::Test {
  ScopedThrowingViolationHandler handler_;
};

void fill(Tensor &t, float base) {
  auto d = t.mutableHostData<float>();
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = base + float(i);
}

} // namespace

TEST_F(TensorTest, NewTensorIsZeroFilledAlignedAndOnHost) {
  Tensor t(ElemKind::Float32, {3, 5}, "t");
  EXPECT_EQ(t.sizeInBytes(), 60u);
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  auto bytes = t.hostBytes();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u);
  for (std::byte b : bytes)
    EXPECT_EQ(b, std::byte{0});
}

TEST_F(TensorTest, ImpossibleTypesAreErrorsOrViolations) {
  auto zero = Tensor::create(Type{ElemKind::Float32, {4, 0}}, "z");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.takeError().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(zero.takeError().message().find("'z'"), std::string::npos);
  auto huge = Tensor::create(
      Type{ElemKind::Float32, {size_t(1) << 40, size_t(1) << 40}}, "h");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.takeError().message().find("larger than"), std::string::npos);
  // The limit is drt::MaxTensorBytes, 2^46 bytes, whatever the element size.
  EXPECT_EQ(MaxTensorBytes, size_t(1) << 46);
  for (Type over : {Type{ElemKind::UInt8, {MaxTensorBytes + 1}},
                    Type{ElemKind::Float32, {MaxTensorBytes / 4 + 1}},
                    Type{ElemKind::Int64, {2, MaxTensorBytes / 16 + 1}}}) {
    auto t = Tensor::create(over, "over");
    ASSERT_FALSE(t) << over.toString();
    EXPECT_NE(t.takeError().message().find("larger than 70368744177664 bytes"),
              std::string::npos);
  }
  EXPECT_VIOLATION(Tensor(ElemKind::Int32, {}),
                   ViolationKind::InvalidTensorType);
  auto ok = Tensor::create(Type{ElemKind::Int32, {2}}, "ok");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->sizeInBytes(), 8u);
}

TEST_F(TensorTest, ViewSharesStorageAndRecord) {
  Tensor owner(ElemKind::Float32, {8}, "o");
  fill(owner, 0);
  Tensor view = owner.getUnowned({4}, 2);
  EXPECT_TRUE(view.isView());
  EXPECT_TRUE(view.sharesResidencyWith(owner));
  EXPECT_EQ(&view.residency(), &owner.residency());
  EXPECT_FALSE(view.coversStorage());
  EXPECT_TRUE(owner.getUnowned({8}).coversStorage());
  EXPECT_EQ(view.hostData<float>()[0], 2.0f);
  view.mutableHostData<float>()[1] = 100.0f;
  EXPECT_EQ(owner.hostData<float>()[3], 100.0f);
  Tensor viewOfView = view.getUnowned({2}, 1);
  EXPECT_EQ(viewOfView.hostData<float>()[0], 100.0f);
  EXPECT_EQ(viewOfView.offsetInBytes(), 12u);
}

TEST_F(TensorTest, ViewOutlivesItsOwner) {
  Tensor view;
  {
    Tensor owner(ElemKind::Int32, {4}, "o");
    owner.mutableHostData<int32_t>()[3] = 42;
    view = owner.getUnowned({2}, 2);
  }
  EXPECT_EQ(view.hostData<int32_t>()[1], 42);
}

TEST_F(TensorTest, ViewOutsideTheOwnerIsAViolation) {
  Tensor owner(ElemKind::Float32, {8}, "o");
  EXPECT_VIOLATION(owner.getUnowned({4}, 5), ViolationKind::ViewOutOfBounds);
  EXPECT_VIOLATION(owner.getUnowned({9}), ViolationKind::ViewOutOfBounds);
  EXPECT_VIOLATION(owner.getUnowned({2}, size_t(-1)),
                   ViolationKind::ViewOutOfBounds);
}

TEST_F(TensorTest, CloneIsIndependent) {
  Tensor a(ElemKind::Float32, {4}, "a");
  fill(a, 1);
  Tensor b = a.clone();
  EXPECT_FALSE(b.sharesResidencyWith(a));
  EXPECT_NE(&b.residency(), &a.residency());
  b.mutableHostData<float>()[0] = -1;
  EXPECT_EQ(a.hostData<float>()[0], 1.0f);
  EXPECT_EQ(b.hostData<float>()[1], 2.0f);
  Tensor v = a.getUnowned({2}, 2);
  Tensor vc = v.clone();
  EXPECT_FALSE(vc.isView());
  EXPECT_TRUE(vc.coversStorage());
  EXPECT_EQ(vc.hostData<float>()[0], 3.0f);
}

TEST_F(TensorTest, AFilledTensorHoldsWhatItsFillWroteOverAllItsBytes) {
  size_t seen = 0;
  Tensor t(Type{ElemKind::Int32, {3}}, "t", [&](std::span<std::byte> b) {
    seen = b.size();
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = std::byte(i + 1);
  });
  EXPECT_EQ(seen, 12u);
  EXPECT_EQ(t.name(), "t");
  EXPECT_EQ(t.residencySnapshot().state, ResidencyState::Host);
  auto bytes = t.hostBytes();
  ASSERT_EQ(bytes.size(), 12u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u);
  for (size_t i = 0; i < bytes.size(); ++i)
    EXPECT_EQ(bytes[i], std::byte(i + 1)) << "byte " << i;
  bool called = false;
  EXPECT_VIOLATION(Tensor(Type{ElemKind::Int32, {}}, "bad",
                          [&](std::span<std::byte>) { called = true; }),
                   ViolationKind::InvalidTensorType);
  EXPECT_FALSE(called) << "an invalid type is refused before any storage";
}

TEST_F(TensorTest, MoveLeavesAnEmptySourceAndUsingItIsAViolation) {
  Tensor a(ElemKind::Float32, {4}, "a");
  fill(a, 5);
  const ResidencyRecord *record = &a.residency();
  Tensor b(std::move(a));
  EXPECT_TRUE(a.isEmpty());
  EXPECT_EQ(a.sizeInBytes(), 0u);
  EXPECT_EQ(&b.residency(), record);
  EXPECT_EQ(b.hostData<float>()[0], 5.0f);
  EXPECT_VIOLATION(a.hostBytes(), ViolationKind::UseOfMovedFrom);
  EXPECT_VIOLATION(a.mutableHostBytes(), ViolationKind::UseOfMovedFrom);
  EXPECT_VIOLATION(a.clone(), ViolationKind::UseOfMovedFrom);
  EXPECT_VIOLATION(a.getUnowned({1}), ViolationKind::UseOfMovedFrom);
  EXPECT_VIOLATION(a.residency(), ViolationKind::UseOfMovedFrom);
  // A moved-from tensor can be assigned to again.
  a = Tensor(ElemKind::Int32, {1}, "again");
  EXPECT_FALSE(a.isEmpty());
}

TEST_F(TensorTest, MoveAssignReplacesAndSelfMoveIsANoOp) {
  Tensor a(ElemKind::Float32, {2}, "a");
  Tensor b(ElemKind::Float32, {3}, "b");
  fill(b, 7);
  Tensor keepOldA = a.getUnowned({2});
  a = std::move(b);
  EXPECT_TRUE(b.isEmpty());
  EXPECT_EQ(a.dims(), std::vector<size_t>{3});
  EXPECT_EQ(a.hostData<float>()[2], 9.0f);
  EXPECT_EQ(keepOldA.sizeInBytes(), 8u) << "a view keeps the old storage";
  Tensor &alias = a;
  a = std::move(alias);
  EXPECT_FALSE(a.isEmpty());
  EXPECT_EQ(a.hostData<float>()[0], 7.0f);
}

TEST_F(TensorTest, RefillChecksTheSize) {
  Tensor a(ElemKind::Int32, {2}, "a");
  int32_t values[2] = {3, 4};
  EXPECT_FALSE(a.refillFromHost(std::as_bytes(std::span(values))));
  EXPECT_EQ(a.hostData<int32_t>()[1], 4);
  Error e = a.refillFromHost(std::as_bytes(std::span(values, 1)));
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
}

namespace {
/// Whether the process may read the byte at \p address, asked of the kernel
/// (a write from it into a pipe fails with EFAULT) rather than by touching
/// it, so that a test of no-access pages needs no signal.
bool readable(const std::byte *address) {
  int fds[2];
  if (pipe(fds) != 0)
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
  bool ok = write(fds[1], address, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return ok;
}
} // namespace

TEST_F(TensorTest, LargeGuardedStorageLiesBetweenPagesNoOneMayTouch) {
  // A backend that writes far outside a buffer (a chunk at a wrong
  // multiple of a staging buffer) must fault at the write, not corrupt
  // the heap. Storage of other sizes reuses a freed one's mapping.
  HostGuardScope guards;
  for (size_t elements : {20000, 16384, 20000, 30000}) {
    Tensor t(ElemKind::Float32, {elements}, "t");
    size_t bytes = t.sizeInBytes();
    const std::byte *start = t.hostBytes().data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(start) % 64, 0u);
    EXPECT_TRUE(readable(start - HostGuardBytes));
    EXPECT_TRUE(readable(start + bytes + HostGuardBytes - 1));
    EXPECT_FALSE(readable(start - HostGuardBytes - 1));
    // Past the last page, as far as a misplaced chunk of a large transfer.
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    const std::byte *pastPages =
        start + (bytes + HostGuardBytes + page - 1) / page * page;
    EXPECT_FALSE(readable(pastPages));
    EXPECT_FALSE(readable(start + bytes + (size_t(32) << 20)));
    EXPECT_FALSE(readable(start - (size_t(32) << 20)));
  }
}
