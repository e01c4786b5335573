//===- BasicsTest.cpp - Errors, names, types, handles, faults -------------===//
#include "drt/BackendRegistry.h"
#include "drt/DeviceConfig.h"
#include "drt/Error.h"
#include "drt/FaultPlan.h"
#include "drt/LocationTable.h"
#include "drt/PathUse.h"
#include "drt/Type.h"
#include "drt/Violation.h"

#include <gtest/gtest.h>

#include <iterator>
#include <stdexcept>
#include <string_view>
#include <thread>

using namespace drt;

TEST(Error, SuccessIsFalseAndFailureCarriesCodeAndMessage) {
  Error ok = Error::success();
  EXPECT_FALSE(ok);
  EXPECT_TRUE(ok.isSuccess());
  Error e(ErrorCode::OutOfMemory, "tensor 'a' needs 16 bytes");
  EXPECT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(e.toString(), "OutOfMemory: tensor 'a' needs 16 bytes");
}

TEST(Error, ExpectedHoldsValueOrError) {
  Expected<int> v(7);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 7);
  EXPECT_TRUE(v.takeError().isSuccess());
  Expected<int> f(makeError(ErrorCode::DeviceLost, "gone"));
  EXPECT_FALSE(f);
  EXPECT_EQ(f.takeError().code(), ErrorCode::DeviceLost);
}

TEST(Names, EveryNameParsesBack) {
  for (ErrorCode c :
       {ErrorCode::Success, ErrorCode::OutOfMemory, ErrorCode::InvalidArgument,
        ErrorCode::NotSupported, ErrorCode::DeviceError, ErrorCode::DeviceLost})
    EXPECT_EQ(parseErrorCode(errorCodeName(c)), c);
  for (ElemKind k : AllElemKinds)
    EXPECT_EQ(parseElemKind(elemKindName(k)), k);
  for (FaultSite s : {FaultSite::Allocation, FaultSite::TransferToDevice,
                      FaultSite::TransferFromDevice, FaultSite::Run})
    EXPECT_EQ(parseFaultSite(faultSiteName(s)), s);
  for (ViolationKind k :
       {ViolationKind::HostAccessWhileOnDevice,
        ViolationKind::HostAccessWhileLost, ViolationKind::UseOfMovedFrom,
        ViolationKind::ViewOutOfBounds, ViolationKind::InvalidTensorType})
    EXPECT_EQ(parseViolationKind(violationKindName(k)), k);
  EXPECT_FALSE(parseErrorCode("Nope"));
  EXPECT_FALSE(parseElemKind("f64"));
  EXPECT_FALSE(parseElemKind("F16"));
}

TEST(Type, EveryKindHasItsNameSizeAndClass) {
  struct Expected {
    ElemKind kind;
    std::string_view name;
    size_t size;
    bool floatingPoint;
  };
  const Expected all[] = {{ElemKind::Float32, "f32", 4, true},
                          {ElemKind::Int32, "i32", 4, false},
                          {ElemKind::Int64, "i64", 8, false},
                          {ElemKind::UInt8, "u8", 1, false},
                          {ElemKind::Float16, "f16", 2, true},
                          {ElemKind::BFloat16, "bf16", 2, true}};
  ASSERT_EQ(AllElemKinds.size(), std::size(all));
  for (size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EQ(AllElemKinds[i], all[i].kind);
    EXPECT_EQ(elemKindName(all[i].kind), all[i].name);
    EXPECT_EQ(elemSize(all[i].kind), all[i].size) << all[i].name;
    EXPECT_EQ(isFloatingPoint(all[i].kind), all[i].floatingPoint)
        << all[i].name;
  }
}

TEST(Type, SizesAndPrinting) {
  Type t{ElemKind::Float32, {2, 3}};
  EXPECT_EQ(t.numElements(), 6u);
  EXPECT_EQ(t.sizeInBytes(), 24u);
  EXPECT_EQ(t.toString(), "f32[2x3]");
  EXPECT_EQ((Type{ElemKind::UInt8, {5}}).sizeInBytes(), 5u);
  EXPECT_EQ((Type{ElemKind::Int64, {5}}).sizeInBytes(), 40u);
  EXPECT_EQ((Type{ElemKind::Float16, {5}}).sizeInBytes(), 10u);
  EXPECT_EQ((Type{ElemKind::BFloat16, {2, 3}}).toString(), "bf16[2x3]");
}

