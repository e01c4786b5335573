//===- drt/conformance/Scenario.h - Residency scenarios ---------*- C++ -*-===//
//
// A scenario is a list of devices and a list of commands over named tensors,
// views, raw device locations and networks. Every command carries the outcome
// it is expected to have. The same scenario runs on any backend, is produced
// by the generators, is read and written as text (ScenarioText.h) and is
// stored as a regression under conformance/scenarios/.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_SCENARIO_H
#define DRT_CONFORMANCE_SCENARIO_H

#include "drt/DeviceConfig.h"
#include "drt/Error.h"
#include "drt/Function.h"
#include "drt/Type.h"
#include "drt/Violation.h"

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace drt::conformance {

/// What a step does. The text name of each kind is commandKindName().
enum class CommandKind {
  Create,
  View,
  Clone,
  MoveConstruct,
  MoveAssign,
  SelfMove,
  Destroy,
  ToDevice,
  FromDevice,
  Release,
  DoubleRelease,
  Read,
  Write,
  Refill,
  AddNetwork,
  Run,
  EvictNetwork,
  EnsureOutputs,
  Shutdown,
  InjectFault,
  Alloc,
  Free,
};

/// The command's name in the text form ("create", "to-device", ...).
std::string_view commandKindName(CommandKind kind);

/// The outcome a step has: success, a recoverable error, or a violation.
struct Outcome {
  enum class Kind { Ok, Error, Violation };
  Kind kind = Kind::Ok;
  /// The error code when kind is Error.
  ErrorCode code = ErrorCode::Success;
  /// The violation when kind is Violation.
  ViolationKind violation = ViolationKind::UseOfMovedFrom;

  static Outcome ok() { return {}; }
  static Outcome error(ErrorCode code) { return {Kind::Error, code, {}}; }
  static Outcome violationOf(ViolationKind v) {
    return {Kind::Violation, ErrorCode::Success, v};
  }
  /// "ok", "error OutOfMemory", "violation use-of-moved-from".
  std::string toString() const;
  /// toString()'s text in two parts that live as long as the program: the
  /// kind ("ok", "error ", "violation ") and the code's or violation's name
  /// (empty for ok).
  std::array<std::string_view, 2> textParts() const;
  friend bool operator==(const Outcome &a, const Outcome &b) {
    return a.kind == b.kind && (a.kind != Kind::Error || a.code == b.code) &&
           (a.kind != Kind::Violation || a.violation == b.violation);
  }
};

/// A device the scenario creates: from the backend under test, or from the
/// backend it names.
struct DeviceSpec {
  /// The device's name in the scenario ("d0").
  std::string name;
  /// The registered backend that creates this device whatever backend the
  /// scenario runs on ("fake" for a reference device beside the backend
  /// under test), or "" for the backend under test.
  std::string backend;
  /// DeviceConfig::memoryBudget (0: the backend's default).
  uint64_t budget = 0;
  /// DeviceConfig::copyDeviceTensorsToHost.
  bool copyToHost = false;
  /// DeviceConfig::parameters ("async" = "1", ...).
  std::map<std::string, std::string> parameters;

  friend bool operator==(const DeviceSpec &, const DeviceSpec &) = default;
};

/// One element-wise node of a network, over placeholder names.
struct NetworkNode {
  OpKind op = OpKind::Copy;
  std::vector<std::string> inputs;
  std::string output;
  double factor = 1.0;

  friend bool operator==(const NetworkNode &, const NetworkNode &) = default;
};

/// One step. Which fields matter depends on kind; the text form
/// (docs/conformance.md) lists them per command.
struct Command {
  CommandKind kind = CommandKind::Create;
  /// The tensor, location or network the command acts on or creates.
  std::string target;
  /// The second tensor (view, clone and move sources).
  std::string source;
  /// The device (transfers, releases, networks, faults, allocations).
  std::string device;
  /// Element kind and shape (create, view, networks).
  ElemKind elemKind = ElemKind::Float32;
  std::vector<size_t> dims;
  /// View offset in elements.
  uint64_t offset = 0;
  /// The fill pattern (create, write, refill); see fillPattern().
  uint64_t pattern = 0;
  /// from-device: release (true) or keep a mirror (false).
  bool release = true;
  /// to-device: the named raw location to take over (empty: allocate).
  std::string location;
  /// alloc: bytes.
  uint64_t bytes = 0;
  /// inject-fault.
  FaultSpec fault;
  /// add-network: the nodes (placeholders appear in order of first use).
  std::vector<NetworkNode> nodes;
  /// add-network: the order the function declares its placeholders in, a
  /// permutation of the nodes' placeholders (text form "declared=o,x,y");
  /// empty: the order of first use. A backend that takes its run arguments
  /// or its registers by position in another order than the declared one
  /// computes over the wrong buffers.
  std::vector<std::string> declared;
  /// run: placeholder name to tensor name.
  std::vector<std::pair<std::string, std::string>> bindings;
  /// The outcome the step is expected to have.
  Outcome expect;
  /// to-device and from-device written with a trailing '&': issued without
  /// waiting for its callback. Later commands may then meet the record
  /// busy (and must wait for it); the outcome and the callback are checked
  /// after the next command written without '&'.
  bool noWait = false;
  /// to-device, from-device and run written with a trailing 'sync': the
  /// caller blocks in the framework's helper (transferToDeviceSync,
  /// transferFromDeviceSync, HostManager::runNetwork) instead of passing a
  /// callback of its own. A backend may complete such a caller's work on
  /// the caller's thread (callerWaitsForCompletion), a path of its own that
  /// a command with a callback never takes. Never with noWait.
  bool sync = false;
  /// to-device, from-device, release and shutdown written with a trailing
  /// 'in-callback': issued from inside the completion callback of the
  /// command before it (a to-device, from-device or run with a callback of
  /// the runner's own), on whatever thread the backend calls back, as a
  /// program that issues its next transfer from a completion does. Its
  /// outcome is the one it has in program order, right after that command;
  /// no state is compared between the two. Never with sync or noWait.
  bool inCallback = false;
  /// 0 for the scenario's sequential part; 1 to MaxBranches for a command
  /// of the parallel block that ends a scenario (written "|N COMMAND"): each
  /// branch runs on a thread of its own, and the history is checked for
  /// linearizability against the model. Its outcome depends on the
  /// interleaving and is not written.
  int branch = 0;

  friend bool operator==(const Command &a, const Command &b);
};

/// Most branches of a parallel block.
inline constexpr int MaxBranches = 3;

/// True when a command of kind \p kind may run in a parallel branch: one
/// that acts on existing tensors, creates or destroys no name, and does its
/// work inside the call (to-device without a location, from-device,
/// release, read, refill; not write, whose span is filled after the call
/// returns).
bool branchCommandKind(CommandKind kind);

/// True for the commands that complete through a callback (to-device,
/// from-device, run): the ones that may be issued without waiting ('&') or
/// through the framework's blocking helpers ('sync').
bool completesThroughCallback(CommandKind kind);

/// True when a command of kind \p kind may be issued from inside the
/// completion callback of the command before it ('in-callback'): one that
/// does not block (to-device, from-device, release, shutdown).
bool issuableInCallback(CommandKind kind);

/// Why command \p i of \p commands cannot be written 'in-callback' (the
/// rule validateScenario applies), or "" when it can: it is a to-device,
/// from-device, release or shutdown of the sequential part, the command
/// before it completes through a callback of the runner's own (neither
/// 'sync', '&' nor 'in-callback'), and no transfer issued with '&' is
/// pending when that one is issued.
std::string inCallbackProblem(const std::vector<Command> &commands, size_t i);

/// Whether \p c may come while commands issued without waiting ('&') are
/// pending, \p loneReadBack telling whether the one pending is a
/// from-device: a shutdown never (what it does to pending work depends on
/// timing), a fault only one that does not lose the device behind a lone
/// read-back (whose operation reached its device when it was issued), any
/// other command always.
bool mayFollowPendingWork(const Command &c, bool loneReadBack);

/// A whole scenario.
struct Scenario {
  std::vector<DeviceSpec> devices;
  std::vector<Command> commands;

  friend bool operator==(const Scenario &, const Scenario &) = default;
};

/// The placeholders of a network's nodes, in order of first use, each typed
/// \p type.
std::vector<Placeholder> networkPlaceholders(const std::vector<NetworkNode> &,
                                             const Type &type);
/// Whether a node of \p nodes writes \p name (an output of the network,
/// as Function::isOutput says of the function it describes).
bool networkWrites(const std::vector<NetworkNode> &nodes,
                   const std::string &name);
/// The Function an add-network command describes, its placeholders in the
/// declared order (Command::declared) or else in order of first use.
Function networkFunction(const Command &addNetwork);

/// Fill patterns (create fill=P, write, refill). A pattern below
/// ValueClassBase gives *small exact values*: pattern 0 is all zeros; others
/// give multiples of 0.25 in [-2, 2] for the float kinds (exact in f16 and
/// bf16 too, so sums and products of a few stay exact), and wrapping integer
/// sequences for i32, i64 and u8. A pattern from ValueClassBase up selects a
/// value class (valueClasses()): its top 8 bits name the class, its low 56
/// bits are the variant (which element of the class's list comes first, or
/// the seed of random bits). docs/conformance.md lists every class's values.
inline constexpr uint64_t ValueClassBase = uint64_t(1) << 56;

/// A class of fill values beyond the small exact ones.
struct ValueClass {
  /// The name in the text form: fill=NAME for variant 0, fill=NAME:N for
  /// variant N ("specials", "random:7").
  std::string_view name;
  /// The pattern of variant 0; variant N is pattern + N (N < 2^56).
  uint64_t pattern;
  /// What the class holds, in a few words (for reports and listings).
  std::string_view summary;
};

/// The value classes, for the generators to draw from: specials (float NaNs
/// with quiet and signalling payloads, infinities, signed zeros, +-1),
/// extremes (float denormal and normal bounds and the largest finite value;
/// integer min, max, -1, 0, 1, min+1, max-1), rounding (float values near 1
/// whose sums and products round; integers whose products wrap) and random
/// (random bits: every kind's whole range, NaNs and denormals included).
/// Integer kinds have no special values: specials gives their extremes.
std::span<const ValueClass> valueClasses();

/// The value class \p pattern selects, or nullptr for small exact values (and
/// for the unnamed patterns from ValueClassBase up, which give small exact
/// values too).
const ValueClass *valueClassOf(uint64_t pattern);

/// Writes fill pattern \p pattern over \p out in place: element k of \p out
/// is element firstElement + k of the pattern for \p kind, in host byte order.
/// A trailing part of an element (out.size() not a multiple of the element
/// size) gets that element's first bytes. Nothing else is allocated, so a
/// tensor's storage can be filled directly.
void fillPattern(ElemKind kind, uint64_t pattern, size_t firstElement,
                 std::span<uint8_t> out);

/// The bytes fillPattern writes for \p elements elements, as a new vector.
std::vector<uint8_t> patternBytes(ElemKind kind, uint64_t pattern,
                                  size_t firstElement, size_t elements);

/// The largest tensor a scenario may create, in bytes (2 GiB). The runner,
/// the model and the reference device hold every tensor in host memory, about
/// three times over, so a larger type the contract accepts is refused before
/// a run starts. A type over drt::MaxTensorBytes may still be written: the
/// contract refuses it (violation invalid-tensor-type), and such a step
/// tests exactly that.
inline constexpr size_t MaxScenarioTensorBytes = size_t(1) << 31;

/// Checks names: tensors are created before use and created once, devices
/// are declared, locations belong to the device they are used on, networks
/// are added before use; and sizes: no created tensor of a valid type is
/// larger than MaxScenarioTensorBytes. Returns a message naming the step, or
/// "" when the scenario is well formed.
std::string validateScenario(const Scenario &scenario);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_SCENARIO_H
