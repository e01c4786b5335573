//===- FunctionTest.cpp - The function model's verifier -------------------===//
#include "drt/Function.h"
#include "drt/ExecutionContext.h"

#include <gtest/gtest.h>

using namespace drt;

namespace {
Type f32(size_t n) { return Type{ElemKind::Float32, {n}}; }

Function addFunction() {
  Function f("add");
  f.addPlaceholder("a", f32(4)).addPlaceholder("b", f32(4));
  f.addPlaceholder("out", f32(4));
  f.addNode({OpKind::Add, {"a", "b"}, "out"});
  return f;
}

void expectInvalid(const Function &f, const std::string &fragment) {
  Error e = f.verify();
  ASSERT_TRUE(e) << "verify accepted a malformed function";
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
}
} // namespace

TEST(Function, WellFormedFunctionVerifies) {
  Function f = addFunction();
  EXPECT_FALSE(f.verify()) << f.verify().toString();
  EXPECT_EQ(f.outputNames(), std::vector<std::string>{"out"});
  EXPECT_EQ(f.inputNames(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.placeholderIndex("b"), 1);
  EXPECT_EQ(f.placeholderIndex("zz"), -1);
}

TEST(Function, MalformedFunctionsAreRejectedWithTheReason) {
  {
    Function f = addFunction();
    f.addPlaceholder("a", f32(4));
    expectInvalid(f, "declared twice");
  }
  {
    Function f("g");
    f.addPlaceholder("a", f32(4)).addPlaceholder("o", f32(4));
    f.addNode({OpKind::Add, {"a"}, "o"});
    expectInvalid(f, "expected 2");
  }
  {
    Function f("g");
    f.addPlaceholder("a", f32(4)).addPlaceholder("o", f32(3));
    f.addNode({OpKind::Relu, {"a"}, "o"});
    expectInvalid(f, "of type");
  }
  {
    Function f("g");
    f.addPlaceholder("a", Type{ElemKind::UInt8, {4}});
    f.addPlaceholder("o", Type{ElemKind::UInt8, {4}});
    f.addNode({OpKind::Copy, {"a"}, "o"});
    expectInvalid(f, "only f32 and i32");
  }
  {
    Function f("g");
    f.addPlaceholder("a", Type{ElemKind::Int32, {4}});
    f.addPlaceholder("o", Type{ElemKind::Int32, {4}});
    f.addNode({OpKind::Scale, {"a"}, "o", 0.5});
    expectInvalid(f, "non-integral");
  }
  {
    Function f("g");
    f.addPlaceholder("a", f32(4)).addPlaceholder("o", f32(4));
    f.addPlaceholder("p", f32(4));
    f.addNode({OpKind::Copy, {"p"}, "o"});
    f.addNode({OpKind::Copy, {"a"}, "p"});
    expectInvalid(f, "before a node writes it");
  }
  {
    Function f("g");
    f.addPlaceholder("a", f32(4)).addPlaceholder("o", f32(4));
    f.addNode({OpKind::Copy, {"a"}, "o"});
    f.addNode({OpKind::Relu, {"a"}, "o"});
    expectInvalid(f, "written by two nodes");
  }
  {
    Function f("g");
    f.addPlaceholder("a", f32(4));
    f.addNode({OpKind::Copy, {"a"}, "nowhere"});
    expectInvalid(f, "unknown placeholder");
  }
  expectInvalid(Function(""), "has no name");
}

TEST(PlaceholderBindings, BindAllocateAndUnbind) {
  PlaceholderBindings b;
  Tensor t(ElemKind::Float32, {2}, "t");
  b.bind("x", t);
  EXPECT_EQ(b.get("x"), &t);
  Tensor &owned = b.allocate("y", f32(3));
  EXPECT_EQ(b.get("y"), &owned);
  EXPECT_EQ(owned.sizeInBytes(), 12u);
  b.unbind("x");
  EXPECT_EQ(b.get("x"), nullptr);
  EXPECT_EQ(b.all().size(), 1u);
}