TEST(LocationTable, ReleasedAndForgedHandlesAreRejected) {
  LocationTable<int> table;
  DeviceLocation a = table.insert(1);
  DeviceLocation b = table.insert(2);
  EXPECT_NE(a, b);
  ASSERT_NE(table.lookup(a), nullptr);
  EXPECT_EQ(*table.lookup(a), 1);
  EXPECT_TRUE(table.erase(a));
  EXPECT_EQ(table.lookup(a), nullptr);
  EXPECT_FALSE(table.erase(a)) << "double release must be detected";
  // The slot is reused with a new generation: the old handle stays stale.
  DeviceLocation c = table.insert(3);
  EXPECT_NE(c, a);
  EXPECT_EQ(table.lookup(a), nullptr);
  EXPECT_EQ(*table.lookup(c), 3);
  EXPECT_EQ(table.lookup(DeviceLocation{}), nullptr);
  EXPECT_EQ(table.lookup(DeviceLocation{0xdeadbeef00000042ull}), nullptr);
  EXPECT_EQ(table.size(), 2u);
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.lookup(b), nullptr);
}

TEST(LocationTable, AHandleOfAnotherTableIsUnknownThoughItsSlotIsLiveThere) {
  // Two devices' tables both start at slot 0, generation 1; they may be
  // of two backends, each with its own kind of entry.
  LocationTable<int> first;
  LocationTable<long> second;
  DeviceLocation a = first.insert(1);
  DeviceLocation b = second.insert(2);
  EXPECT_NE(a, b);
  EXPECT_EQ(second.lookup(a), nullptr);
  EXPECT_FALSE(second.erase(a));
  ASSERT_NE(second.lookup(b), nullptr);
  EXPECT_EQ(*second.lookup(b), 2);
  EXPECT_EQ(*first.lookup(a), 1);
  EXPECT_EQ(a.toString(), "loc#1.1");
}

TEST(PathCounter, CountsUsesAndUsesThatBeganWhileAnotherWasInside) {
  PathCounter path("copy", true);
  EXPECT_EQ(path.read().name, "copy");
  EXPECT_TRUE(path.read().concurrent);
  {
    PathCounter::Scope first = path.enter();
    // Another thread enters while the first use is inside: an overlap.
    std::thread([&] { PathCounter::Scope second = path.enter(); }).join();
    EXPECT_EQ(path.read().overlaps, 1u);
    // A use moved on is still one use until its last holder ends it.
    PathCounter::Scope moved = std::move(first);
  }
  // Both ended: the next use overlaps nothing.
  { PathCounter::Scope third = path.enter(); }
  path.countUse();
  PathUse use = path.read();
  EXPECT_EQ(use.uses, 4u);
  EXPECT_EQ(use.overlaps, 1u);
}

TEST(FaultPlan, StrikesTheNthOperationOnce) {
  FaultPlan plan;
  EXPECT_TRUE(plan.add({FaultSite::Allocation, 0, ErrorCode::DeviceError}));
  EXPECT_TRUE(plan.add({FaultSite::Allocation, 1, ErrorCode::Success}));
  ASSERT_FALSE(plan.add({FaultSite::Allocation, 2, ErrorCode::OutOfMemory}));
  EXPECT_FALSE(plan.strike(FaultSite::Run));
  EXPECT_FALSE(plan.strike(FaultSite::Allocation));
  EXPECT_EQ(plan.strike(FaultSite::Allocation), ErrorCode::OutOfMemory);
  EXPECT_FALSE(plan.strike(FaultSite::Allocation));
  EXPECT_EQ(plan.pending(), 0u);
}

