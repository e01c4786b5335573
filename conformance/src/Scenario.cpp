//===- Scenario.cpp - Residency scenarios ---------------------------------===//
#include "drt/conformance/Scenario.h"

#include "drt/conformance/ChoiceSource.h"

#include "ElementArithmetic.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace drt::conformance {

std::string_view commandKindName(CommandKind kind) {
  switch (kind) {
  case CommandKind::Create:
    return "create";
  case CommandKind::View:
    return "view";
  case CommandKind::Clone:
    return "clone";
  case CommandKind::MoveConstruct:
    return "move-construct";
  case CommandKind::MoveAssign:
    return "move-assign";
  case CommandKind::SelfMove:
    return "self-move";
  case CommandKind::Destroy:
    return "destroy";
  case CommandKind::ToDevice:
    return "to-device";
  case CommandKind::FromDevice:
    return "from-device";
  case CommandKind::Release:
    return "release";
  case CommandKind::DoubleRelease:
    return "double-release";
  case CommandKind::Read:
    return "read";
  case CommandKind::Write:
    return "write";
  case CommandKind::Refill:
    return "refill";
  case CommandKind::AddNetwork:
    return "add-network";
  case CommandKind::Run:
    return "run";
  case CommandKind::EvictNetwork:
    return "evict-network";
  case CommandKind::EnsureOutputs:
    return "ensure-outputs";
  case CommandKind::Shutdown:
    return "shutdown";
  case CommandKind::InjectFault:
    return "inject-fault";
  case CommandKind::Alloc:
    return "alloc";
  case CommandKind::Free:
    return "free";
  }
  return "?";
}

std::array<std::string_view, 2> Outcome::textParts() const {
  switch (kind) {
  case Kind::Ok:
    return {"ok", ""};
  case Kind::Error:
    return {"error ", errorCodeName(code)};
  case Kind::Violation:
    return {"violation ", violationKindName(violation)};
  }
  return {"?", ""};
}

std::string Outcome::toString() const {
  auto [kindText, name] = textParts();
  return std::string(kindText) + std::string(name);
}

bool operator==(const Command &a, const Command &b) {
  return a.kind == b.kind && a.target == b.target && a.source == b.source &&
         a.device == b.device && a.elemKind == b.elemKind && a.dims == b.dims &&
         a.offset == b.offset && a.pattern == b.pattern &&
         a.release == b.release && a.location == b.location &&
         a.bytes == b.bytes && a.fault.site == b.fault.site &&
         a.fault.nth == b.fault.nth && a.fault.code == b.fault.code &&
         a.nodes == b.nodes && a.declared == b.declared &&
         a.bindings == b.bindings && a.expect == b.expect &&
         a.noWait == b.noWait && a.sync == b.sync &&
         a.inCallback == b.inCallback && a.branch == b.branch;
}

bool completesThroughCallback(CommandKind kind) {
  return kind == CommandKind::ToDevice || kind == CommandKind::FromDevice ||
         kind == CommandKind::Run;
}

bool issuableInCallback(CommandKind kind) {
  return kind == CommandKind::ToDevice || kind == CommandKind::FromDevice ||
         kind == CommandKind::Release || kind == CommandKind::Shutdown;
}

std::string inCallbackProblem(const std::vector<Command> &commands, size_t i) {
  const Command &c = commands[i];
  const Command *before = i > 0 ? &commands[i - 1] : nullptr;
  if (!issuableInCallback(c.kind) || c.sync || c.noWait || c.branch != 0)
    return "only to-device, from-device, release and shutdown of the "
           "sequential part, neither 'sync' nor '&', can be issued from "
           "inside a callback ('in-callback')";
  if (!before || !completesThroughCallback(before->kind) || before->sync ||
      before->noWait || before->inCallback || before->branch != 0)
    return "'in-callback' issues the command from inside the callback of the "
           "command before it, which must be a to-device, from-device or run "
           "of the sequential part written without 'sync', '&' and "
           "'in-callback'";
  if (i > 1 && commands[i - 2].noWait)
    return "a transfer issued with '&' is still pending when the command "
           "before it is issued: a command issued from inside a callback "
           "must not meet a busy record, which it would wait for on the "
           "backend's thread";
  return "";
}

