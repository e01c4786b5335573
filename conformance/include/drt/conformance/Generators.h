//===- drt/conformance/Generators.h - Scenario generators -------*- C++ -*-===//
//
// Scenario generators. The generator's state is the reference model (run
// without contents, so its cost does not grow with the tensors' sizes):
// every generated command names live objects and the model knows its
// outcome. Command choice is weighted per property family (uniform choice
// misses deep bugs); the tensor a command acts on is chosen by residency
// state first, so that rare pairs of command and state are as frequent as
// common ones; sizes, element kinds, values, offsets and budgets come from
// the input space (InputSpace.h). Generation is deterministic for a seed.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_GENERATORS_H
#define DRT_CONFORMANCE_GENERATORS_H

#include "drt/HostMemory.h"
#include "drt/conformance/ChoiceSource.h"
#include "drt/conformance/InputSpace.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/Scenario.h"

#include <rapidcheck.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace drt::conformance {

/// What a generator produces: devices, command weights and value ranges.
struct GeneratorProfile {
  /// The devices every scenario declares.
  std::vector<DeviceSpec> devices;
  /// Relative weight of each command kind; a kind not listed is never chosen.
  std::map<CommandKind, int> weights;
  /// The input space sizes, kinds and values are drawn from.
  InputSpace space = makeInputSpace();
  /// When not empty, every tensor and network takes one of these shapes
  /// (element kinds still come from the input space) instead of a drawn size.
  std::vector<std::vector<size_t>> shapes;
  /// Relative weight of each size class of the input space (by index); empty:
  /// the classes' own weights.
  std::vector<unsigned> sizeClassWeights;
  /// Relative weight of the residency states (Host, Device, Mirrored, Lost,
  /// then empty tensors) when a command's tensor is drawn: a state first,
  /// then a tensor in it.
  std::array<unsigned, 5> stateWeights = {3, 3, 3, 2, 1};
  /// Most tensors alive at once (create stops being chosen beyond it).
  size_t maxTensors = 12;
  /// Most nodes of a generated network.
  size_t maxNetworkNodes = 4;
  /// When more than 1, networks take minNetworkNodes to maxNetworkNodes
  /// nodes, evenly; else mostly one or two.
  size_t minNetworkNodes = 1;
  /// When not 0, each scenario draws this many of the input space's element
  /// kinds once and makes its tensors and networks of those only: most
  /// tensors then fit a network, while every kind still comes up across
  /// cases.
  size_t kindsPerScenario = 0;
  /// When set, every network node after the first reads the output of the
  /// node before it, and a scenario generated with the labels its run has
  /// reached favours the element kinds and the pairs of adjacent operations
  /// (producer, consumer) whose `node-pair-KIND-PRODUCER-CONSUMER` label is
  /// not among them yet: each of the 150 triples comes up on purpose, not
  /// once in many cases by chance.
  bool coverNodePairs = false;
  /// Percent of created tensors filled from the unusual value classes
  /// (specials, extremes, rounding, random bits) whatever they are made for;
  /// the others draw a class uniformly, as do tensors made for a run half
  /// the time.
  unsigned unusualValuesPercent = 0;
  /// Percent of runs without enough views at offsets of their network's
  /// type on its device that start a plan for the next commands: a tensor
  /// of the kind with room, views into it at offsets (two where a node reads
  /// two inputs), the transfer of their record, then a run of the network
  /// that mostly reads those views. 0: no plans.
  unsigned viewInputPlanPercent = 0;
  /// Percent of steps that start a read-back fault plan where a network's
  /// last run bound two or more outputs that could be read back: two or
  /// more of them moved to its device, a from-device fault planned there
  /// for one (or two of different codes), then ensure-outputs, so that one
  /// output fails while those after it must still come back and the first
  /// error is the one returned. 0: no plans.
  unsigned faultedEnsurePlanPercent = 0;
  /// Percent of runs on a device that declares fault injection that come
  /// right after a fault planned for them (site run, nth 1): the failing
  /// run's outputs, and a fault that must not strike a later command. 0:
  /// none.
  unsigned runFaultPercent = 0;
  /// Percent of from-devices issued without waiting with a fault planned
  /// on their device beside them (a code of faultCodes other than
  /// DeviceLost). Half the time the fault follows at once (any site, nth 1
  /// or 2), while the read-back is still in flight: the read-back reached
  /// the device before the plan and must not meet it, however late the
  /// device performs it (a backend that counts a fault when its worker
  /// performs the operation fails it). Else the fault comes first, for the
  /// read-back after this one (from-device, nth 2), which is struck while
  /// this one's completion may still be on its way (a backend that strikes
  /// the fault at the next completion it delivers fails this one). 0: none.
  unsigned faultBehindReadBackPercent = 0;
  /// Percent of to-devices that are first offered a live location of
  /// another device of the record's size, where there is one, and of frees
  /// sent to a device picked at random (at least 10): handles a device must
  /// refuse though its own may look the same.
  unsigned foreignLocationPercent = 0;
  /// Fault codes inject-fault chooses from. Faults a scenario plans at no
  /// one's request take the sites and these codes in turn from a drawn
  /// start (every pair comes up in a long enough case, none by chance too
  /// rarely), as do the faults planned right before a run.
  std::vector<ErrorCode> faultCodes = {ErrorCode::DeviceError,
                                       ErrorCode::DeviceLost};
  /// Percent of to-device and from-device commands issued without waiting
  /// ('&'); the commands after one often act on the same tensor while its
  /// transfer is pending. 0: every command waits.
  unsigned pipelinePercent = 0;
  /// Percent of the to-device, from-device and run commands that wait
  /// which go through the framework's blocking helpers ('sync'), in the
  /// sequence and in parallel branches: where a backend completes a
  /// waiting caller's work on the caller's thread, that path is checked too.
  unsigned syncPercent = 25;
  /// Percent of the to-device, from-device and run commands that wait with
  /// a callback of the runner's own whose callback issues the next command
  /// ('in-callback', mostly a transfer of the same tensor, a release or a
  /// shutdown): a program calling into the device from a completion, on
  /// the thread the backend calls back on. 0: none.
  unsigned inCallbackPercent = 0;
  /// Most branches of the parallel block that ends each scenario (0: no
  /// parallel block; else 2 to this many, at most MaxBranches). Each branch
  /// gets a full view of each of up to sharedRecords records the scenario
  /// made, records of its own (owners no other branch touches), and 1 to
  /// branchLength transfers, releases, reads and refills of them.
  int parallelBranches = 0;
  size_t branchLength = 4;
  /// Most records the branches share (0 to 2): contention on a record. The
  /// records not shared go to one branch each, three in four of them, or
  /// every one with sharedRecords 0: work on different records at the same
  /// time, which only the backend's own state (a staging buffer, an
  /// allocator, a queue) links.
  size_t sharedRecords = 2;
  /// Percent of parallel blocks in which one branch shuts a device down
  /// among its commands, while the others move records on it: such a block
  /// runs no network (validateScenario).
  unsigned branchShutdownPercent = 0;
  /// Percent of the blocks with a shutdown in which the shutdown takes down
  /// a device while another branch copies a fresh record of longCopyBytes
  /// to it or back from it, first: the copy is under way for milliseconds
  /// when the device goes, so that a backend that frees its memory without
  /// waiting for its copies shows. The copying branch then destroys the
  /// record (always after an upload, in half the cases after a read-back),
  /// so that a backend still reading the source or writing the destination
  /// once the copy has called back, the shutdown's or its own, shows too.
  /// Large blocks, unmapped when freed, turn either into a crash. 0: none.
  unsigned longCopyBesideShutdownPercent = 0;
  /// The size range of that record, in bytes: past MappedAllocationBytes,
  /// so that a device whose memory comes from malloc unmaps it when freed.
  std::pair<uint64_t, uint64_t> longCopyBytes = {MappedAllocationBytes + 4,
                                                 uint64_t(48) << 20};
  /// Percent of parallel blocks that begin with content twins, one per
  /// branch: tensors of one type and one fill made in the sequential part,
  /// most of them uploaded there to one device, each then given to a branch
  /// of its own, whose first command drops its device copy (a release, a
  /// read-back that releases it, or a move to another device) or, for a
  /// twin left on the host, uploads it. A device that shares the blocks of
  /// equal uploads (deduplicates) then counts one block's holders up and
  /// down on several threads at once, which no record links. Blocks with
  /// runs over shared records or a first command of their own (a contended
  /// budget, a long copy) are left as they are. 0: none.
  unsigned branchTwinsPercent = 0;
  /// Percent of parallel blocks in which one branch plans a fault (any
  /// site, nth 1 to 3, DeviceError or OutOfMemory) among its commands, so
  /// that which of the others' operations it strikes is the interleaving's
  /// doing; such a block runs no network (validateScenario).
  unsigned branchFaultPercent = 0;
  /// Percent of parallel blocks (not of the fan-in shape, without a
  /// shutdown or a fault) whose branches run networks over the records
  /// they share: two records of one type are shared (the block creates
  /// the second when the scenario has none), the block adds a network of
  /// that type per branch, and each branch runs its network at least once
  /// with its views of the shared records bound to the inputs in an order
  /// of its own. Runs on several threads then take the same records
  /// together, each while holding others, beside the other branches'
  /// transfers, reads and writes of them. 0: none.
  unsigned sharedRunsPercent = 0;
  /// Percent of parallel blocks (without shared runs, a shutdown or a
  /// fault) in which two branches begin with an upload each of a fresh
  /// tensor to one device whose budget fits either upload but not both:
  /// the block gives that device (one without a budget of its own, whose
  /// backend enforces budgets) a budget just above what it holds, and no
  /// lower than the most it held before, so that no earlier step's outcome
  /// changes. Whichever thread allocates second must be refused, which a
  /// backend that checks its budget and allocates without one lock across
  /// both lets through. 0: none.
  unsigned contendedBudgetPercent = 0;
  /// Percent of parallel blocks (without shared runs, shutdown or fault,
  /// and where contendedBudgetPercent drew nothing) in which one branch
  /// begins with an upload to a device while another releases a record of
  /// its own there and then uploads as many bytes: the block gives that
  /// device a budget that fits all three in every order, but not the second
  /// upload while the released bytes still count, and holds the device's
  /// operations in flight (slowDeviceParameters, the backend's own
  /// BackendParameter::holdsOperationsWith, drawn for such blocks too).
  /// A device that reclaims a free only once the work in flight beside it
  /// has run must not hold the freed bytes against its budget (semantics
  /// §5). 0: none.
  unsigned freeBesideUploadPercent = 0;
  /// Percent of parallel blocks of the fan-in shape (with parallelBranches
  /// of MaxBranches): a fresh record of 256 KiB or 1 MiB is uploaded, then
  /// every branch names it through a view of its own; one branch holds it
  /// with a read-back, an upload and a read-back, the others wait on it
  /// (reads, writes, releases, transfers). Two or more threads then wait on one
  /// busy record at once, where waking one waiter only strands the others;
  /// random branch commands almost never line up so. 0: none.
  unsigned fanInPercent = 0;
  /// Parameters the devices of a scenario with a fan-in block get, which
  /// keep its holding operation in flight long enough for the waiters to
  /// arrive ("BACKEND:KEY" reaches that backend's devices only). A run
  /// adds the backend under test's BackendParameter::holdsOperationsWith
  /// where this names none of its parameters.
  std::map<std::string, std::string> fanInDeviceParameters;
  /// Percent of scenarios whose devices get slowDeviceParameters. 0: none.
  unsigned slowDevicePercent = 0;
  /// Parameters that keep a device's operations in flight for a while
  /// before they complete, however fast the device, so that the commands
  /// after an operation issued without waiting meet it in flight
  /// (BackendParameter::holdsOperationsWith), "BACKEND:KEY" to value.
  std::map<std::string, std::string> slowDeviceParameters;
  /// Percent of network adds (not large ones) that make a near twin of a
  /// network placed: its nodes, kind and shape with one scale factor
  /// changed (for a wide integer one, to the neighbour an f32 cannot tell
  /// from it), else the kind, else the shape, or, of one on another device,
  /// half the time nothing; run soon after. 0: none.
  unsigned nearTwinNetworkPercent = 0;
  /// Percent of scenarios of two or more devices whose last device gets
  /// the parameters of one of otherConfigurations (drawn only where there
  /// are some). 0: none.
  unsigned otherConfigurationPercent = 0;
  /// The parameters ("BACKEND:KEY" to value) of the backend's other tested
  /// configurations of the same capabilities, less the keys the
  /// configuration under test sets: a device made with them beside one of
  /// the configuration under test shows process-wide state (a cache of
  /// compiled code, a pool) that one configuration fills and another
  /// reads.
  std::vector<std::map<std::string, std::string>> otherConfigurations;
  /// Percent of scenarios whose devices get raceWideningParameters (drawn
  /// only where there are some). 0: none.
  unsigned raceWideningPercent = 0;
  /// Parameters that widen the windows in which the backend's threads race
  /// (BackendParameter::widensRacesWith), "BACKEND:KEY" to value.
  std::map<std::string, std::string> raceWideningParameters;
  /// When set, each device's budget is drawn relative to the sizes the
  /// scenario allocates (exact fits and one-byte misses happen), replacing
  /// the budgets in `devices`.
  bool drawBudgets = false;
  /// maximumMemory() of a device of the configuration declared without a
  /// budget (the backend's default budget; 0: unknown). The generator holds
  /// such a device to it, as the runner's model does, so that it can ask
  /// for one byte past it.
  uint64_t defaultMaximumMemory = 0;
  /// Percent of added networks whose type is drawn from the size classes of
  /// at least largeNetworkMinBytes (the input space's largest ones), mostly
  /// of a one- or two-byte kind, so that a run covers millions of elements
  /// (more than a 2^16-block or 65535-group launch grid holds); the next
  /// commands often run it. 0: networks stay small (mostly up to 4 KiB, at
  /// most 64 KiB).
  unsigned largeNetworkPercent = 0;
  uint64_t largeNetworkMinBytes = 1024 * 1024;
  /// Tensors created and uploaded to the first device at the start of each
  /// scenario, which the other commands rarely touch (one step in fifty
  /// may): the device's oldest live allocations, holding contents the
  /// runner reads back at the end, while everything else turns over.
  size_t anchorTensors = 0;
  /// When not 0, every this many commands the most recently uploaded anchor
  /// in Device state is read back (from-device, releasing it) and uploaded
  /// again, so that anchors are also read mid-case, the oldest ones staying.
  size_t anchorReadPeriod = 0;
  /// Allocation bursts, each once in a case of at least 2,000 commands, on
  /// the first device: a backend's counters and tables meet counts that
  /// random commands, freeing about as often as they allocate, never reach
  /// (a generation kept in 8 bits, a table or a slab past 256 entries).
  /// - Reuse: a raw location is allocated and freed, then each cycle
  ///   allocates its size again, frees the first (stale) location, which
  ///   must be refused, and frees the new one. An allocator that hands the
  ///   freed slot out again gives it a new generation each cycle: one kept
  ///   in fewer bits than the cycles wraps, and the stale location frees
  ///   the live one.
  /// - Pressure: allocations of one size (a resident record's, so that they
  ///   share its size class) held live together, then freed in a random
  ///   order; the records beside them are read back later.
  bool allocationBursts = false;
  /// Percent of scenarios that, at a random point, put a block freed while
  /// its upload may still be landing under a run's new output: a tensor
  /// uploaded and read back (keeping it: its upload has landed), a network
  /// copying it, a tensor of its type uploaded and released at once, and a
  /// run of the network into a fresh tensor of that type, read back. A
  /// device that calls an upload back before its bytes land and reuses the
  /// freed block for the output without ordering the two loses the run's
  /// result.
  unsigned releasedBlockRunPercent = 0;
  /// Percent of scenarios that, at a random point, make two tensors of one
  /// type and one fill (content twins), in half of them then write a few
  /// elements in the middle of the second through a view (near twins, whose
  /// first and last bytes agree), upload both (to one device, or to two
  /// where there are two), in half of them run a network writing the
  /// second in place, and read both back; half of those runs are issued
  /// without waiting, the first twin uploaded while the run is in flight. A
  /// device that shares the blocks of equal uploads (deduplicates) must tell
  /// twins that are not equal apart, keep each record's bytes its own, and
  /// see a sharing made between a run's issue and its write.
  unsigned contentTwinsPercent = 0;
  /// Percent of scenarios that, at a random point, add a network of many
  /// placeholders (8, 9, 16, 17, 32 or 33: either side of a power of two;
  /// as many as the scenario has room for), make a tensor for each, upload
  /// half the inputs and run it. A backend
  /// that holds a run's arguments or a fused kernel's values in a file of
  /// fixed size shows only past its end.
  unsigned wideRunPercent = 0;
  /// Percent of scenarios that, at a random point, make two networks of
  /// one element kind on one device, the second's shape no larger than the
  /// first's, upload a tensor for each placeholder of both, run the first
  /// without waiting, then the second without waiting with its first input
  /// bound to a view of the first run's last output (at offset 0 or past
  /// it), and read the second's last output back. The second run joins the
  /// first on a device that performs runs in order: a backend that fuses
  /// or forwards a run into the next must honour the view's offset and
  /// length.
  unsigned viewOfPendingOutputPercent = 0;
  /// Percent of scenarios that, at a random point, make two networks of
  /// one type on one device, upload a tensor for each placeholder, and
  /// issue three runs without waiting: the first writes a result, the
  /// second reads an input, and the third (of the first network) reads the
  /// first's result and writes the second's input in place; then read back
  /// the second's last output and the overwritten input. A backend that
  /// fuses the third run into the first, or moves it up past the second,
  /// must see the second's read first (a write after a read).
  unsigned writeAfterReadPercent = 0;
  /// Percent of commands issued without waiting, whose completion changes
  /// no device's accounting (Model::accountingFixedByCompletion), that the
  /// next command follows with a release, destroy or free while they are
  /// pending: the runner compares accounting before it waits for them, and
  /// a device that reclaims a free only once its queued work has run must
  /// not count it until then (semantics §5).
  unsigned freeBehindPendingPercent = 0;
  /// The cycles of a reuse burst, drawn between these (inclusive).
  std::pair<unsigned, unsigned> reuseBurstCycles = {257, 400};
  /// The allocations a pressure burst holds live at once, drawn between
  /// these (inclusive).
  std::pair<unsigned, unsigned> pressureBurstAllocations = {257, 600};
  /// Percent of scenarios of allocation bursts (allocationBursts) that,
  /// once those are over, hold hundreds of records of one small type and
  /// one fill on the first device at once (a content burst, with
  /// contentBurstRecords of them): each created and uploaded, then a run
  /// writes one in place, that one and a few others are read back, and all
  /// are destroyed in an order drawn, now and then one still held read back
  /// first. A device that shares the blocks of equal uploads and counts
  /// their holders in a narrow counter writes them all with the run, or
  /// frees the block while holders remain.
  unsigned contentBurstPercent = 0;
  std::pair<unsigned, unsigned> contentBurstRecords = {257, 300};
  /// Percent of cases with allocation bursts that also hold a network
  /// burst: networkBurstNetworks networks of one type whose scale factors
  /// differ placed on the first device at once, each run as it is added
  /// and again once all are placed (a backend whose cache of compiled code
  /// holds fewer entries than the networks placed must not drop the code
  /// of one still placed), then all evicted. 0: none.
  unsigned networkBurstPercent = 0;
  std::pair<unsigned, unsigned> networkBurstNetworks = {17, 40};
};