TEST(DeviceConfig, ParametersParseOrNameTheProblem) {
  DeviceConfig c;
  c.name = "dev";
  c.parameters = {{"n", "12"}, {"bad", "12x"}, {"flag", "on"}, {"b2", "maybe"}};
  EXPECT_EQ(*c.uintParameter("n", 0), 12u);
  EXPECT_EQ(*c.uintParameter("absent", 5), 5u);
  Error e = c.uintParameter("bad", 0).takeError();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("'bad'"), std::string::npos);
  EXPECT_NE(e.message().find("12x"), std::string::npos);
  EXPECT_TRUE(*c.boolParameter("flag", false));
  EXPECT_FALSE(c.boolParameter("b2", false));
}

TEST(BackendRegistry, UnknownNameListsTheRegisteredOnes) {
  auto d = BackendRegistry::instance().create("no-such-backend", {});
  ASSERT_FALSE(d);
  Error e = d.takeError();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("no-such-backend"), std::string::npos);
  EXPECT_NE(e.message().find("registered backends"), std::string::npos);
}

TEST(BackendRegistry, AFactoryThatThrowsIsADeviceErrorNamingWhatItThrew) {
  BackendInfo b{"basics-test-throws", "a factory that throws", Capabilities{},
                [](const DeviceConfig &) -> std::unique_ptr<DeviceManager> {
                  throw std::runtime_error("no such driver table entry");
                },
                true};
  BackendRegistry::instance().add(b);
  DeviceConfig config;
  config.name = "d7";
  auto d = BackendRegistry::instance().create(b.name, config);
  ASSERT_FALSE(d);
  Error e = d.takeError();
  EXPECT_EQ(e.code(), ErrorCode::DeviceError);
  EXPECT_EQ(e.message(), "backend 'basics-test-throws' threw while creating "
                         "device 'd7': no such driver table entry (a backend "
                         "reports failures as an Error)");
}

/// A backend that only declares: parameters and capabilities, no devices.
const BackendInfo &declaringBackend() {
  static const BackendInfo info = [] {
    BackendInfo b{"basics-test", "declares parameters", Capabilities{},
                  [](const DeviceConfig &) -> std::unique_ptr<DeviceManager> {
                    return nullptr;
                  },
                  true};
    b.parameters = {
        BackendParameter::boolean("flag", false, "declares async"),
        BackendParameter::unsignedInRange("level", 2, 1, 8, "a level", {4, 8}),
        BackendParameter::text("label", "any label"),
    };
    b.capabilitiesFor = [](const DeviceConfig &c) {
      Capabilities caps;
      caps.asynchronousCompletion = *c.boolParameter("flag", false);
      return caps;
    };
    BackendRegistry::instance().add(b);
    return b;
  }();
  return info;
}

TEST(BackendParameter, ChecksValuesAndNamesWhatIsAllowed) {
  BackendParameter level =
      BackendParameter::unsignedInRange("level", 2, 1, 8, "a level", {2, 8});
  EXPECT_EQ(level.testValues, (std::vector<std::string>{"2", "8"}));
  EXPECT_FALSE(level.check("8", "dev"));
  EXPECT_EQ(level.check("9", "dev").message(),
            "dev: parameter 'level' must be an integer from 1 to 8, got '9'");
  EXPECT_TRUE(level.check("0x2", "dev"));
  level.powerOfTwo = true;
  EXPECT_TRUE(level.check("6", "dev"));
  EXPECT_EQ(level.allowedValues(), "a power of two from 1 to 8");
  BackendParameter flag = BackendParameter::boolean("flag", true, "a flag");
  EXPECT_EQ(flag.testValues, (std::vector<std::string>{"1", "0"}));
  EXPECT_FALSE(flag.check("off", "dev"));
  EXPECT_EQ(flag.check("maybe", "dev").code(), ErrorCode::InvalidArgument);
  EXPECT_FALSE(BackendParameter::text("t", "text").check("", "dev"));
  BackendParameter mode = BackendParameter::choice(
      "mode", "auto", {"auto", "1", "0"}, "a mode", {"auto", "1"});
  EXPECT_EQ(mode.testValues, (std::vector<std::string>{"auto", "1"}));
  EXPECT_FALSE(mode.check("0", "dev"));
  EXPECT_EQ(mode.check("on", "dev").message(),
            "dev: parameter 'mode' must be one of auto, 1, 0, got 'on'");
}