bool mayFollowPendingWork(const Command &c, bool loneReadBack) {
  if (c.kind == CommandKind::Shutdown)
    return false;
  if (c.kind == CommandKind::InjectFault)
    return loneReadBack && c.fault.code != ErrorCode::DeviceLost;
  return true;
}

bool branchCommandKind(CommandKind kind) {
  switch (kind) {
  case CommandKind::ToDevice:
  case CommandKind::FromDevice:
  case CommandKind::Release:
  case CommandKind::Read:
  case CommandKind::Refill:
  case CommandKind::Run:
  case CommandKind::Shutdown:
  case CommandKind::InjectFault:
  case CommandKind::Destroy:
    return true;
  default:
    // Not write: its span is filled after mutableHostBytes returns, so a
    // transfer on another thread may read the buffer meanwhile (a race the
    // contract leaves to the program); refill copies under the record.
    // Nothing that creates a name or moves a tensor either: branches look
    // names up at the same time (a destroy keeps its name's entry until
    // the block ends).
    return false;
  }
}

std::vector<Placeholder>
networkPlaceholders(const std::vector<NetworkNode> &nodes, const Type &type) {
  std::vector<Placeholder> out;
  // At most every node's inputs and output: one allocation.
  size_t most = 0;
  for (const NetworkNode &n : nodes)
    most += n.inputs.size() + 1;
  out.reserve(most);
  auto note = [&](const std::string &name) {
    for (const Placeholder &p : out)
      if (p.name == name)
        return;
    out.push_back({name, type});
  };
  for (const NetworkNode &n : nodes) {
    for (const std::string &in : n.inputs)
      note(in);
    note(n.output);
  }
  return out;
}

bool networkWrites(const std::vector<NetworkNode> &nodes,
                   const std::string &name) {
  return std::any_of(nodes.begin(), nodes.end(),
                     [&](const NetworkNode &n) { return n.output == name; });
}

Function networkFunction(const Command &addNetwork) {
  Function f(addNetwork.target);
  Type type{addNetwork.elemKind, addNetwork.dims};
  if (!addNetwork.declared.empty())
    for (const std::string &name : addNetwork.declared)
      f.addPlaceholder(name, type);
  else
    for (const Placeholder &p : networkPlaceholders(addNetwork.nodes, type))
      f.addPlaceholder(p.name, p.type);
  for (const NetworkNode &n : addNetwork.nodes)
    f.addNode(Node{n.op, n.inputs, n.output, n.factor});
  return f;
}

