//===- drt/conformance/Model.h - The reference model ------------*- C++ -*-===//
//
// A pure model of the residency contract (docs/semantics.md): records,
// tensors and views, devices with their logical memory, raw locations,
// planned faults, networks and contexts. It shares no code with any backend;
// the runner compares every backend with it after every step.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_MODEL_H
#define DRT_CONFORMANCE_MODEL_H

#include "drt/DeviceConfig.h"
#include "drt/Tensor.h"
#include "drt/conformance/Scenario.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace drt::conformance {

/// Which bytes of a record the model knows: sorted, disjoint, non-adjacent
/// half-open ranges, so that "all known" and "none known" (by far the most
/// common cases) cost one range or none whatever the record's size.
class KnownBytes {
public:
  using Range = std::pair<size_t, size_t>;

  /// Marks [begin, end) known.
  void mark(size_t begin, size_t end);
  /// Marks [begin, end) unknown.
  void forget(size_t begin, size_t end);
  /// Marks everything unknown.
  void clear() { ranges_.clear(); }
  /// True when every byte of [begin, end) is known.
  bool covers(size_t begin, size_t end) const;
  /// The known ranges, in order.
  const std::vector<Range> &ranges() const { return ranges_; }
  /// The known ranges clipped to [begin, end) and shifted to start at 0.
  std::vector<Range> within(size_t begin, size_t end) const;

  friend bool operator==(const KnownBytes &, const KnownBytes &) = default;

private:
  std::vector<Range> ranges_;
};

/// A record's bytes, shared between copies of a model until one of them
/// writes: the linearizability check copies the model for every order it
/// tries, and a copy of every record's bytes each time would cost more than
/// the steps it replays.
class RecordBytes {
public:
  /// The bytes (none until made).
  std::span<const uint8_t> bytes() const { return {data_.get(), size_}; }
  size_t size() const { return size_; }
  const uint8_t *data() const { return data_.get(); }
  /// The bytes to write, copied first when another model shares them.
  std::span<uint8_t> mutableBytes();
  /// Makes \p size bytes of unspecified value, shared with nothing, for the
  /// caller to write every one of.
  std::span<uint8_t> makeForOverwrite(size_t size);
  /// Replaces the bytes with a copy of \p from.
  void assign(std::span<const uint8_t> from);

private:
  std::shared_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

/// The model of one residency record (the storage a tensor and its views
/// share).
struct ModelRecord {
  size_t bytes = 0;
  ResidencyState state = ResidencyState::Host;
  /// The device holding the data when Device or Mirrored.
  std::string device;
  /// The raw location it took over, or "" when the device allocated.
  std::string location;
  /// The data's true value (empty when the model does not track contents)
  /// and which bytes of it are known.
  RecordBytes data;
  KnownBytes known;
  /// The known bytes a float add, mul or scale computed (within known): where
  /// such an element is a NaN, its sign and payload are unspecified (semantics
  /// §7), so any NaN matches it. Every other known byte is exact, NaNs included
  /// (a host write, a transfer and a copy node move bits unchanged).
  KnownBytes openNaN;
  /// Makes every byte unknown.
  void forgetContents() {
    known.clear();
    openNaN.clear();
  }
  /// Number of non-empty tensors referring to it.
  int references = 0;
};

/// The model of one named tensor or view.
struct ModelTensor {
  /// -1 for an empty (moved-from) tensor.
  int record = -1;
  ElemKind kind = ElemKind::Float32;
  std::vector<size_t> dims;
  size_t offsetBytes = 0;
  bool isView = false;

  bool empty() const { return record < 0; }
  size_t numElements() const;
  size_t bytes() const;
};

/// The model of a raw location from allocateDeviceMemory.
struct ModelLocation {
  enum class State { Live, Owned, Dead };
  std::string device;
  uint64_t bytes = 0;
  State state = State::Dead;
};

/// A fault planned on a device.
struct ModelFault {
  FaultSite site;
  unsigned remaining;
  ErrorCode code;
};

/// What the model takes from a created device besides its spec.
struct DeviceTraits {
  /// What the device declares (its configuration's capabilities).
  Capabilities capabilities;
  /// Its maximumMemory(). The model holds a device to its spec's budget when
  /// the spec gives one, else to this, the backend's default (0: unlimited).
  uint64_t maximumMemory = 0;