TEST(BackendParameter, UnknownKeysAreRejectedNamingTheKnownOnes) {
  DeviceConfig c;
  c.parameters = {{"flag", "1"}, {"colour", "red"}};
  Error e = checkParameters(c, declaringBackend().parameters, "device 'x'");
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(e.message(), "device 'x': unknown parameter 'colour' (known: "
                         "flag, level, label)");
  c.parameters = {{"flag", "1"}, {"level", "8"}, {"label", "anything"}};
  EXPECT_FALSE(checkParameters(c, declaringBackend().parameters, "x"));
}

TEST(BackendRegistry, QualifiedParametersReachOnlyTheirBackend) {
  ParameterMap given = {{"a", "1"},
                        {"fake:a", "2"},
                        {"opencl:b", "3"},
                        {"mutant:double-free:c", "4"}};
  EXPECT_EQ(BackendRegistry::parametersFor("fake", given),
            (ParameterMap{{"a", "2"}}));
  EXPECT_EQ(BackendRegistry::parametersFor("opencl", given),
            (ParameterMap{{"a", "1"}, {"b", "3"}}));
  EXPECT_EQ(BackendRegistry::parametersFor("mutant:double-free", given),
            (ParameterMap{{"a", "1"}, {"c", "4"}}));
  EXPECT_EQ(BackendRegistry::parametersFor("mutant", given),
            (ParameterMap{{"a", "1"}}));
}

TEST(BackendRegistry, CapabilitiesForAConfigurationNeedNoDevice) {
  const std::string name = declaringBackend().name;
  BackendRegistry &registry = BackendRegistry::instance();
  auto plain = registry.capabilitiesFor(name, {});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->asynchronousCompletion);
  auto flagged = registry.capabilitiesFor(name, {{"flag", "1"}});
  ASSERT_TRUE(flagged);
  EXPECT_TRUE(flagged->asynchronousCompletion);
  auto other = registry.capabilitiesFor(name, {{"fake:flag", "1"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->asynchronousCompletion);
  Error bad = registry.capabilitiesFor(name, {{"level", "9"}}).takeError();
  EXPECT_EQ(bad.message(), "backend 'basics-test': parameter 'level' must be "
                           "an integer from 1 to 8, got '9'");
  EXPECT_EQ(registry.capabilitiesFor("no-such-backend", {}).takeError().code(),
            ErrorCode::InvalidArgument);
}

TEST(BackendRegistry, ConfigurationsToTestCoverEveryValueThenCombineThem) {
  const std::string name = declaringBackend().name;
  BackendRegistry &registry = BackendRegistry::instance();
  auto all = registry.configurationsToTest(name);
  ASSERT_TRUE(all);
  // One factor at a time, then one combined configuration per round of
  // the most non-default values (level has two): each value of level
  // meets the non-default flag.
  EXPECT_EQ(*all, (std::vector<ParameterMap>{{},
                                             {{"flag", "1"}},
                                             {{"level", "4"}},
                                             {{"level", "8"}},
                                             {{"flag", "1"}, {"level", "4"}},
                                             {{"flag", "1"}, {"level", "8"}}}));
  auto fixed = registry.configurationsToTest(name, {{"level", "8"}});
  ASSERT_TRUE(fixed);
  EXPECT_EQ(*fixed, (std::vector<ParameterMap>{
                        {{"level", "8"}}, {{"flag", "1"}, {"level", "8"}}}));
  Error bad =
      registry.configurationsToTest(name, {{"colour", "red"}}).takeError();
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("unknown parameter 'colour'"),
            std::string::npos);
}