namespace {

enum ValueClassTag : uint64_t {
  SpecialsTag = 1,
  ExtremesTag = 2,
  RoundingTag = 3,
  RandomTag = 4,
};

constexpr ValueClass ValueClassList[] = {
    {"specials", SpecialsTag *ValueClassBase,
     "float NaNs (quiet, signalling, payloads), infinities, signed zeros, "
     "+-1; integer extremes"},
    {"extremes", ExtremesTag *ValueClassBase,
     "float smallest and largest denormals, smallest normal, largest finite; "
     "integer min, max, -1, 0, 1, min+1, max-1"},
    {"rounding", RoundingTag *ValueClassBase,
     "float values near 1 whose sums and products round; integers whose "
     "products wrap"},
    {"random", RandomTag *ValueClassBase,
     "random bits (seeded by the variant) over the kind's whole range"},
};

/// The bits of a value-class list entry for each kind, in ElemKind order
/// (f32, i32, i64, u8, f16, bf16), as unsigned 64-bit numbers.
struct ClassValues {
  std::span<const uint64_t> byKind[6];
};

// specials: +inf, -inf, -0, +0, +1, -1, quiet NaN, signalling NaN (smallest
// payload), negative quiet NaN with a payload, negative signalling NaN with a
// payload. Neighbours differ, so add(x, y) over variants 0 and 1 meets
// inf - inf, -inf * -0, -0 + +0, 1 + -1 and NaN propagation.
constexpr uint64_t SpecialsF32[] = {
    0x7f800000, 0xff800000, 0x80000000, 0x00000000, 0x3f800000,
    0xbf800000, 0x7fc00000, 0x7f800001, 0xffc00001, 0xffa5a5a5};
constexpr uint64_t SpecialsF16[] = {0x7c00, 0xfc00, 0x8000, 0x0000, 0x3c00,
                                    0xbc00, 0x7e00, 0x7c01, 0xfe01, 0xfd5a};
constexpr uint64_t SpecialsBF16[] = {0x7f80, 0xff80, 0x8000, 0x0000, 0x3f80,
                                     0xbf80, 0x7fc0, 0x7f81, 0xffc1, 0xffa5};
// extremes, float: smallest denormal, largest denormal, smallest normal,
// largest finite, then the same negated. The first two add up to the third.
constexpr uint64_t ExtremesF32[] = {0x00000001, 0x007fffff, 0x00800000,
                                    0x7f7fffff, 0x80000001, 0x807fffff,
                                    0x80800000, 0xff7fffff};
constexpr uint64_t ExtremesF16[] = {0x0001, 0x03ff, 0x0400, 0x7bff,
                                    0x8001, 0x83ff, 0x8400, 0xfbff};
constexpr uint64_t ExtremesBF16[] = {0x0001, 0x007f, 0x0080, 0x7f7f,
                                     0x8001, 0x807f, 0x8080, 0xff7f};
// extremes, integer: min, max, -1, 0, 1, min+1, max-1 (u8: 0, 255, 1, 254
// and the signed byte's bounds 127, 128).
constexpr uint64_t ExtremesI32[] = {0x80000000, 0x7fffffff, 0xffffffff, 0,
                                    1,          0x80000001, 0x7ffffffe};
constexpr uint64_t ExtremesI64[] = {
    0x8000000000000000, 0x7fffffffffffffff, 0xffffffffffffffff, 0, 1,
    0x8000000000000001, 0x7ffffffffffffffe};
constexpr uint64_t ExtremesU8[] = {0, 255, 1, 254, 127, 128};
// rounding, float: 1, 1 + 1, 2 and 3 units in the last place, the float
// just below 1, half a unit of 1 and three quarters of one, 1/3 rounded,
// 3, -(1 + 1 unit). Sums of neighbours tie or fall between floats; products
// such as (1 + ulp)^2 and 3 * (1/3) round.
constexpr uint64_t RoundingF32[] = {
    0x3f800000, 0x3f800001, 0x3f800002, 0x3f800003, 0x3f7fffff,
    0x33800000, 0x33c00000, 0x3eaaaaab, 0x40400000, 0xbf800001};
constexpr uint64_t RoundingF16[] = {0x3c00, 0x3c01, 0x3c02, 0x3c03, 0x3bff,
                                    0x1000, 0x1200, 0x3555, 0x4200, 0xbc01};
constexpr uint64_t RoundingBF16[] = {0x3f80, 0x3f81, 0x3f82, 0x3f83, 0x3f7f,
                                     0x3b80, 0x3bc0, 0x3eab, 0x4040, 0xbf81};
// rounding, integer: around the square root of the range (products wrap)
// and half the range (sums wrap).
constexpr uint64_t RoundingI32[] = {46340, 46341,      65535,
                                    65536, 0xffff4afb, 0x40000000};
constexpr uint64_t RoundingI64[] = {3037000499,         3037000500,
                                    0xffffffff,         0x100000000,
                                    0xffffffff4afb0ccc, 0x4000000000000000};
constexpr uint64_t RoundingU8[] = {15, 16, 17, 127, 128, 255};

constexpr ClassValues Specials{{SpecialsF32, ExtremesI32, ExtremesI64,
                                ExtremesU8, SpecialsF16, SpecialsBF16}};
constexpr ClassValues Extremes{{ExtremesF32, ExtremesI32, ExtremesI64,
                                ExtremesU8, ExtremesF16, ExtremesBF16}};
constexpr ClassValues Rounding{{RoundingF32, RoundingI32, RoundingI64,
                                RoundingU8, RoundingF16, RoundingBF16}};

size_t kindIndex(ElemKind kind) {
  for (size_t i = 0; i < AllElemKinds.size(); ++i)
    if (AllElemKinds[i] == kind)
      return i;
  return 0;
}

/// Writes bytes [offset, offset + out.size()) of the random value class's
/// \p variant: a SplitMix64 stream seeded by the variant, each word's bytes
/// least significant first. Element i of a kind of S bytes is bytes
/// [i * S, i * S + S) of it, so that a word gives 8 / S elements (a byte
/// tensor costs an eighth of a word per element, not a word).
void writeRandomBytes(uint64_t variant, uint64_t offset,
                      std::span<uint8_t> out) {
  constexpr uint64_t Step = 0x9E3779B97F4A7C15ull;
  uint64_t state = mix64(variant) + (offset / 8) * Step;
  auto word = [&] {
    uint64_t w = mix64(state += Step);
    if constexpr (std::endian::native == std::endian::big)
      w = __builtin_bswap64(w);
    return w;
  };
  uint8_t *p = out.data();
  size_t left = out.size();
  if (size_t skip = offset % 8; skip && left) {
    uint64_t w = word();
    size_t take = std::min(8 - skip, left);
    std::memcpy(p, reinterpret_cast<const uint8_t *>(&w) + skip, take);
    p += take;
    left -= take;
  }
  for (; left >= 8; left -= 8, p += 8) {
    uint64_t w = word();
    std::memcpy(p, &w, 8);
  }
  if (left) {
    uint64_t w = word();
    std::memcpy(p, &w, left);
  }
}

/// Small exact values: the patterns stored scenarios use, unchanged for f32,
/// i32, i64 and u8; f16 and bf16 get the f32 values, which they hold exactly.
uint64_t smallExactBits(ElemKind kind, uint64_t pattern, uint64_t i) {
  auto quarter = [&] {
    return float(int((i * (2 * pattern + 1) + pattern) % 17) - 8) * 0.25f;
  };
  switch (kind) {
  case ElemKind::Float32:
    return std::bit_cast<uint32_t>(quarter());
  case ElemKind::Float16:
    return floatToHalf(quarter());
  case ElemKind::BFloat16:
    return floatToBFloat16(quarter());
  case ElemKind::Int32:
    return uint32_t(i * 2654435761u + pattern * 40503u);
  case ElemKind::Int64:
    return i * 0x9E3779B97F4A7C15ull + pattern;
  case ElemKind::UInt8:
    return uint8_t(i * 31 + pattern * 7);
  }
  return 0;
}

/// The bits of element \p i of \p pattern over \p kind (the low
/// elemSize(kind) bytes count), for every pattern but the random class's,
/// which fillPattern writes as a stream (writeRandomBytes).
uint64_t elementBits(ElemKind kind, uint64_t pattern, uint64_t i) {
  uint64_t variant = pattern % ValueClassBase;
  const ClassValues *list = nullptr;
  switch (pattern / ValueClassBase) {
  case SpecialsTag:
    list = &Specials;
    break;
  case ExtremesTag:
    list = &Extremes;
    break;
  case RoundingTag:
    list = &Rounding;
    break;
  default:
    return smallExactBits(kind, pattern, i);
  }
  std::span<const uint64_t> values = list->byKind[kindIndex(kind)];
  return values[(i % values.size() + variant % values.size()) % values.size()];
}

} // namespace