  friend bool operator==(const DeviceTraits &, const DeviceTraits &) = default;
};

/// The model of one device.
struct ModelDevice {
  DeviceSpec spec;
  DeviceTraits traits;
  bool shutDown = false;
  uint64_t used = 0;
  /// The most `used` has been.
  uint64_t peakUsed = 0;
  size_t live = 0;
  /// Allocations made so far (each one counted once, whatever became of it)
  /// and the most live at once: every allocation beyond that many reused
  /// memory an earlier one had freed.
  uint64_t allocations = 0;
  size_t peakLive = 0;
  std::vector<ModelFault> faults;
  /// A DeviceLost fault was planned here at some point: it may shut the
  /// device down, so no transfer on it may be issued without waiting.
  bool lossPlanned = false;
  /// Networks added (and not evicted) on the device: name to add command.
  std::map<std::string, Command> networks;

  /// The budget the device enforces: the spec's, else its default
  /// (0: unlimited).
  uint64_t budget() const {
    return spec.budget ? spec.budget : traits.maximumMemory;
  }
  /// What the budget leaves (availableMemory()).
  uint64_t available() const {
    uint64_t b = budget();
    return used >= b ? 0 : b - used;
  }
};

/// The context the runner keeps for each network name.
struct ModelContext {
  std::vector<std::pair<std::string, std::string>> bindings;
  std::string lastNetwork;
};

/// Orders names as std::string's < does, comparing in place: a scenario's
/// names are a few characters long, and the model and the runner look names
/// up at every step, where calling memcmp for each comparison would cost
/// more than the comparison itself.
struct NameOrder {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const {
    size_t n = a.size() < b.size() ? a.size() : b.size();
    for (size_t i = 0; i < n; ++i)
      if (a[i] != b[i])
        return static_cast<unsigned char>(a[i]) <
               static_cast<unsigned char>(b[i]);
    return a.size() < b.size();
  }
};
/// A map keyed by names, in name order.
template <typename T> using NameMap = std::map<std::string, T, NameOrder>;
/// A set of names, in name order.
using NameSet = std::set<std::string, NameOrder>;

/// A coverage label: the text of up to four parts joined. Each part views a
/// string that outlives every run (a literal or an enumerator's name), so
/// that a step names the situations it reached without building strings.
class CoverageLabel {
public:
  constexpr CoverageLabel(std::string_view a, std::string_view b = {},
                          std::string_view c = {}, std::string_view d = {})
      : parts_{a, b, c, d} {}
  /// The parts joined.
  std::string text() const;
  /// True when both view the same strings (not merely equal text): labels
  /// counted by identity, which is cheap, and merged by text() at the end.
  bool sameParts(const CoverageLabel &o) const;
  /// A hash of the parts' identity, consistent with sameParts().
  size_t identityHash() const;

private:
  std::array<std::string_view, 4> parts_;
};

/// The label of a run whose network node of \p consumer reads the output of
/// the node of \p producer just before it, over \p kind operands that
/// round: "node-pair-KIND-PRODUCER-CONSUMER" (the numerics family goes for
/// each).
CoverageLabel nodePairLabel(ElemKind kind, OpKind producer, OpKind consumer);

/// What the model predicts for one step.
struct ModelStep {
  Outcome outcome;
  /// Completion callbacks the step must see (exactly this many).
  int callbacks = 0;
  /// Coverage labels: which interesting situations the step reached.
  std::vector<CoverageLabel> labels;
};

/// Thrown by Model::apply when the model itself fails on a step (an
/// exception inside it): a defect of drt's reference model, never of the
/// backend under test, which the runner and the property runner report as
/// such.
class ModelFailure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The reference model. Copyable, so generators can use it as their state.
class Model {
public:
  /// A model of \p devices that all declare \p capabilities and are held to
  /// their specs' budgets only (a device without one is unlimited): enough
  /// for generating scenarios. Predictions for a backend come from the other
  /// constructor. With \p trackContents false the model predicts outcomes,
  /// states and memory only (contents never decide an outcome), at a cost
  /// independent of the tensors' sizes: what a generator needs.
  Model(std::vector<DeviceSpec> devices, Capabilities capabilities,
        bool trackContents = true);
  /// A model of \p devices, each with the traits \p traitsOf gives for its
  /// spec: its own capabilities and default budget, as the created device
  /// reports them (so a device configured without resident tensors may sit
  /// beside one with them).
  Model(std::vector<DeviceSpec> devices,
        const std::function<DeviceTraits(const DeviceSpec &)> &traitsOf,
        bool trackContents = true);
  Model() = default;