TEST(BackendRegistry, EveryPairOfNonDefaultValuesMeetsInAConfiguration) {
  // Two parameters of two non-default values each: the rounds pair values
  // of the same rank (256 with 1, 64 with 0); the other two pairs get a
  // configuration each.
  static const std::string name = [] {
    BackendInfo b{"basics-test-pairs",
                  "declares two parameters of three "
                  "test values",
                  Capabilities{},
                  [](const DeviceConfig &) -> std::unique_ptr<DeviceManager> {
                    return nullptr;
                  },
                  true};
    b.parameters = {
        BackendParameter::unsignedInRange("page", 4096, 64, 4096, "",
                                          {256, 64}),
        BackendParameter::unsignedInRange("every", 8, 0, 8, "", {1, 0})};
    BackendRegistry::instance().add(b);
    return b.name;
  }();
  auto all = BackendRegistry::instance().configurationsToTest(name);
  ASSERT_TRUE(all);
  EXPECT_EQ(*all,
            (std::vector<ParameterMap>{{},
                                       {{"page", "256"}},
                                       {{"page", "64"}},
                                       {{"every", "1"}},
                                       {{"every", "0"}},
                                       {{"every", "1"}, {"page", "256"}},
                                       {{"every", "0"}, {"page", "64"}},
                                       {{"every", "0"}, {"page", "256"}},
                                       {{"every", "1"}, {"page", "64"}}}));
}

/// A backend with a parameter that matters only with another one set.
const std::string &dependentBackend() {
  static const std::string name = [] {
    BackendInfo b{"basics-test-dependent", "declares a dependent parameter",
                  Capabilities{},
                  [](const DeviceConfig &) -> std::unique_ptr<DeviceManager> {
                    return nullptr;
                  },
                  true};
    BackendParameter chunk =
        BackendParameter::unsignedInRange("chunk", 8, 1, 64, "a chunk", {2});
    chunk.testedWith = {{"staged", "1"}};
    BackendParameter broken =
        BackendParameter::unsignedInRange("broken", 1, 1, 2, "", {2});
    b.parameters = {BackendParameter::boolean("staged", false, "stages"),
                    chunk};
    BackendRegistry::instance().add(b);
    broken.testedWith = {{"staged", "maybe"}};
    b.name = "basics-test-broken";
    b.parameters.push_back(broken);
    BackendRegistry::instance().add(b);
    return std::string("basics-test-dependent");
  }();
  return name;
}

TEST(BackendRegistry, AParameterIsTestedWithTheSettingsItNeeds) {
  BackendRegistry &registry = BackendRegistry::instance();
  const std::string &name = dependentBackend();
  auto all = registry.configurationsToTest(name);
  ASSERT_TRUE(all);
  EXPECT_EQ(*all,
            (std::vector<ParameterMap>{
                {}, {{"staged", "1"}}, {{"chunk", "2"}, {"staged", "1"}}}));
  auto staged = registry.configurationsToTest(name, {{"staged", "1"}});
  ASSERT_TRUE(staged);
  EXPECT_EQ(*staged,
            (std::vector<ParameterMap>{{{"staged", "1"}},
                                       {{"chunk", "2"}, {"staged", "1"}}}));
  // Staging fixed off: a chunk size would test nothing.
  auto unstaged = registry.configurationsToTest(name, {{"staged", "0"}});
  ASSERT_TRUE(unstaged);
  EXPECT_EQ(*unstaged, (std::vector<ParameterMap>{{{"staged", "0"}}}));
  Error bad = registry.configurationsToTest("basics-test-broken").takeError();
  EXPECT_EQ(bad.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("parameter 'broken' is tested with"),
            std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("'staged'"), std::string::npos) << bad.message();
}

TEST(Violation, ThrowingHandlerThrowsAndRestores) {
  {
    ScopedThrowingViolationHandler handler;
    try {
      reportViolation(ViolationKind::UseOfMovedFrom, "boom");
      FAIL() << "reportViolation returned";
    } catch (const ContractViolationError &v) {
      EXPECT_EQ(v.kind(), ViolationKind::UseOfMovedFrom);
      EXPECT_STREQ(v.what(), "boom");
    }
  }
  EXPECT_EQ(setViolationHandler(nullptr), nullptr)
      << "the scoped handler must restore the default";
}