std::span<const ValueClass> valueClasses() { return ValueClassList; }

const ValueClass *valueClassOf(uint64_t pattern) {
  for (const ValueClass &c : ValueClassList)
    if (pattern / ValueClassBase == c.pattern / ValueClassBase)
      return &c;
  return nullptr;
}

namespace {

/// How many elements a pattern's values take to repeat over \p kind (0:
/// they do not repeat).
uint64_t patternPeriod(ElemKind kind, uint64_t pattern) {
  switch (pattern / ValueClassBase) {
  case 0:
    // Small exact values: f32, f16 and bf16 cycle through 17 quarters, u8
    // through 256 bytes; i32 and i64 run through their whole range.
    if (kind == ElemKind::Int32 || kind == ElemKind::Int64)
      return 0;
    return kind == ElemKind::UInt8 ? 256 : 17;
  case SpecialsTag:
    return Specials.byKind[kindIndex(kind)].size();
  case ExtremesTag:
    return Extremes.byKind[kindIndex(kind)].size();
  case RoundingTag:
    return Rounding.byKind[kindIndex(kind)].size();
  default:
    return 0;
  }
}

/// Writes elements [first, first + n) of \p bits (the low Size bytes of
/// each) to \p out, which holds n elements and possibly part of one more.
template <size_t Size, typename Bits>
void writeElements(std::span<uint8_t> out, uint64_t first, Bits bits) {
  size_t whole = out.size() / Size;
  uint8_t *p = out.data();
  for (size_t k = 0; k < whole; ++k, p += Size) {
    uint64_t v = bits(first + k);
    std::memcpy(p, &v, Size);
  }
  if (size_t rest = out.size() - whole * Size) {
    uint64_t v = bits(first + whole);
    std::memcpy(p, &v, rest);
  }
}

template <typename Bits>
void writeElements(size_t size, std::span<uint8_t> out, uint64_t first,
                   Bits bits) {
  switch (size) {
  case 1:
    return writeElements<1>(out, first, bits);
  case 2:
    return writeElements<2>(out, first, bits);
  case 4:
    return writeElements<4>(out, first, bits);
  default:
    return writeElements<8>(out, first, bits);
  }
}

} // namespace