  /// Applies \p command and returns the predicted outcome. Throws
  /// ModelFailure, naming the command, when the model fails on it.
  ModelStep apply(const Command &command);
  /// Frees the remaining raw locations and destroys every tensor, as the
  /// runner's teardown does.
  void teardown();

  /// True while transfers or runs issued without waiting ('&') have not been
  /// waited for: until the next command written without '&'.
  bool transfersPending() const { return issuedWithoutWaiting_; }
  /// True while the one command pending of those issued without waiting is
  /// a from-device: its operation reached the device when it was issued, so
  /// a fault planned now (one that does not lose the device) is not its.
  bool loneReadBackPending() const { return loneReadBackPending_; }
  /// True while such a transfer or run of the record of tensor \p name is
  /// pending.
  bool transferPendingOn(const std::string &name) const;
  /// Whether \p c, issued without waiting now, changes no device's
  /// accounting by completing successfully: an upload from the host
  /// allocates when it is issued (a transfer waits for a busy record before
  /// it returns), an upload of a mirror elsewhere drops that mirror when it
  /// is issued, a transfer to where the record is moves nothing, a
  /// read-back that keeps the device copy frees nothing, and a run whose
  /// every bound tensor is resident on its device reads its inputs and
  /// writes its outputs in place, so it allocates and frees nothing. False
  /// for the others: a move of a record on another device only (the upload
  /// allocates once the read-back completes), a read-back that releases (it
  /// frees when it completes), a run that stages a host input (it frees the
  /// copy when it ends) or allocates an output, and every other command.
  bool accountingFixedByCompletion(const Command &c) const;
  /// True while transfers issued without waiting are pending and none of
  /// them changes any device's accounting when it completes (each one
  /// accountingFixedByCompletion holds for, with success predicted): what
  /// each device has left is what the model says.
  bool pendingAccountingFixed() const {
    return issuedWithoutWaiting_ && pendingAccountingFixed_;
  }

  const NameMap<ModelTensor> &tensors() const { return tensors_; }
  /// A number that changes whenever a tensor name is added to tensors() or
  /// removed from it, and that no other Model object shares (a copy gets a
  /// number of its own): while it stays the same, the entries of tensors()
  /// stay where they are, so a caller may keep pointers to them.
  uint64_t tensorNamesStamp() const { return namesStamp_.value; }
  /// The same for records(): it changes whenever a record is added or
  /// removed, so that pointers to its entries stay valid while it does not.
  uint64_t recordsStamp() const { return recordsStamp_.value; }
  const std::map<int, ModelRecord> &records() const { return records_; }
  const NameMap<ModelDevice> &devices() const { return devices_; }
  /// Gives device \p name the budget \p bytes from its creation on, as if
  /// its spec had said so: for a generator that fixes a budget once it
  /// knows what the scenario holds there. \p bytes must be at least the
  /// device's peakUsed, so that no step applied so far would have had
  /// another outcome; the linearizability check also sets it to what the
  /// device holds for one step, then back, to apply that step as refused.
  void setDeviceBudget(const std::string &name, uint64_t bytes);
  const NameMap<ModelLocation> &locations() const { return locations_; }
  /// The raw locations that are not dead (live, or owned by a record).
  const NameSet &activeLocations() const { return activeLocations_; }
  const NameMap<ModelContext> &contexts() const { return contexts_; }
  /// The device each network name was last added to.
  const std::map<std::string, std::string> &networkDevices() const {
    return networkDevice_;
  }
  /// Networks placed by the host manager: name to device.
  const std::map<std::string, std::string> &placement() const {
    return placement_;
  }

  /// The tensor named \p name, or nullptr.
  const ModelTensor *tensor(const std::string &name) const;
  /// The record of the tensor named \p name, or nullptr (absent or empty).
  const ModelRecord *recordOf(const std::string &name) const;
  /// True when the model tracks contents (see the constructor).
  bool tracksContents() const { return trackContents_; }
  /// Number of faults planned on \p device and not yet struck.
  size_t pendingFaults(const std::string &device) const;