/// Gives half the networks (chosen by a hash of the network's name and
/// outputs) a declared placeholder order other than that of first use, a
/// permutation drawn from the same hash (Command::declared): the generators
/// apply it to every add-network they make.
void declareInAnotherOrder(Command &add);

/// Generates scenarios for one profile on a backend declaring some
/// capabilities.
class ScenarioGenerator {
public:
  ScenarioGenerator(GeneratorProfile profile, Capabilities capabilities);

  /// The scenario of \p steps commands that \p seed gives. The expectations
  /// of its commands are the model's predictions for the capabilities.
  /// With \p reached, the coverage labels the run has reached so far, the
  /// scenario goes for what they lack where the profile says so
  /// (coverNodePairs).
  Scenario generate(uint64_t seed, size_t steps,
                    const std::map<std::string, int> *reached = nullptr) const;

  /// The scenario of at most \p steps commands whose every choice comes
  /// from \p choices; it ends early when \p choices is exhausted. With a
  /// RandomSource of seed S it is generate(S, steps).
  Scenario generate(ChoiceSource &choices, size_t steps,
                    const std::map<std::string, int> *reached = nullptr) const;

  const GeneratorProfile &profile() const { return profile_; }

private:
  /// Appends the parallel block to \p s, whose sequential part left
  /// \p model, keeping \p s within \p steps commands. With \p sharedRuns
  /// it is one of GeneratorProfile::sharedRunsPercent, whose networks get
  /// their nodes from \p networkNodes (nullopt: the element kind has no
  /// networks here); with \p branchTwins, one of
  /// GeneratorProfile::branchTwinsPercent, where room allows.
  void addParallelBlock(
      Scenario &s, Model &model, ChoiceSource &rng, size_t steps,
      bool sharedRuns, bool branchTwins,
      const std::function<std::optional<std::vector<NetworkNode>>(ElemKind)>
          &networkNodes) const;
  /// Appends a fan-in block (GeneratorProfile::fanInPercent) to \p s the
  /// same way.
  void addFanInBlock(Scenario &s, Model &model, ChoiceSource &rng,
                     size_t steps) const;

  GeneratorProfile profile_;
  Capabilities capabilities_;
};

/// A rapidcheck generator of scenarios for \p profile (rapidcheck's size is
/// the number of steps), for properties written with RC_GTEST_PROP.
rc::Gen<Scenario> genScenario(const GeneratorProfile &profile,
                              const Capabilities &capabilities);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_GENERATORS_H