void fillPattern(ElemKind kind, uint64_t pattern, size_t firstElement,
                 std::span<uint8_t> out) {
  if (pattern == 0) {
    std::fill(out.begin(), out.end(), uint8_t(0));
    return;
  }
  size_t size = elemSize(kind);
  uint64_t period = patternPeriod(kind, pattern);
  if (period == 0) {
    // The patterns that do not repeat, with their class decided once rather
    // than per element.
    if (pattern / ValueClassBase == RandomTag) {
      writeRandomBytes(pattern % ValueClassBase, firstElement * size, out);
    } else if (kind == ElemKind::Int32) {
      writeElements<4>(out, firstElement, [&](uint64_t i) {
        return smallExactBits(ElemKind::Int32, pattern, i);
      });
    } else if (kind == ElemKind::Int64) {
      writeElements<8>(out, firstElement, [&](uint64_t i) {
        return smallExactBits(ElemKind::Int64, pattern, i);
      });
    } else {
      writeElements(size, out, firstElement,
                    [&](uint64_t i) { return elementBits(kind, pattern, i); });
    }
    return;
  }
  // A periodic pattern: compute one period, then copy it over the rest,
  // doubling what is already written (so a small tensor computes no more
  // elements than a period, and a large one copies in few large blocks).
  uint64_t block = period;
  size_t prefix = std::min<size_t>(out.size(), block * size);
  writeElements(size, out.first(prefix), firstElement,
                [&](uint64_t i) { return elementBits(kind, pattern, i); });
  for (size_t done = prefix; done < out.size();) {
    size_t copy = std::min(done - done % (block * size), out.size() - done);
    std::memcpy(out.data() + done, out.data(), copy);
    done += copy;
  }
}

std::vector<uint8_t> patternBytes(ElemKind kind, uint64_t pattern,
                                  size_t firstElement, size_t elements) {
  std::vector<uint8_t> out(elements * elemSize(kind));
  fillPattern(kind, pattern, firstElement, out);
  return out;
}

namespace {

/// Why the runner cannot hold the tensor \p create makes, or "" when it can
/// (or when the type is one the contract refuses anyway).
std::string sizeProblem(const Command &create) {
  size_t bytes = elemSize(create.elemKind);
  for (size_t d : create.dims)
    if (d == 0 || __builtin_mul_overflow(bytes, d, &bytes))
      return "";
  if (bytes > MaxTensorBytes || bytes <= MaxScenarioTensorBytes)
    return "";
  return "tensor '" + create.target + "' of type " +
         Type{create.elemKind, create.dims}.toString() + " holds " +
         std::to_string(bytes) + " bytes, more than the " +
         std::to_string(MaxScenarioTensorBytes) +
         " bytes a scenario may create (the runner and the model hold every "
         "tensor in host memory); types over " +
         std::to_string(MaxTensorBytes) +
         " bytes, which the contract refuses, may be written";
}

} // namespace

