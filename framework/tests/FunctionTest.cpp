//===- FunctionTest.cpp - The function model's verifier -------------------===//
#include "drt/Function.h"
#include "drt/ExecutionContext.h"

#include <gtest/gtest.h>

#include <cmath>

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
    f.addPlaceholder("a", Type{ElemKind::Int32, {4}});
    f.addPlaceholder("o", Type{ElemKind::Int32, {4}});
    f.addNode({OpKind::Scale, {"a"}, "o", 0.5});
    expectInvalid(f, "not an integer the kind holds");
  }
  {
    Function f("g");
    f.addPlaceholder("a", Type{ElemKind::Float16, {4}});
    f.addPlaceholder("o", Type{ElemKind::Float16, {4}});
    f.addNode({OpKind::Scale, {"a"}, "o", HUGE_VAL});
    expectInvalid(f, "non-finite factor");
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

Function scaleFunction(ElemKind kind, double factor) {
  Function f("scale");
  f.addPlaceholder("a", Type{kind, {4}}).addPlaceholder("o", Type{kind, {4}});
  f.addNode({OpKind::Scale, {"a"}, "o", factor});
  return f;
}

TEST(Function, EveryOpRunsOverEveryElementKind) {
  for (ElemKind kind : AllElemKinds) {
    Type t{kind, {3, 2}};
    Function f("all");
    f.addPlaceholder("a", t).addPlaceholder("b", t);
    for (const char *out : {"sum", "prod", "act", "scaled", "copied"})
      f.addPlaceholder(out, t);
    f.addNode({OpKind::Add, {"a", "b"}, "sum"});
    f.addNode({OpKind::Mul, {"a", "b"}, "prod"});
    f.addNode({OpKind::Relu, {"prod"}, "act"});
    f.addNode({OpKind::Scale, {"act"}, "scaled", 3});
    f.addNode({OpKind::Copy, {"scaled"}, "copied"});
    EXPECT_FALSE(f.verify())
        << elemKindName(kind) << ": " << f.verify().toString();
  }
}

TEST(Function, IntegerScaleFactorsMustBeIntegersTheKindHolds) {
  struct Case {
    ElemKind kind;
    double factor;
    bool valid;
  };
  const Case cases[] = {
      {ElemKind::Int32, -2147483648.0, true},
      {ElemKind::Int32, 2147483647.0, true},
      {ElemKind::Int32, 2147483648.0, false},
      {ElemKind::Int32, -2147483649.0, false},
      {ElemKind::Int32, 2.5, false},
      {ElemKind::Int64, -9223372036854775808.0, true},
      {ElemKind::Int64, 9223372036854774784.0, true}, // largest double < 2^63
      {ElemKind::Int64, 9223372036854775808.0, false},
      {ElemKind::Int64, -0.5, false},
      {ElemKind::UInt8, 0, true},
      {ElemKind::UInt8, 255, true},
      {ElemKind::UInt8, 256, false},
      {ElemKind::UInt8, -1, false},
      {ElemKind::UInt8, 1.5, false},
      // Float kinds take any finite factor: it is rounded to the kind.
      {ElemKind::Float32, 0.3, true},
      {ElemKind::Float16, 1e30, true},
      {ElemKind::BFloat16, -1e-300, true},
      {ElemKind::BFloat16, NAN, false},
  };
  for (const Case &c : cases) {
    Error e = scaleFunction(c.kind, c.factor).verify();
    EXPECT_EQ(!e, c.valid) << elemKindName(c.kind) << " scale by " << c.factor
                           << ": " << e.toString();
    if (!e)
      continue;
    EXPECT_NE(e.message().find("node 0 (scale)"), std::string::npos)
        << "the error names the node: " << e.message();
    if (std::isfinite(c.factor)) {
      EXPECT_NE(e.message().find("scales " + std::string(elemKindName(c.kind))),
                std::string::npos)
          << e.message();
    }
  }
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
