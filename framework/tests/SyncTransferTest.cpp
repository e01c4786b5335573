//===- SyncTransferTest.cpp - The blocking helpers' waiting ---------------===//
#include "drt/SyncTransfer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace drt;

TEST(SyncTransfer, AnInlineCallbackIsTheHelpersResult) {
  Error e = waitForCompletion([](CompletionCallback done) {
    EXPECT_TRUE(callerWaitsForCompletion());
    done(makeError(ErrorCode::OutOfMemory, "inline"));
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_FALSE(callerWaitsForCompletion());
}

TEST(SyncTransfer, ACallbackFromAnotherThreadIsWaitedFor) {
  std::thread later;
  Error e = waitForCompletion([&](CompletionCallback done) {
    later = std::thread([done = std::move(done)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done(makeError(ErrorCode::DeviceLost, "later"));
    });
  });
  later.join();
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::DeviceLost);
}

// A run stages its inputs with helpers inside its own helper's start: each
// waits on what it started and gets its own callback's result, however the
// thread reuses what it waits on.
TEST(SyncTransfer, NestedHelpersEachGetTheirOwnResult) {
  for (int round = 0; round < 3; ++round) {
    Error inner = Error::success();
    Error outer = waitForCompletion([&](CompletionCallback done) {
      inner = waitForCompletion([](CompletionCallback innerDone) {
        innerDone(makeError(ErrorCode::InvalidArgument, "inner"));
      });
      done(makeError(ErrorCode::NotSupported, "outer"));
    });
    ASSERT_TRUE(inner);
    EXPECT_EQ(inner.code(), ErrorCode::InvalidArgument);
    ASSERT_TRUE(outer);
    EXPECT_EQ(outer.code(), ErrorCode::NotSupported);
    EXPECT_FALSE(waitForCompletion(
        [](CompletionCallback done) { done(Error::success()); }));
  }
}

// A callback kept past the helper's return (as a backend that completes
// late may) still holds what it completes: the helpers the thread makes
// meanwhile wait on something else and are not disturbed by it.
TEST(SyncTransfer, ACallbackThatOutlivesItsHelperTouchesNoLaterOne) {
  CompletionCallback kept;
  Error first = waitForCompletion([&](CompletionCallback done) {
    kept = done;
    done(makeError(ErrorCode::DeviceError, "first"));
  });
  ASSERT_TRUE(first);
  EXPECT_EQ(first.code(), ErrorCode::DeviceError);
  std::thread late;
  Error second = waitForCompletion([&](CompletionCallback done) {
    late = std::thread([done = std::move(done), &kept] {
      kept(makeError(ErrorCode::OutOfMemory, "late call of the first"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done(makeError(ErrorCode::DeviceLost, "second"));
    });
  });
  late.join();
  ASSERT_TRUE(second);
  EXPECT_EQ(second.code(), ErrorCode::DeviceLost);
}