namespace {
/// A hash of a short name, inline (names are a few characters long).
struct NameHash {
  size_t operator()(std::string_view s) const {
    uint64_t h = 0xcbf29ce484222325u;
    for (char c : s)
      h = (h ^ uint8_t(c)) * 0x100000001b3u;
    return size_t(h);
  }
};
/// Names of the scenario being validated, which outlives the sets.
using Names = std::unordered_set<std::string_view, NameHash>;
} // namespace

std::string validateScenario(const Scenario &scenario) {
  // Hashed: a replayed scenario is validated before every run, and the
  // names it declares only need to be found, never listed in order. They
  // are views of the scenario's own strings.
  Names devices, tensors, networks;
  Names locations;
  tensors.reserve(scenario.commands.size() / 4 + 8);
  for (const DeviceSpec &d : scenario.devices)
    if (!devices.insert(d.name).second)
      return "device '" + d.name + "' is declared twice";
  // Transfers issued with '&' and not yet waited for, and the devices that
  // a planned DeviceLost may shut down: a shutdown meeting pending work
  // would make its outcome a matter of timing.
  bool pending = false;
  // Whether the one command pending is a from-device: its operation
  // reached the device when it was issued.
  bool loneReadBack = false;
  Names mayBeLost;
  // Devices with a memory budget: the input copies a run issued with '&'
  // holds until it completes would make a later allocation's outcome a
  // matter of timing too.
  Names budgeted;
  for (const DeviceSpec &d : scenario.devices)
    if (d.budget)
      budgeted.insert(d.name);
  // The device each network was added to: the device of its runs.
  std::unordered_map<std::string_view, std::string_view, NameHash>
      networkDevice;
  // The branch each tensor is used by: a tensor object belongs to one
  // branch (branches share records through views of them).
  std::unordered_map<std::string_view, int, NameHash> branchOf;
  // The branch each network runs in: its context belongs to one branch.
  std::unordered_map<std::string_view, int, NameHash> networkBranch;
  // Whether the parallel block shuts a device down, and runs a network: a
  // run the shutdown meets fails, and an in-place Mirrored output of it ends
  // Lost, which neither order of the two explains.
  bool branchShutdown = false, branchRun = false;
  // Whether it plans a fault, which a run, counted once per allocation and
  // input copy, does not meet as one step.
  bool branchFault = false;
  for (size_t i = 0; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    // Named only in a problem: building it for every command would cost a
    // string per step of every run.
    auto step = [&] {
      return "step " + std::to_string(i + 1) + " (" +
             std::string(commandKindName(c.kind)) + "): ";
    };
    if (c.branch < 0 || c.branch > MaxBranches)
      return step() + "branch " + std::to_string(c.branch) +
             " (branches are numbered 1 to " + std::to_string(MaxBranches) +
             ")";
    if (c.branch == 0 && i > 0 && scenario.commands[i - 1].branch != 0)
      return step() + "the parallel block ends the scenario: no sequential "
                      "command may follow it";
    if (c.branch != 0 &&
        (!branchCommandKind(c.kind) || c.noWait || !c.location.empty()))
      return step() + "a parallel branch runs to-device (without a "
                      "location), from-device, release, read, refill, run, "
                      "shutdown, inject-fault and destroy only, each waiting "
                      "for its outcome";
    // A DeviceLost fault that strikes in the block fails the operations
    // other threads have in flight, though they counted before the one it
    // strikes: no order explains that.
    if (c.branch != 0 &&
        (!mayBeLost.empty() || (c.kind == CommandKind::InjectFault &&
                                c.fault.code == ErrorCode::DeviceLost)))
      return step() + "a DeviceLost fault may strike in the parallel block "
                      "(the operations other threads have in flight would "
                      "fail though they counted before it): plan it after "
                      "the block's work, or shut the device down instead";
    if (c.branch != 0) {
      branchShutdown = branchShutdown || c.kind == CommandKind::Shutdown;
      branchFault = branchFault || c.kind == CommandKind::InjectFault;
      branchRun = branchRun || c.kind == CommandKind::Run;
      if (branchShutdown && branchRun)
        return step() + "a parallel block that shuts a device down runs no "
                        "network (a run the shutdown meets fails, and what "
                        "it leaves of an output no order explains)";
      if (branchShutdown && branchFault)
        return step() + "a parallel block that shuts a device down plans no "
                        "fault (a move between two devices counts at one "
                        "and may meet the shutdown of the other: no one "
                        "point in time gives both)";
      if (branchFault && branchRun)
        return step() + "a parallel block that plans a fault runs no network "
                        "(a run counts at a site once per allocation and "
                        "input copy: a fault planned on another thread may "
                        "count some of them and not the others)";
    }
    if (c.branch != 0 && c.kind != CommandKind::Shutdown &&
        c.kind != CommandKind::InjectFault) {
      auto owned = [&](auto &owners, const std::string &name, const char *what,
                       const char *why) -> std::string {
        auto [it, fresh] = owners.emplace(name, c.branch);
        if (fresh || it->second == c.branch)
          return {};
        return step() + what + " '" + name + "' is used by branches " +
               std::to_string(it->second) + " and " + std::to_string(c.branch) +
               ": " + why;
      };
      auto ownedTensor = [&](const std::string &name) {
        return owned(branchOf, name, "tensor",
                     "a tensor belongs to one branch (give each branch a "
                     "view)");
      };
      std::string problem =
          c.kind == CommandKind::Run
              ? owned(networkBranch, c.target, "network",
                      "a network's context belongs to one branch")
              : ownedTensor(c.target);
      for (const auto &[ph, t] : c.bindings)
        if (problem.empty())
          problem = ownedTensor(t);
      if (!problem.empty())
        return problem;
    }
    if (c.branch != 0 && pending)
      return step() + "a transfer issued with '&' is still pending: a "
                      "command without '&' must come before the parallel "
                      "block";
    if (c.noWait && !completesThroughCallback(c.kind))
      return step() + "only to-device, from-device and run can be issued "
                      "without waiting ('&')";
    if (c.sync && !completesThroughCallback(c.kind))
      return step() + "only to-device, from-device and run can be issued "
                      "through the framework's blocking helpers ('sync')";
    if (c.sync && c.noWait)
      return step() + "'sync' waits in the framework's helper: it cannot be "
                      "issued without waiting ('&') too";
    if (c.inCallback)
      if (std::string problem = inCallbackProblem(scenario.commands, i);
          !problem.empty())
        return step() + problem;
    if (pending && !mayFollowPendingWork(c, loneReadBack))
      return step() + "a transfer issued with '&' is still pending: a "
                      "command without '&' must come first (what a shutdown "
                      "or a fault does to pending work depends on timing; "
                      "only a fault that does not lose the device may "
                      "follow a lone from-device issued with '&', which "
                      "reached its device before it)";
    if (c.kind == CommandKind::AddNetwork)
      networkDevice[c.target] = c.device;
    std::string_view pendingDevice = c.device;
    if (c.kind == CommandKind::Run)
      if (auto it = networkDevice.find(c.target); it != networkDevice.end())
        pendingDevice = it->second;
    if (c.noWait && mayBeLost.count(pendingDevice))
      return step() + "'&' on device '" + std::string(pendingDevice) +
             "', where a planned DeviceLost fault may shut the device down "
             "while the work is pending";
    if (c.noWait && c.kind == CommandKind::Run && budgeted.count(pendingDevice))
      return step() + "'&' on device '" + std::string(pendingDevice) +
             "', which has a memory budget: the input copies a pending run "
             "holds until it completes would make a later allocation's "
             "outcome a matter of timing";
    if (c.kind == CommandKind::InjectFault &&
        c.fault.code == ErrorCode::DeviceLost)
      mayBeLost.insert(c.device);
    loneReadBack = c.noWait && !pending && c.kind == CommandKind::FromDevice;
    pending = c.noWait;
    auto needTensor = [&](const std::string &name) -> std::string {
      return tensors.count(name) ? ""
                                 : step() + "unknown tensor '" + name + "'";
    };
    auto needDevice = [&]() -> std::string {
      return devices.count(c.device)
                 ? ""
                 : step() + "unknown device '" + c.device + "'";
    };
    auto newTensor = [&](const std::string &name) -> std::string {
      if (!tensors.insert(name).second)
        return step() + "tensor '" + name + "' already exists";
      return "";
    };
    std::string problem;
    switch (c.kind) {
    case CommandKind::Create:
      problem = c.device.empty() ? "" : needDevice();
      if (problem.empty())
        problem = newTensor(c.target);
      if (problem.empty())
        if (std::string tooLarge = sizeProblem(c); !tooLarge.empty())
          problem = step() + tooLarge;
      break;
    case CommandKind::View:
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      problem = needTensor(c.source);
      if (problem.empty())
        problem = newTensor(c.target);
      break;
    case CommandKind::MoveAssign:
      problem = needTensor(c.source);
      if (problem.empty())
        problem = needTensor(c.target);
      break;
    case CommandKind::SelfMove:
    case CommandKind::Read:
    case CommandKind::Write:
    case CommandKind::Refill:
      problem = needTensor(c.target);
      break;
    case CommandKind::Destroy:
      problem = needTensor(c.target);
      tensors.erase(c.target);
      break;
    case CommandKind::ToDevice:
      problem = needTensor(c.target);
      if (problem.empty())
        problem = needDevice();
      // A location of another device is the device's to refuse.
      if (problem.empty() && !c.location.empty() &&
          !locations.count(c.location))
        problem = step() + "unknown location '" + c.location + "'";
      break;
    case CommandKind::FromDevice:
    case CommandKind::Release:
    case CommandKind::DoubleRelease:
      problem = needTensor(c.target);
      if (problem.empty())
        problem = needDevice();
      break;
    case CommandKind::AddNetwork:
      problem = needDevice();
      if (problem.empty() && c.nodes.empty())
        problem = step() + "network '" + c.target + "' has no nodes";
      if (problem.empty() && !c.declared.empty()) {
        std::vector<std::string> names;
        for (const Placeholder &p :
             networkPlaceholders(c.nodes, Type{c.elemKind, {1}}))
          names.push_back(p.name);
        std::vector<std::string> declared = c.declared;
        std::sort(names.begin(), names.end());
        std::sort(declared.begin(), declared.end());
        if (declared != names) {
          std::string list;
          for (const std::string &n : names)
            list += (list.empty() ? "" : ",") + n;
          problem = step() + "declared= lists network '" + c.target +
                    "''s placeholders, each once (" + list + ")";
        }
      }
      networks.insert(c.target);
      break;
    case CommandKind::Run:
      if (!networks.count(c.target))
        problem = step() + "unknown network '" + c.target + "'";
      for (const auto &[placeholder, tensor] : c.bindings)
        if (problem.empty())
          problem = needTensor(tensor);
      break;
    case CommandKind::EvictNetwork:
    case CommandKind::EnsureOutputs:
      if (!networks.count(c.target))
        problem = step() + "unknown network '" + c.target + "'";
      break;
    case CommandKind::Shutdown:
    case CommandKind::InjectFault:
      problem = needDevice();
      break;
    case CommandKind::Alloc:
      problem = needDevice();
      if (problem.empty() && locations.count(c.target))
        problem = step() + "location '" + c.target + "' already exists";
      locations.insert(c.target);
      break;
    case CommandKind::Free:
      problem = needDevice();
      if (problem.empty() && !locations.count(c.target))
        problem = step() + "unknown location '" + c.target + "'";
      break;
    }
    if (!problem.empty())
      return problem;
  }
  return "";
}

} // namespace drt::conformance