  /// The tensors bound to the outputs of the last network that context
  /// \p network ran, in the network's output order (null where an output
  /// is unbound): what an ensure-outputs of it brings home.
  std::vector<const std::string *>
  boundOutputs(const std::string &network) const;

private:
  using Step = ModelStep;

  /// apply() without turning the model's own failures into ModelFailure.
  ModelStep applyStep(const Command &command);
  ModelDevice &device(const std::string &name) { return devices_.at(name); }
  int newRecord(size_t bytes);
  void dropReference(int record, Step &step);
  void freeOnDevice(const std::string &device, uint64_t bytes);
  void markDead(const std::string &location);
  void releaseRecord(ModelRecord &r);
  void shutdownDevice(const std::string &device, Step &step);
  std::optional<ErrorCode> strike(const std::string &device, FaultSite site,
                                  Step &step);
  Outcome failWith(const std::string &device, ErrorCode code, Step &step);
  Outcome allocate(const std::string &device, uint64_t bytes, Step &step);
  /// Whether \p record is Device or Mirrored on a device other than \p
  /// device.
  bool residentElsewhere(int record, const std::string &device) const;
  Outcome moveHere(int record, const std::string &device,
                   const std::string &location, Step &step);
  Outcome upload(int record, const std::string &device,
                 const std::string &location, Step &step);
  Outcome fetchToHost(int record, bool release, Step &step);
  Outcome writeHost(ModelTensor &t, uint64_t pattern, bool refill, Step &step);
  Outcome releaseTensor(const ModelTensor &t, const std::string &device,
                        Step &step);
  Outcome run(const Command &c, Step &step);
  Outcome ensureOutputs(const Command &c, Step &step);
  void unbindEverywhere(const std::string &tensor);
  void forgetTensor(const std::string &name, Step &step);
  /// The tensor named \p name, added (empty) when absent.
  ModelTensor &tensorSlot(const std::string &name);

  /// A process-wide unique number, renewed on every copy and on renew().
  struct UniqueStamp {
    uint64_t value = next();
    UniqueStamp() = default;
    UniqueStamp(const UniqueStamp &) : value(next()) {}
    UniqueStamp &operator=(const UniqueStamp &) {
      value = next();
      return *this;
    }
    void renew() { value = next(); }
    static uint64_t next();
  };

  bool trackContents_ = true;
  NameMap<ModelTensor> tensors_;
  UniqueStamp namesStamp_;
  std::map<int, ModelRecord> records_;
  UniqueStamp recordsStamp_;
  int nextRecord_ = 0;
  NameMap<ModelDevice> devices_;
  NameMap<ModelLocation> locations_;
  NameSet activeLocations_;
  NameMap<ModelContext> contexts_;
  std::map<std::string, std::string> networkDevice_;
  std::map<std::string, std::string> placement_;
  /// The records of the transfers and runs issued without waiting since the
  /// last command that waits.
  std::set<int> pendingRecords_;
  /// A command was issued without waiting since the last one that waits
  /// (one that is refused at once too: scenario validation counts it).
  bool issuedWithoutWaiting_ = false;
  bool loneReadBackPending_ = false;
  /// Every command issued without waiting since the last one that waits
  /// succeeds and changes no accounting by completing
  /// (accountingFixedByCompletion).
  bool pendingAccountingFixed_ = false;
  /// Those of runs, each with the device of its run.
  std::map<int, std::string> pendingRunRecords_;
  /// The networks of those runs.
  std::set<std::string> pendingRunNetworks_;
  /// The records those runs read (bound to a placeholder no node writes).
  std::set<int> pendingRunInputs_;
};

/// True when \p command names only objects that \p model can act on (tensors
/// exist or are fresh as the command needs, devices are declared, locations
/// were allocated, on any device, networks were added).
bool commandFitsModel(const Command &command, const Model &model);

/// Whether \p dims of \p kind make a valid tensor type (semantics §1: at
/// least one dimension, none zero, at most MaxTensorBytes in all), by the
/// model's own rule.
bool validDims(const std::vector<size_t> &dims, ElemKind kind);

/// The state's name with the first letter capitalised ("Host", "Device").
std::string_view stateName(ResidencyState state);
/// stateName() as a string.
std::string stateLabel(ResidencyState state);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_MODEL_H
