//===- Generators.cpp - Scenario generators -------------------------------===//
#include "drt/conformance/Generators.h"
#include "drt/conformance/Configuration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

namespace drt::conformance {

namespace {

using Name = const std::string *;

/// The most commands of a fan-in block: the create, the upload, a view per
/// branch and three commands of each branch.
constexpr size_t FanInMostCommands = 2 + MaxBranches + 3 * MaxBranches;

/// The most a device may have held beyond what it holds at a parallel block
/// for the block to contend for its budget: each contending upload is at
/// least that large.
constexpr uint64_t MaxContendedBytes = uint64_t(1) << 20;

/// True for an integer factor an f32 cannot hold exactly (past 2^24).
bool wideForF32(double factor) { return std::fabs(factor) > 0x1p24; }

/// Factors \p factors holds that an f32 cannot (wideForF32), in order.
std::vector<double> wideForF32(const std::vector<double> &factors) {
  std::vector<double> wide;
  std::copy_if(factors.begin(), factors.end(), std::back_inserter(wide),
               [](double f) { return wideForF32(f); });
  return wide;
}

bool resident(const ModelRecord &r) {
  return r.state == ResidencyState::Device ||
         r.state == ResidencyState::Mirrored;
}

/// Groups a target tensor is drawn from, by the state of its record.
enum Group { HostGroup, DeviceGroup, MirroredGroup, LostGroup, EmptyGroup };

/// The live objects of the model, gathered once per step. The names point
/// into the model, which does not change while one command is drawn.
struct Choices {
  std::vector<Name> tensors, owners, roomy;
  std::array<std::vector<Name>, 5> groups;
  std::array<std::vector<Name>, 5> groupOwners;
  std::vector<Name> devices, liveDevices, networks, locations;
  uint64_t liveBytes = 0;
  bool anyResident = false;

  /// Empties every list, keeping what each has grown to: gathered for every
  /// command drawn, they need no allocation once a scenario is under way.
  void clear() {
    for (std::vector<Name> *list : {&tensors, &owners, &roomy, &devices,
                                    &liveDevices, &networks, &locations})
      list->clear();
    for (size_t g = 0; g < groups.size(); ++g) {
      groups[g].clear();
      groupOwners[g].clear();
    }
    liveBytes = 0;
    anyResident = false;
  }
};

/// Draws one scenario: the model is the state, each command is drawn for it.
class Drawing {
public:
  Drawing(const GeneratorProfile &profile, ChoiceSource &rng, Model &model,
          const std::map<std::string, int> *reached)
      : p_(profile), rng_(rng), m_(model), reached_(reached) {}

  /// One command for the model's current state, or nullopt when the drawn
  /// kind is impossible now.
  std::optional<Command> next() {
    // Whether the command drawn last asked for its callback to issue this
    // one (inCallbackPercent).
    bool continuing = std::exchange(continueInCallback_, false);
    // A command held back for the fault planned just before it, and the
    // commands planned to come next.
    if (heldCommand_) {
      std::optional<Command> held = std::exchange(heldCommand_, std::nullopt);
      planAfterStruckUpload(held);
      return held;
    }
    if (std::optional<Command> c = takeFirst(planned_))
      return c;
    // The fault planned behind a read-back still in flight; then work
    // towards an operation at its site.
    if (faultBehind_) {
      planFault_ = std::exchange(faultBehind_, std::nullopt);
      focus_ = kindHitting(planFault_->site);
      return draw(CommandKind::InjectFault);
    }
    if (evictNext_) {
      Command c;
      c.kind = CommandKind::EvictNetwork;
      c.target = *std::exchange(evictNext_, {});
      return c;
    }
    gather();
    if (std::optional<Command> b = burstCommand())
      return b;
    if (std::optional<Command> c = contentBurstCommand())
      return c;
    if (std::optional<Command> n = networkBurstCommand())
      return n;
    if (std::optional<Command> r = releasedBlockCommand())
      return r;
    if (std::optional<Command> t = twinsCommand())
      return t;
    if (std::optional<Command> w = wideRunCommand())
      return w;
    if (std::optional<Command> w = writeAfterReadCommand())
      return w;
    if (std::optional<Command> v = viewOfPendingOutputCommand())
      return v;
    if (std::optional<Command> a = anchorCommand())
      return a;
    if (faultWanted_ && faultWantedStepsLeft_ <= 0)
      faultWanted_.reset();
    if (continuing && !focus_)
      focus_ = continuationKind();
    CommandKind kind;
    // The upload planned into a raw location (planTakeover_) comes first.
    bool takeover = planTakeover_.has_value();
    if (takeover) {
      kind = CommandKind::ToDevice;
    } else if (wanted_ && possible(CommandKind::Create) && rng_.percent(80)) {
      kind = CommandKind::Create;
    } else if (std::optional<CommandKind> planned = viewPlanStep()) {
      kind = *planned;
    } else if (std::optional<CommandKind> ensure = faultedEnsureStep()) {
      kind = *ensure;
    } else if (faultWanted_ && faultWantedStepsLeft_-- > 0 &&
               rng_.percent(60)) {
      // A fault waits for an operation at its site that reaches the
      // device: work towards one (for a run, a network, then tensors of its
      // type, made as the run lacks them).
      CommandKind hitting = kindHitting(faultWanted_->site);
      kind = possible(hitting) && rng_.percent(80) ? hitting
             : hitting == CommandKind::Run         ? CommandKind::AddNetwork
                                                   : CommandKind::Create;
    } else if (largeNet_ && largeStepsLeft_-- > 0 &&
               possible(CommandKind::Run) && rng_.percent(70)) {
      runTarget_ = *largeNet_;
      kind = CommandKind::Run;
    } else if (twinNet_ && twinStepsLeft_-- > 0 && possible(CommandKind::Run) &&
               rng_.percent(70)) {
      // A near twin of a placed network (makeNearTwin), run soon.
      runTarget_ = *twinNet_;
      kind = CommandKind::Run;
    } else if (besideRecord_ && possible(CommandKind::ToDevice)) {
      // A transfer of another record beside the pending one (below).
      kind = rng_.percent(60) ? CommandKind::ToDevice : CommandKind::FromDevice;
      besideNow_ = true;
    } else if (focus_ && possible(*focus_) && rng_.percent(60)) {
      kind = *focus_;
    } else if (!drawKind(kind)) {
      kind = CommandKind::Create;
    }
    focus_.reset();
    std::optional<Command> c = draw(kind);
    if ((std::exchange(besideNow_, false) || takeover) && c)
      c->noWait = true;
    else if (p_.pipelinePercent && c && completesThroughCallback(c->kind) &&
             rng_.percent(p_.pipelinePercent))
      c->noWait = true;
    else if (p_.syncPercent && c && completesThroughCallback(c->kind) &&
             rng_.percent(p_.syncPercent))
      c->sync = true;
    // Under budgets of their own, a transfer that frees or allocates when
    // it completes is waited for: what an allocation after it finds would
    // depend on whether it had completed yet. So is every run (scenario
    // validation, which sees no residency, refuses a run with '&' on a
    // device with a budget: it may stage host inputs).
    bool fixed = c && c->noWait && m_.accountingFixedByCompletion(*c);
    if (c && c->noWait && anyBudget() &&
        (c->kind == CommandKind::Run || !fixed))
      c->noWait = false;
    besideRecord_.reset();
    if (c) {
      // Work in flight that changes no accounting by completing: now and
      // then the next command frees device memory beside it (later plans
      // below may take the next command for themselves).
      if (fixed && c->noWait && p_.freeBehindPendingPercent &&
          rng_.percent(p_.freeBehindPendingPercent)) {
        std::vector<CommandKind> frees;
        for (CommandKind k :
             {CommandKind::Release, CommandKind::Destroy, CommandKind::Free})
          if (p_.weights.count(k) && possible(k))
            frees.push_back(k);
        if (!frees.empty())
          focus_ = rng_.pick(frees);
      }
      // Now and then the next command transfers another record, issued
      // without waiting too, so that transfers of different records are in
      // flight together (sharing staging buffers, pool blocks, events): a
      // command on the busy record itself waits for it.
      if (c->noWait && c->kind != CommandKind::Run && rng_.percent(30))
        if (const ModelTensor *t = m_.tensor(c->target); t && !t->empty())
          besideRecord_ = t->record;
      followTensor_ = c->noWait && c->kind != CommandKind::Run
                          ? std::optional(c->target)
                          : std::nullopt;
      // A raw location being taken over by an upload issued without
      // waiting: now and then the next command frees it or gives it to
      // another tensor. In program order it is the first tensor's from the
      // request on, however late the upload into it comes (semantics §3).
      followLocation_.reset();
      if (c->noWait && c->kind == CommandKind::ToDevice &&
          !c->location.empty() && rng_.percent(70)) {
        followLocation_ = c->location;
        focus_ = rng_.percent(50) ? CommandKind::Free : CommandKind::ToDevice;
      }
      // An upload issued without waiting, then now and then one of the same
      // record into a raw location on another device: that upload first
      // waits for the record, so the location is being taken over for a
      // while (what followLocation_ then frees or gives away).
      if (c->noWait && c->kind == CommandKind::ToDevice &&
          c->location.empty() && rng_.percent(40))
        planTakeover_ = takeoverElsewhere(*c);
      if (planTakeover_)
        besideRecord_.reset();
      // A transfer of a run's output issued without waiting: now and then
      // the next command brings that run's outputs home, and meets it busy.
      if (followTensor_ && possible(CommandKind::EnsureOutputs) &&
          rng_.percent(70))
        for (Name net : ch_.networks)
          for (const std::string *out : m_.boundOutputs(*net))
            if (out && *out == *followTensor_) {
              planEnsure_ = *net;
              focus_ = CommandKind::EnsureOutputs;
            }
      // Outputs just brought home: now and then the next command uploads
      // one (issued without waiting as often as the family issues any).
      if (c->kind == CommandKind::EnsureOutputs && p_.pipelinePercent &&
          rng_.percent(80))
        for (const std::string *out : m_.boundOutputs(c->target))
          if (out && m_.tensor(*out) && !m_.tensor(*out)->empty()) {
            followTensor_ = *out;
            focus_ = CommandKind::ToDevice;
            break;
          }
      // A run issued without waiting: the next run often reads or writes
      // what it, or a run issued without waiting before it, holds: a chain
      // a device may run without waiting between, in which a backend that
      // reorders or fuses runs must keep every read before a later write.
      if (!c->noWait || c->kind != CommandKind::Run)
        busyRunRecords_.clear();
      if (c->noWait && c->kind == CommandKind::Run) {
        for (const auto &[ph, name] : c->bindings)
          busyRunRecords_.push_back(m_.tensor(name)->record);
        if (rng_.percent(60))
          focus_ = CommandKind::Run;
      }
    }
    // A read-back issued without waiting, then at once a fault planned on
    // its device (GeneratorProfile::faultBehindReadBackPercent).
    if (c && c->kind == CommandKind::FromDevice && !heldCommand_ &&
        !planFault_ && p_.faultBehindReadBackPercent &&
        !m_.transfersPending() && rng_.percent(p_.faultBehindReadBackPercent)) {
      const ModelDevice &d = m_.devices().at(c->device);
      std::vector<ErrorCode> codes;
      for (ErrorCode code : p_.faultCodes)
        if (code != ErrorCode::DeviceLost)
          codes.push_back(code);
      if (d.traits.capabilities.faultInjection && !d.shutDown &&
          !d.lossPlanned && !codes.empty()) {
        c->noWait = true;
        c->sync = false;
        // Half the time the fault comes first, for a read-back of another
        // record right after this one, which is struck while this one's
        // completion may still be on its way: a backend that strikes a
        // fault at the next completion it delivers fails this one instead.
        // Both records are on the device (the other uploaded first where
        // it is on the host), so that both reach it.
        bool readBackFaultPlanned =
            std::any_of(d.faults.begin(), d.faults.end(), [](const auto &f) {
              return f.site == FaultSite::TransferFromDevice;
            });
        // Tensors of records on the device, or on the host (uploaded
        // first), one per record.
        std::vector<const std::string *> candidates;
        std::set<int> records;
        if (!readBackFaultPlanned)
          for (const auto &[name, x] : m_.tensors()) {
            if (x.empty() || x.isView)
              continue;
            const ModelRecord &r = m_.records().at(x.record);
            if ((r.state == ResidencyState::Host ||
                 (r.state == ResidencyState::Device &&
                  r.device == c->device)) &&
                records.insert(x.record).second)
              candidates.push_back(&name);
          }
        if (candidates.size() >= 2 && rng_.percent(50)) {
          size_t first = rng_.below(candidates.size());
          size_t second = (first + 1 + rng_.below(candidates.size() - 1)) %
                          candidates.size();
          c->target = *candidates[first];
          Command struck = commandOn(CommandKind::FromDevice,
                                     *candidates[second], c->device);
          struck.release = rng_.percent(50);
          Command fault;
          fault.kind = CommandKind::InjectFault;
          fault.device = c->device;
          fault.fault.site = FaultSite::TransferFromDevice;
          fault.fault.nth = 2;
          fault.fault.code = codes[rng_.below(codes.size())];
          // The uploads of the records on the host, where the budget lets
          // both through.
          Model after(m_);
          for (const std::string *name : {&c->target, &struck.target}) {
            const ModelTensor &x = *m_.tensor(*name);
            if (m_.records().at(x.record).state != ResidencyState::Host)
              continue;
            Command upload = commandOn(CommandKind::ToDevice, *name, c->device);
            if (after.apply(upload).outcome != Outcome::ok()) {
              planned_.clear();
              break;
            }
            planned_.push_back(std::move(upload));
          }
          if (after.records().at(after.tensor(c->target)->record).state ==
                  ResidencyState::Device &&
              after.records().at(after.tensor(struck.target)->record).state ==
                  ResidencyState::Device) {
            planned_.push_back(std::move(fault));
            planned_.push_back(std::move(*c));
            planned_.push_back(std::move(struck));
            return takeFirst(planned_);
          }
          planned_.clear();
        }
        FaultSite site =
            rng_.percent(60)
                ? FaultSite::TransferFromDevice
                : std::array{FaultSite::Allocation, FaultSite::TransferToDevice,
                             FaultSite::Run}[rng_.below(3)];
        faultBehind_ =
            PlannedFault{c->device, site, unsigned(1 + rng_.below(2)),
                         codes[rng_.below(codes.size())]};
      }
    }
    if (c && c->kind == CommandKind::InjectFault && rng_.percent(60)) {
      focus_ = kindHitting(c->fault.site);
      // A read-back fault may strike one output of several that
      // ensure-outputs brings back: the others must still come back.
      if (c->fault.site == FaultSite::TransferFromDevice &&
          p_.weights.count(CommandKind::EnsureOutputs) && rng_.percent(40))
        focus_ = CommandKind::EnsureOutputs;
    }
    // A freed block is what a caching allocator hands out next: allocate
    // its size again soon, and the freed location stays a stale one to use.
    if (c && c->kind == CommandKind::Free &&
        m_.activeLocations().count(c->target) && rng_.percent(50)) {
      focus_ = CommandKind::Alloc;
      reuseBytes_ = m_.locations().at(c->target).bytes;
    }
    // A mirror lives until the next host write or transfer: act on it soon.
    if (c && c->kind == CommandKind::FromDevice && !c->release &&
        rng_.percent(40))
      focus_ = CommandKind::ToDevice;
    // A fault planned right before the command it strikes: one that waits
    // for an operation at its site (faultWanted_), and now and then a run
    // fault (GeneratorProfile::runFaultPercent). The command fails, and the
    // fault does not wait for a later one.
    bool wanted =
        c && faultWanted_ && kindHitting(faultWanted_->site) == c->kind;
    if (c && (wanted || (c->kind == CommandKind::Run && p_.runFaultPercent &&
                         rng_.percent(p_.runFaultPercent)))) {
      const std::string &dev = c->kind == CommandKind::Run
                                   ? m_.networkDevices().at(c->target)
                                   : c->device;
      const ModelDevice &d = m_.devices().at(dev);
      // Only for a command that would otherwise succeed: one refused
      // earlier (bindings, budget, residency) never reaches the fault.
      if (d.traits.capabilities.faultInjection && !d.shutDown &&
          Model(m_).apply(*c).outcome == Outcome::ok()) {
        planFault_ =
            wanted
                ? PlannedFault{dev, faultWanted_->site, 1, faultWanted_->code}
                : PlannedFault{dev, FaultSite::Run, 1, nextRunFaultCode()};
        if (wanted)
          faultWanted_.reset();
        heldCommand_ = std::move(c);
        return draw(CommandKind::InjectFault);
      }
    }
    // An evicted network: a network still placed, mostly one whose name
    // shares a prefix with it, runs soon (evicting one name must leave the
    // others alone).
    if (c && c->kind == CommandKind::EvictNetwork && rng_.percent(50)) {
      std::vector<Name> related, placed;
      for (const auto &[name, dev] : m_.placement()) {
        if (name == c->target)
          continue;
        placed.push_back(&name);
        if (name.rfind(c->target, 0) == 0 || c->target.rfind(name, 0) == 0)
          related.push_back(&name);
      }
      if (!placed.empty()) {
        runTarget_ =
            !related.empty() ? *rng_.pick(related) : *rng_.pick(placed);
        focus_ = CommandKind::Run;
      }
    }
    // A large network just added: run it over its millions of elements
    // within the next few commands (tensors of its type are made first).
    if (c && c->kind == CommandKind::AddNetwork && largeAdd_) {
      largeNet_ = c->target;
      largeStepsLeft_ = 10;
    }
    largeAdd_ = false;
    if (c && continuing && issuableInCallback(c->kind) && !c->noWait) {
      c->sync = false;
      c->inCallback = true;
    } else if (c && p_.inCallbackPercent && completesThroughCallback(c->kind) &&
               !c->noWait && !c->sync && !m_.transfersPending() &&
               rng_.percent(p_.inCallbackPercent)) {
      // Mostly the same tensor again: the upload done, read it back; the
      // read-back done, upload it elsewhere or release it.
      continueInCallback_ = true;
      if (c->kind != CommandKind::Run)
        followTensor_ = c->target;
    }
    planAfterStruckUpload(c);
    return c;
  }

  /// Half the time, plans what follows \p c when it is an upload that a
  /// fault planned on its device strikes (planAfterFailedUpload).
  void planAfterStruckUpload(const std::optional<Command> &c) {
    if (!c || c->kind != CommandKind::ToDevice || !planned_.empty())
      return;
    auto d = m_.devices().find(c->device);
    if (d == m_.devices().end())
      return;
    // A fault that loses the device leaves no device to upload to.
    bool struck = std::any_of(
        d->second.faults.begin(), d->second.faults.end(), [](const auto &f) {
          return f.remaining == 1 && f.code != ErrorCode::DeviceLost &&
                 (f.site == FaultSite::Allocation ||
                  f.site == FaultSite::TransferToDevice);
        });
    if (struck && rng_.percent(50))
      planAfterFailedUpload(*c);
  }

  /// The kind of a command issued from inside a callback: a transfer
  /// mostly, now and then a release, or a shutdown where the family shuts
  /// devices down.
  CommandKind continuationKind() {
    uint64_t at = rng_.below(100);
    if (at < 8 && p_.weights.count(CommandKind::Shutdown))
      return CommandKind::Shutdown;
    if (at < 20)
      return CommandKind::Release;
    return at < 60 ? CommandKind::FromDevice : CommandKind::ToDevice;
  }

  /// The nodes of a network over \p kind that reads two inputs or more and
  /// writes at most two outputs, or nullopt when networks of \p kind do not
  /// verify in this scenario.
  std::optional<std::vector<NetworkNode>> nodesReadingTwo(ElemKind kind) {
    if (!networkKinds_)
      networkKinds_ = networkKinds();
    if (std::find(networkKinds_->begin(), networkKinds_->end(), kind) ==
        networkKinds_->end())
      return std::nullopt;
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<NetworkNode> nodes = pickNodes(kind);
      nodes.resize(std::min<size_t>(nodes.size(), 2));
      size_t inputs = 0;
      for (const Placeholder &p : networkPlaceholders(nodes, Type{kind, {1}}))
        inputs += !networkWrites(nodes, p.name);
      if (inputs >= 2)
        return nodes;
    }
    return std::vector<NetworkNode>{{OpKind::Add, {"x", "y"}, "o0", 1.0}};
  }

  /// Tells the drawing how many commands its scenario has room for, so that
  /// allocation bursts (GeneratorProfile::allocationBursts) find their
  /// places: the reuse burst in the first half, the pressure burst after.
  void plan(size_t steps) {
    if (p_.releasedBlockRunPercent && steps >= 12 &&
        rng_.percent(p_.releasedBlockRunPercent))
      releasedBlockAt_ = rng_.below(steps - 11);
    if (p_.contentTwinsPercent && steps >= 12 &&
        rng_.percent(p_.contentTwinsPercent))
      twinsAt_ = rng_.below(steps - 9);
    // A create a placeholder, up to three uploads, the network and its run:
    // as many placeholders as the scenario has room for.
    if (p_.wideRunPercent && rng_.percent(p_.wideRunPercent)) {
      static const std::vector<size_t> Placeholders = {8, 9, 16, 17, 32, 33};
      std::vector<size_t> fit;
      for (size_t n : Placeholders)
        if (n + 5 <= steps)
          fit.push_back(n);
      if (!fit.empty()) {
        wideRunPlaceholders_ = rng_.pick(fit);
        wideRunAt_ = rng_.below(steps - (wideRunPlaceholders_ + 5) + 1);
      }
    }
    // Two networks, a tensor for each placeholder and its upload, a tensor
    // read back while the runs are issued, a view, two runs and a
    // read-back: 27 commands for networks of two nodes.
    if (p_.viewOfPendingOutputPercent && steps >= 31 &&
        rng_.percent(p_.viewOfPendingOutputPercent))
      viewOfPendingAt_ = rng_.below(steps - 30);
    // Two networks, a tensor for each placeholder of three runs and its
    // upload, the runs and three read-backs: 36 commands for networks of
    // two nodes.
    if (p_.writeAfterReadPercent && steps >= 40 &&
        rng_.percent(p_.writeAfterReadPercent))
      writeAfterReadAt_ = rng_.below(steps - 39);
    if (!p_.allocationBursts || steps < 2000)
      return;
    reuseAt_ = steps / 10 + rng_.below(steps * 3 / 10);
    pressureAt_ = steps / 2 + rng_.below(steps / 10);
    // After the pressure burst (at most 1,200 commands), with room for
    // about 1,000 commands of its own.
    if (p_.contentBurstPercent && rng_.percent(p_.contentBurstPercent))
      contentBurstAt_ = steps * 3 / 4 + rng_.below(steps / 20);
    if (p_.networkBurstPercent && rng_.percent(p_.networkBurstPercent))
      networkBurstAt_ = steps / 3 + rng_.below(steps / 10);
  }

private:
  void gather() {
    ch_.clear();
    // Anchors are left alone but for one step in fifty.
    bool hideAnchors = !anchors_.empty() && !rng_.percent(2);
    for (const auto &[name, t] : m_.tensors()) {
      if (hideAnchors &&
          std::find(anchors_.begin(), anchors_.end(), name) != anchors_.end())
        continue;
      ch_.tensors.push_back(&name);
      if (t.empty()) {
        ch_.groups[EmptyGroup].push_back(&name);
        continue;
      }
      const ModelRecord &r = m_.records().at(t.record);
      Group g = r.state == ResidencyState::Host       ? HostGroup
                : r.state == ResidencyState::Device   ? DeviceGroup
                : r.state == ResidencyState::Mirrored ? MirroredGroup
                                                      : LostGroup;
      ch_.groups[g].push_back(&name);
      if (!t.isView) {
        ch_.owners.push_back(&name);
        ch_.groupOwners[g].push_back(&name);
      }
      if (t.numElements() > 1)
        ch_.roomy.push_back(&name);
      ch_.anyResident = ch_.anyResident || resident(r);
    }
    for (const auto &[id, r] : m_.records())
      ch_.liveBytes += r.bytes;
    for (const auto &[name, d] : m_.devices()) {
      ch_.devices.push_back(&name);
      if (!d.shutDown)
        ch_.liveDevices.push_back(&name);
    }
    for (const auto &[name, d] : m_.networkDevices())
      ch_.networks.push_back(&name);
    // Active locations, and the few made last (freed ones among them, so
    // that stale locations are used too): a step costs no more as a long
    // scenario accumulates dead ones.
    for (const std::string &name : m_.activeLocations())
      ch_.locations.push_back(&name);
    for (const std::string &name : recentLocations_)
      if (auto it = m_.locations().find(name);
          it != m_.locations().end() && !m_.activeLocations().count(name))
        ch_.locations.push_back(&it->first);
  }

  /// Whether a device holds a budget of its own (not the backend's
  /// default).
  bool anyBudget() const {
    for (const auto &[name, d] : m_.devices())
      if (d.spec.budget)
        return true;
    return false;
  }

  bool possible(CommandKind kind) const {
    size_t live = m_.tensors().size();
    switch (kind) {
    case CommandKind::Create:
      return live < p_.maxTensors;
    case CommandKind::View:
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      return !ch_.tensors.empty() && live < p_.maxTensors;
    case CommandKind::Run:
    case CommandKind::EvictNetwork:
    case CommandKind::EnsureOutputs:
      return !ch_.networks.empty() && !ch_.tensors.empty();
    case CommandKind::Free:
      return !ch_.locations.empty();
    case CommandKind::Shutdown:
      // Shutting down an empty device teaches little: wait for residents.
      return ch_.anyResident;
    case CommandKind::AddNetwork:
    case CommandKind::Alloc:
    case CommandKind::InjectFault:
      return true;
    default:
      return !ch_.tensors.empty();
    }
  }

  bool drawKind(CommandKind &out) {
    unsigned total = 0;
    for (const auto &[kind, weight] : p_.weights)
      if (weight > 0 && possible(kind))
        total += unsigned(weight);
    if (total == 0)
      return false;
    uint64_t at = rng_.below(total);
    for (const auto &[kind, weight] : p_.weights) {
      if (weight <= 0 || !possible(kind))
        continue;
      if (at < unsigned(weight)) {
        out = kind;
        return true;
      }
      at -= unsigned(weight);
    }
    return false;
  }

  static CommandKind kindHitting(FaultSite site) {
    switch (site) {
    case FaultSite::Allocation:
    case FaultSite::TransferToDevice:
      return CommandKind::ToDevice;
    case FaultSite::TransferFromDevice:
      return CommandKind::FromDevice;
    case FaultSite::Run:
      return CommandKind::Run;
    }
    return CommandKind::ToDevice;
  }

  /// An upload of \p upload's tensor into a live raw location of its
  /// record's size on another device, or nullopt when there is none.
  std::optional<Command> takeoverElsewhere(const Command &upload) {
    const ModelRecord *r = m_.recordOf(upload.target);
    if (!r)
      return std::nullopt;
    std::vector<Name> fitting;
    for (Name name : ch_.locations) {
      const ModelLocation &l = m_.locations().at(*name);
      if (l.state == ModelLocation::State::Live && l.bytes == r->bytes &&
          l.device != upload.device)
        fitting.push_back(name);
    }
    if (fitting.empty())
      return std::nullopt;
    Command c;
    c.kind = CommandKind::ToDevice;
    c.target = upload.target;
    c.location = *rng_.pick(fitting);
    c.device = m_.locations().at(c.location).device;
    return c;
  }

  /// An upload into the location the last command takes over
  /// (followLocation_), of another tensor, mostly one of the location's size
  /// whose record is not the taker's: the second request for the location,
  /// which must be refused. Nullopt without such a location or tensor.
  std::optional<Command> secondTakeover() {
    if (!followLocation_)
      return std::nullopt;
    auto l = m_.locations().find(*followLocation_);
    const ModelRecord *taker =
        followTensor_ ? m_.recordOf(*followTensor_) : nullptr;
    if (l == m_.locations().end() || !taker)
      return std::nullopt;
    std::vector<Name> sameSize, others;
    for (Name name : ch_.tensors) {
      const ModelRecord *r = m_.recordOf(*name);
      if (!r || r == taker)
        continue;
      (r->bytes == l->second.bytes ? sameSize : others).push_back(name);
    }
    if (sameSize.empty() && others.empty())
      return std::nullopt;
    Command c;
    c.kind = CommandKind::ToDevice;
    c.target = !sameSize.empty() && (others.empty() || rng_.percent(80))
                   ? *rng_.pick(sameSize)
                   : *rng_.pick(others);
    c.device = l->second.device;
    c.location = l->first;
    return c;
  }

  /// A tensor, chosen by the state of its record first (uniformly over the
  /// states present, weighted), then mostly an owner (owners move residency,
  /// views observe it).
  Name pickTensor() {
    if (besideNow_ && besideRecord_) {
      // Mostly one at least half as large as the pending one: where that
      // one is copied in chunks through staging buffers, so is this one,
      // and the two take buffers from one pool while both are in flight.
      uint64_t pending = m_.records().at(*besideRecord_).bytes;
      std::vector<Name> others, large;
      for (Name name : ch_.tensors)
        if (const ModelTensor *t = m_.tensor(*name);
            t && !t->empty() && t->record != *besideRecord_) {
          others.push_back(name);
          if (2 * m_.records().at(t->record).bytes >= pending)
            large.push_back(name);
        }
      if (!large.empty() && rng_.percent(60))
        return rng_.pick(large);
      if (!others.empty())
        return rng_.pick(others);
    }
    if (followTensor_ && rng_.percent(70))
      if (auto it = m_.tensors().find(*followTensor_); it != m_.tensors().end())
        return &it->first;
    unsigned total = 0;
    for (int g = 0; g < 5; ++g)
      if (!ch_.groups[g].empty())
        total += p_.stateWeights[g];
    uint64_t at = rng_.below(total);
    for (int g = 0; g < 5; ++g) {
      if (ch_.groups[g].empty())
        continue;
      if (at >= p_.stateWeights[g]) {
        at -= p_.stateWeights[g];
        continue;
      }
      if (!ch_.groupOwners[g].empty() && rng_.percent(70))
        return rng_.pick(ch_.groupOwners[g]);
      return rng_.pick(ch_.groups[g]);
    }
    return rng_.pick(ch_.tensors);
  }

  /// The device a tensor's record lives on (mostly), or any device.
  const std::string &deviceFor(const std::string &tensor) {
    const ModelRecord *r = m_.recordOf(tensor);
    if (r && resident(*r) && rng_.percent(80))
      return r->device;
    return *rng_.pick(ch_.devices);
  }

  ElemKind pickKind() { return rng_.pick(scenarioKinds()); }

  /// The element kinds this scenario draws from: the input space's, or
  /// kindsPerScenario of them drawn on first use.
  const std::vector<ElemKind> &scenarioKinds() {
    if (!kinds_) {
      std::vector<ElemKind> all = p_.space.elemKinds;
      if (p_.kindsPerScenario && p_.kindsPerScenario < all.size()) {
        std::vector<ElemKind> some;
        while (some.size() < p_.kindsPerScenario) {
          // A kind weighs one more than its node pairs not yet covered.
          std::vector<unsigned> weights;
          unsigned total = 0;
          for (ElemKind k : all) {
            weights.push_back(1 + (p_.coverNodePairs
                                       ? unsigned(uncoveredPairs(k).size())
                                       : 0));
            total += weights.back();
          }
          size_t i = 0;
          for (unsigned at = unsigned(rng_.below(total)); at >= weights[i]; ++i)
            at -= weights[i];
          some.push_back(all[i]);
          all.erase(all.begin() + std::ptrdiff_t(i));
        }
        all = std::move(some);
      }
      kinds_ = std::move(all);
    }
    return *kinds_;
  }

  /// A fill pattern: a value class, then one of its patterns. With \p
  /// unusual, one of the classes beyond zeros and small exact values
  /// (specials, extremes, rounding, random bits).
  uint64_t pickPattern(bool unusual = false) {
    // A class by name first, so that classes with many patterns are not
    // drawn more often than the others. The classes are gathered from the
    // input space once per scenario, not per draw.
    if (valueClassNames_.empty()) {
      for (const ValueChoice &v : p_.space.values) {
        auto known =
            std::find_if(valueClassNames_.begin(), valueClassNames_.end(),
                         [&](const std::string *n) { return *n == v.name; });
        if (known == valueClassNames_.end()) {
          valueClassNames_.push_back(&v.name);
          valueClassPatterns_.emplace_back();
          known = valueClassNames_.end() - 1;
        }
        valueClassPatterns_[size_t(known - valueClassNames_.begin())].push_back(
            v.pattern);
      }
    }
    size_t index = rng_.below(valueClassNames_.size());
    if (unusual) {
      std::vector<size_t> classes;
      for (size_t i = 0; i < valueClassNames_.size(); ++i)
        if (valueClassOf(valueClassPatterns_[i].front()))
          classes.push_back(i);
      if (!classes.empty())
        index = rng_.pick(classes);
    }
    return rng_.pick(valueClassPatterns_[index]);
  }

  /// A byte size drawn from the input space: a class by weight, then a
  /// boundary in it (at or one element around), or any size in it.
  uint64_t pickBytes(size_t size, uint64_t most, uint64_t least = 0) {
    const std::vector<SizeClass> &classes = p_.space.sizeClasses;
    std::vector<unsigned> weights;
    unsigned total = 0;
    for (size_t i = 0; i < classes.size(); ++i) {
      unsigned w = p_.sizeClassWeights.empty()      ? classes[i].weight
                   : i < p_.sizeClassWeights.size() ? p_.sizeClassWeights[i]
                                                    : 0;
      if (i > 0 && classes[i].minBytes > most)
        w = 0;
      // With a least size, only the classes that reach it (with the
      // classes' own weights: a profile's weights are for tensors).
      if (least)
        w = classes[i].maxBytes > least && i > 0 && classes[i].minBytes <= most
                ? classes[i].weight
                : 0;
      weights.push_back(w);
      total += w;
    }
    if (total == 0)
      return size;
    uint64_t at = rng_.below(total);
    size_t cls = 0;
    while (cls + 1 < classes.size() && at >= weights[cls])
      at -= weights[cls++];
    if (cls == 0)
      return size;
    const SizeClass &c = classes[cls];
    uint64_t lo = std::max({c.minBytes, uint64_t(2 * size), least});
    uint64_t hi = std::min(c.maxBytes, most);
    if (lo > hi)
      return size;
    std::vector<uint64_t> edges;
    for (uint64_t b : p_.space.boundaries)
      if (b >= lo && b <= hi)
        edges.push_back(b);
    uint64_t bytes;
    if (!edges.empty() && rng_.percent(45)) {
      bytes = rng_.pick(edges);
      int around = int(rng_.below(3));
      if (around == 1 && bytes - size >= lo)
        bytes -= size;
      else if (around == 2 && bytes + size <= hi)
        bytes += size;
    } else {
      bytes = rng_.between(lo, hi);
    }
    return std::max<uint64_t>(bytes / size, 1) * size;
  }

  /// A shape of \p elements elements: mostly one dimension, sometimes two or
  /// three.
  std::vector<size_t> shapeOf(uint64_t elements) {
    int rank = int(rng_.below(10));
    if (rank >= 7 && elements >= 4) {
      std::vector<size_t> divisors;
      for (size_t d = 2; d <= 64 && d * d <= elements; ++d)
        if (elements % d == 0)
          divisors.push_back(d);
      if (!divisors.empty()) {
        size_t a = rng_.pick(divisors);
        size_t rest = elements / a;
        if (rank == 9)
          for (size_t d = 2; d <= 16 && d * d <= rest; ++d)
            if (rest % d == 0)
              return {a, d, rest / d};
        return {a, rest};
      }
    }
    return {size_t(elements)};
  }

  /// Bytes the input space lets the scenario's live records grow by.
  uint64_t liveBytesLeft() const {
    return p_.space.maxLiveBytes > ch_.liveBytes
               ? p_.space.maxLiveBytes - ch_.liveBytes
               : 0;
  }

  uint64_t budgetLeft(const std::string &device) const {
    const ModelDevice &d = m_.devices().at(device);
    return d.spec.budget > d.used ? d.spec.budget - d.used : 0;
  }

  /// A type for a new tensor: often one a network of the scenario takes (so
  /// that runs can bind it), else drawn from the input space; under a budget
  /// sometimes exactly what is left on a device, or one element more.
  void pickType(Command &c) {
    if (wanted_) {
      c.elemKind = wanted_->kind;
      c.dims = wanted_->dims;
      wanted_.reset();
      return;
    }
    if (!ch_.networks.empty() && rng_.percent(50)) {
      const std::string &net = *rng_.pick(ch_.networks);
      const ModelDevice &d = m_.devices().at(m_.networkDevices().at(net));
      auto it = d.networks.find(net);
      if (it != d.networks.end()) {
        c.elemKind = it->second.elemKind;
        c.dims = it->second.dims;
        return;
      }
    }
    c.elemKind = pickKind();
    size_t size = elemSize(c.elemKind);
    if (!p_.shapes.empty()) {
      c.dims = rng_.pick(p_.shapes);
      return;
    }
    uint64_t room = liveBytesLeft() ? liveBytesLeft() : size;
    const std::string &dev = *rng_.pick(ch_.devices);
    if (m_.devices().at(dev).spec.budget && rng_.percent(30)) {
      uint64_t left = budgetLeft(dev);
      uint64_t elements = left / size + (rng_.percent(50) ? 1 : 0);
      if (elements > 0 && elements * size <= room) {
        c.dims = {size_t(elements)};
        return;
      }
    }
    c.dims = shapeOf(pickBytes(size, room) / size);
  }

  /// A view with a network's type into a larger tensor of its kind, at an
  /// offset, so that runs read inputs in place at offsets. False when no
  /// tensor has room for one (or by chance).
  bool viewForNetwork(Command &c) {
    std::optional<std::string> planned = std::exchange(planView_, {});
    if (!planned && (ch_.networks.empty() || !rng_.percent(40)))
      return false;
    const std::string &net = planned ? *planned : *rng_.pick(ch_.networks);
    const ModelDevice &d = m_.devices().at(m_.networkDevices().at(net));
    auto it = d.networks.find(net);
    if (it == d.networks.end())
      return false;
    Type type{it->second.elemKind, it->second.dims};
    size_t n = type.numElements();
    std::vector<Name> sources;
    for (Name name : ch_.roomy) {
      const ModelTensor &t = *m_.tensor(*name);
      if (t.kind == type.kind && t.numElements() > n)
        sources.push_back(name);
    }
    if (sources.empty())
      return false;
    c.source = *rng_.pick(sources);
    c.dims = type.dims;
    // Now and then as many elements in another shape, which a run must
    // refuse to bind (semantics §7).
    if (rng_.percent(10)) {
      if (c.dims.size() > 1)
        c.dims = {n};
      else if (n > 1 && n % 2 == 0)
        c.dims = {2, n / 2};
    }
    size_t room = m_.tensor(c.source)->numElements() - n;
    switch (rng_.below(3)) {
    case 0: {
      // An alignment boundary or one element past it, where a backend's
      // offset arithmetic changes (words, pages, 64 KiB chunks): half the
      // time the largest the tensor has room for, which few tensors do.
      uint64_t align = rng_.pick(p_.space.alignments);
      if (rng_.percent(50))
        for (uint64_t a : p_.space.alignments)
          if (a / elemSize(type.kind) <= room)
            align = std::max(align, a);
      uint64_t elements = std::max<uint64_t>(align / elemSize(type.kind), 1);
      c.offset = std::min<uint64_t>(room, elements + rng_.below(2));
      break;
    }
    case 1:
      c.offset = room;
      break;
    default:
      c.offset = rng_.between(1, room);
      break;
    }
    return true;
  }

  std::vector<size_t> viewShape(const ModelTensor &src, uint64_t &offset) {
    size_t n = src.numElements();
    size_t size = elemSize(src.kind);
    int shape = int(rng_.below(20));
    if (shape < 3) {
      offset = 0;
      return src.dims;
    }
    // A full view of another shape: as many elements, flattened, or in two
    // rows.
    if (shape == 3 && (src.dims.size() > 1 || (n > 1 && n % 2 == 0))) {
      offset = 0;
      if (src.dims.size() > 1)
        return {n};
      return {2, n / 2};
    }
    size_t k;
    switch (rng_.below(5)) {
    case 0:
      k = 1;
      break;
    case 1:
      k = std::max<size_t>(n / 2, 1);
      break;
    case 2:
      k = n > 1 ? n - 1 : 1;
      break;
    default:
      k = size_t(rng_.between(1, n));
      break;
    }
    size_t room = n - k;
    switch (rng_.below(6)) {
    case 0:
      offset = 0;
      break;
    case 1:
      offset = room;
      break;
    case 2: {
      // At an alignment boundary, or one element past it.
      uint64_t align = rng_.pick(p_.space.alignments);
      uint64_t elements = std::max<uint64_t>(align / size, 1);
      offset = std::min<uint64_t>(room, elements + rng_.below(2));
      break;
    }
    default:
      offset = rng_.between(0, room);
      break;
    }
    if (shape == 19)
      offset = room + 1;
    return {k};
  }

  static constexpr std::array<OpKind, 5> Ops = {
      OpKind::Add, OpKind::Mul, OpKind::Relu, OpKind::Scale, OpKind::Copy};

  /// The pairs of operations (producer, consumer) of \p kind whose
  /// node-pair label the run has not reached and that no network of this
  /// scenario has been made for.
  std::vector<std::pair<OpKind, OpKind>> uncoveredPairs(ElemKind kind) const {
    std::vector<std::pair<OpKind, OpKind>> out;
    if (!reached_)
      return out;
    for (OpKind a : Ops)
      for (OpKind b : Ops) {
        if (!reached_->count(nodePairLabel(kind, a, b).text()) &&
            !plannedPairs_.count({kind, a, b}))
          out.emplace_back(a, b);
      }
    return out;
  }

  /// The operation of node \p i of a network of \p kind whose previous node
  /// is \p before: with coverNodePairs, mostly one that makes a pair not yet
  /// covered (node 0: the producer of one), else any.
  OpKind pickOp(ElemKind kind, size_t i, OpKind before) {
    if (p_.coverNodePairs && rng_.percent(75)) {
      std::vector<std::pair<OpKind, OpKind>> open = uncoveredPairs(kind);
      if (i > 0)
        std::erase_if(open, [&](const auto &p) { return p.first != before; });
      if (!open.empty()) {
        const auto &[producer, consumer] = rng_.pick(open);
        if (i == 0)
          return producer;
        plannedPairs_.insert({kind, producer, consumer});
        return consumer;
      }
    }
    return Ops[rng_.below(Ops.size())];
  }

  /// A network of 1 to maxNetworkNodes element-wise nodes over inputs x, y,
  /// z; node outputs feed later nodes.
  std::vector<NetworkNode> pickNodes(ElemKind kind) {
    // Every output needs a tensor of its own: mostly one or two nodes, yet
    // often enough three or more, where evaluation order shows.
    size_t most = std::max<size_t>(1, p_.maxNetworkNodes);
    size_t count =
        p_.minNetworkNodes > 1
            ? size_t(rng_.between(std::min(p_.minNetworkNodes, most), most))
        : rng_.percent(40) ? 1
        : rng_.percent(50) ? 2
                           : size_t(rng_.between(1, most));
    std::vector<std::string> values = {"x"};
    if (rng_.percent(70))
      values.push_back("y");
    if (rng_.percent(20))
      values.push_back("z");
    std::vector<NetworkNode> nodes;
    for (size_t i = 0; i < count; ++i) {
      NetworkNode n;
      n.op = pickOp(kind, i, i > 0 ? nodes.back().op : OpKind::Copy);
      n.output = "o" + std::to_string(i);
      size_t arity = (n.op == OpKind::Add || n.op == OpKind::Mul) ? 2 : 1;
      // Half the time an input is the previous node's output: chains, as
      // real networks are, whose results depend on the order nodes run in.
      for (size_t a = 0; a < arity; ++a)
        n.inputs.push_back(i > 0 && rng_.percent(50) ? values.back()
                                                     : rng_.pick(values));
      // Mostly two different inputs: a backend that confuses one
      // argument's buffer or offset with another's shows only then.
      if (arity == 2 && n.inputs[0] == n.inputs[1] && values.size() > 1 &&
          rng_.percent(75)) {
        size_t other = size_t(rng_.below(values.size() - 1));
        if (values[other] == n.inputs[0])
          other = values.size() - 1;
        n.inputs[1] = values[other];
      }
      // A pair covered is a node reading the output of the one before it.
      if (p_.coverNodePairs && i > 0 &&
          std::find(n.inputs.begin(), n.inputs.end(), values.back()) ==
              n.inputs.end())
        n.inputs[rng_.below(arity)] = values.back();
      if (n.op == OpKind::Scale)
        n.factor = pickFactor(kind);
      nodes.push_back(std::move(n));
      values.push_back(nodes.back().output);
    }
    return nodes;
  }

  double pickFactor(ElemKind kind) {
    if (!isFloatingPoint(kind)) {
      // Small factors, and the kind's extremes and integers that a float
      // (24 bits) or a 32-bit integer cannot hold: a backend that passes
      // the factor through a narrower type shows only with those.
      static const std::vector<double> Unsigned = {2, 3, 0, 1, 7, 255, 129};
      static const std::vector<double> Signed32 = {
          2, -1, 3, 0, 7, -128, 16777217, -2147483648.0, 2147483647};
      // i64 holds every integer double from -2^63 up to the largest below
      // 2^63.
      static const std::vector<double> Signed64 = [] {
        std::vector<double> v = Signed32;
        v.insert(v.end(), {1099511627777.0, -9007199254740991.0, 4294967297.0,
                           -0x1p63, std::nextafter(0x1p63, 0.0)});
        return v;
      }();
      // Rarely a factor the network refuses, on purpose: not an integer, or
      // one past either end of the kind's range.
      if (rng_.percent(3)) {
        static const std::vector<double> RefusedUnsigned = {0.5, -1, 256};
        static const std::vector<double> RefusedSigned32 = {0.5, -0x1p31 - 1,
                                                            0x1p31};
        static const std::vector<double> RefusedSigned64 = {
            0.5, std::nextafter(-0x1p63, -0x1p64), 0x1p63};
        return rng_.pick(kind == ElemKind::UInt8   ? RefusedUnsigned
                         : kind == ElemKind::Int32 ? RefusedSigned32
                                                   : RefusedSigned64);
      }
      const std::vector<double> &factors = kind == ElemKind::UInt8   ? Unsigned
                                           : kind == ElemKind::Int32 ? Signed32
                                                                     : Signed64;
      // A third of the time one that an f32 cannot hold (near twins of
      // the network then differ from it past an f32's precision).
      static const std::vector<double> Wide32 = wideForF32(Signed32),
                                       Wide64 = wideForF32(Signed64);
      if (kind != ElemKind::UInt8 && rng_.percent(33))
        return rng_.pick(kind == ElemKind::Int32 ? Wide32 : Wide64);
      return rng_.pick(factors);
    }
    // Exact factors, and factors whose conversion rounds (semantics §7: to
    // f32, then to f16 or bf16): rounded once more or once less, or at the
    // wrong width, they give other products.
    static const std::vector<double> Factors = {
        0.5, 2.0, -1.5, 3.0, -0.0, 1.0, 0.3, 0.1, 1.0 / 3.0, 1e-30, 3e38,
        // 1 + 2^-11 + 2^-30 and 1 + 2^-8 + 2^-30 round to 1 through f32,
        // but up when rounded from the double straight to f16 or bf16.
        1 + 0x1p-11 + 0x1p-30, 1 + 0x1p-8 + 0x1p-30,
        // f16's overflow tie and smallest denormal, an f32 denormal, and a
        // factor past f32's range (an infinity).
        65520.0, 0x1p-24, 1e-40, 3.5e38};
    return rng_.pick(Factors);
  }

  /// Element kinds a network can be made of on this model (those whose
  /// function verifies).
  ElemKind pickNetworkKind() {
    if (!networkKinds_)
      networkKinds_ = networkKinds();
    return networkKinds_->empty() ? ElemKind::Float32
                                  : rng_.pick(*networkKinds_);
  }

  /// The element kinds of the scenario whose networks verify.
  std::vector<ElemKind> networkKinds() {
    std::vector<ElemKind> kinds;
    for (ElemKind k : scenarioKinds()) {
      Command probe;
      probe.kind = CommandKind::AddNetwork;
      probe.target = "probe";
      probe.elemKind = k;
      probe.dims = {1};
      probe.nodes = {{OpKind::Copy, {"x"}, "o", 1.0}};
      if (!networkFunction(probe).verify())
        kinds.push_back(k);
    }
    return kinds;
  }

  /// The views at an offset of the type of the network \p add adds.
  std::vector<Name> viewsAtOffsetsFor(const Command &add) const {
    std::vector<Name> out;
    for (Name name : ch_.tensors) {
      const ModelTensor &t = *m_.tensor(*name);
      if (!t.empty() && t.offsetBytes != 0 && t.kind == add.elemKind &&
          t.dims == add.dims)
        out.push_back(name);
    }
    return out;
  }

  /// Views at an offset of \p network's type whose record is resident on
  /// its device: inputs a run must read in place at their offsets.
  std::vector<Name> residentViewsFor(const std::string &network) const {
    const std::string &dev = m_.networkDevices().at(network);
    std::vector<Name> out;
    for (Name name :
         viewsAtOffsetsFor(m_.devices().at(dev).networks.at(network))) {
      const ModelRecord &r = m_.records().at(m_.tensor(*name)->record);
      if (resident(r) && r.device == dev)
        out.push_back(name);
    }
    return out;
  }

  /// How many views a planned run of \p add reads: two where a node reads
  /// two different inputs of the network (where one argument's offset can
  /// stand in for another's), else one.
  static size_t viewInputsWanted(const Command &add) {
    for (const NetworkNode &n : add.nodes)
      if (n.inputs.size() > 1 && n.inputs[0] != n.inputs[1] &&
          !networkWrites(add.nodes, n.inputs[0]) &&
          !networkWrites(add.nodes, n.inputs[1]))
        return 2;
    return 1;
  }

  /// The next command of a view-input plan (GeneratorProfile::
  /// viewInputPlanPercent), which walks the commands that a run reading
  /// views at offsets in place needs: a tensor of the network's kind with
  /// room, views into it at offsets, their record moved to the network's
  /// device, then the run. nullopt when no plan is under way, when it ran
  /// out of steps, or now and then, so that other commands come between.
  std::optional<CommandKind> viewPlanStep() {
    if (!plannedNetwork_)
      return std::nullopt;
    const std::string net = *plannedNetwork_;
    auto devIt = m_.networkDevices().find(net);
    const ModelDevice *d = devIt == m_.networkDevices().end()
                               ? nullptr
                               : &m_.devices().at(devIt->second);
    if (planStepsLeft_-- <= 0 || !d || d->shutDown || !d->networks.count(net)) {
      plannedNetwork_.reset();
      return std::nullopt;
    }
    if (!rng_.percent(85))
      return std::nullopt;
    const Command &add = d->networks.at(net);
    Type type{add.elemKind, add.dims};
    if (residentViewsFor(net).size() >= viewInputsWanted(add)) {
      plannedNetwork_.reset();
      planRun_ = net;
      return CommandKind::Run;
    }
    // A view at an offset whose record is elsewhere: move the record here
    // through a tensor that covers it (a partial view cannot move it).
    for (Name name : viewsAtOffsetsFor(add)) {
      const ModelTensor &t = *m_.tensor(*name);
      const ModelRecord &r = m_.records().at(t.record);
      if (r.state == ResidencyState::Lost ||
          (resident(r) && r.device == devIt->second))
        continue;
      for (Name whole : ch_.tensors) {
        const ModelTensor &w = *m_.tensor(*whole);
        if (w.record == t.record && w.offsetBytes == 0 &&
            w.bytes() == r.bytes) {
          planToDevice_ = {*whole, devIt->second};
          return CommandKind::ToDevice;
        }
      }
    }
    if (!possible(CommandKind::View))
      return std::nullopt;
    size_t n = type.numElements();
    for (Name name : ch_.roomy) {
      const ModelTensor &t = *m_.tensor(*name);
      if (t.kind == type.kind && t.numElements() > n) {
        planView_ = net;
        return CommandKind::View;
      }
    }
    if (!possible(CommandKind::Create))
      return std::nullopt;
    wanted_ = Type{type.kind, {2 * n + 16}};
    return CommandKind::Create;
  }

  /// The next command of a read-back fault plan (GeneratorProfile::
  /// faultedEnsurePlanPercent), which starts at a network whose last run
  /// bound two or more outputs that could be read back: outputs moved to
  /// its device until two or more are there, a from-device fault on that
  /// device, then ensure-outputs of the network. nullopt when no plan is
  /// under way, or when the run bound fewer than two outputs that
  /// ensure-outputs could read back.
  std::optional<CommandKind> faultedEnsureStep() {
    if (!faultedEnsure_ && p_.faultedEnsurePlanPercent &&
        rng_.percent(p_.faultedEnsurePlanPercent)) {
      std::vector<Name> ready;
      for (Name net : ch_.networks)
        if (wholeOutputs(*net).size() >= 2)
          ready.push_back(net);
      if (!ready.empty()) {
        // Not emplace(): clang 14 finds a nested class with default member
        // initializers not default-constructible inside its enclosing one.
        faultedEnsure_ = FaultedEnsurePlan{};
        faultedEnsure_->network = *rng_.pick(ready);
      }
    }
    if (!faultedEnsure_)
      return std::nullopt;
    const std::string net = faultedEnsure_->network;
    if (faultedEnsure_->faultPlanned && faultedEnsure_->faults.empty()) {
      planEnsure_ = net;
      faultedEnsure_.reset();
      return CommandKind::EnsureOutputs;
    }
    std::vector<Name> outputs = wholeOutputs(net);
    if (outputs.size() < 2 || faultedEnsure_->stepsLeft-- <= 0) {
      faultedEnsure_.reset();
      return std::nullopt;
    }
    // Two outputs on the device are enough: ensure-outputs reads back
    // those, and one comes after the one that fails.
    const std::string &dev = m_.networkDevices().at(net);
    std::vector<Name> elsewhere;
    for (Name name : outputs) {
      const ModelRecord &r = m_.records().at(m_.tensor(*name)->record);
      if (r.state != ResidencyState::Device || r.device != dev)
        elsewhere.push_back(name);
    }
    size_t onDevice = outputs.size() - elsewhere.size();
    if (!faultedEnsure_->faultPlanned && onDevice < 2) {
      planToDevice_ = {*rng_.pick(elsewhere), dev};
      return CommandKind::ToDevice;
    }
    if (!faultedEnsure_->faultPlanned) {
      faultedEnsure_->faultPlanned = true;
      planFaults(dev, onDevice);
    }
    planFault_ = faultedEnsure_->faults.back();
    faultedEnsure_->faults.pop_back();
    return CommandKind::InjectFault;
  }

  /// The read-back faults of a plan on \p dev, where ensure-outputs reads
  /// back \p outputs outputs, last first: one on an output before the
  /// last, so that an output comes after it; or two of different codes on
  /// the first two, so that the first error must be the one returned.
  void planFaults(const std::string &dev, size_t outputs) {
    std::vector<PlannedFault> &faults = faultedEnsure_->faults;
    ErrorCode first = rng_.pick(p_.faultCodes);
    std::vector<ErrorCode> others;
    for (ErrorCode code : p_.faultCodes)
      if (code != first)
        others.push_back(code);
    // A lost device fails every output after it with its own code.
    if (first != ErrorCode::DeviceLost && !others.empty() &&
        (outputs > 2 || rng_.percent(50))) {
      faults.push_back(
          {dev, FaultSite::TransferFromDevice, 2, rng_.pick(others)});
      faults.push_back({dev, FaultSite::TransferFromDevice, 1, first});
      return;
    }
    faults.push_back({dev, FaultSite::TransferFromDevice,
                      unsigned(rng_.between(1, outputs - 1)), first});
  }

  /// The tensors bound to the outputs of \p net's last run that
  /// ensure-outputs could read back: whole tensors of distinct records, not
  /// Lost, while the network's device is live. Empty when its context's
  /// last run was not of \p net.
  std::vector<Name> wholeOutputs(const std::string &net) const {
    std::vector<Name> outputs;
    auto ctx = m_.contexts().find(net);
    auto devIt = m_.networkDevices().find(net);
    if (ctx == m_.contexts().end() || ctx->second.lastNetwork != net ||
        devIt == m_.networkDevices().end())
      return outputs;
    const ModelDevice &d = m_.devices().at(devIt->second);
    auto add = d.networks.find(net);
    if (d.shutDown || add == d.networks.end() ||
        !d.traits.capabilities.faultInjection)
      return outputs;
    std::vector<int> records;
    for (const auto &[ph, name] : ctx->second.bindings) {
      if (!networkWrites(add->second.nodes, ph))
        continue;
      auto it = m_.tensors().find(name);
      if (it == m_.tensors().end() || it->second.empty())
        continue;
      const ModelTensor &t = it->second;
      const ModelRecord &r = m_.records().at(t.record);
      if (r.state != ResidencyState::Lost && t.offsetBytes == 0 &&
          t.bytes() == r.bytes &&
          std::find(records.begin(), records.end(), t.record) ==
              records.end()) {
        records.push_back(t.record);
        outputs.push_back(&it->first);
      }
    }
    return outputs;
  }

  /// Bindings for the network added by \p add: matching types, outputs on
  /// whole tensors whose records no other placeholder uses. Empty when
  /// impossible.
  std::vector<std::pair<std::string, std::string>>
  pickBindings(const Command &add, bool preferViews) {
    std::vector<std::pair<std::string, std::string>> out;
    Type type{add.elemKind, add.dims};
    // Rarely bindings the run must refuse, on purpose: a tensor of another
    // type with as many elements, an output on a partial view, or one
    // sharing a record with another placeholder bound before or after it
    // (semantics §7); more often where a tensor of the network's kind has
    // as many elements in another shape, which a check of sizes alone
    // would take.
    bool reshapedAround =
        std::any_of(ch_.tensors.begin(), ch_.tensors.end(), [&](Name name) {
          const ModelTensor &t = *m_.tensor(*name);
          return !t.empty() && t.kind == type.kind && t.dims != type.dims &&
                 t.numElements() == type.numElements();
        });
    bool refused = !preferViews && rng_.percent(reshapedAround ? 15 : 3);
    std::vector<int> used;
    for (const Placeholder &p : networkPlaceholders(add.nodes, type)) {
      bool isOutput = networkWrites(add.nodes, p.name);
      std::vector<Name> fit, interesting, refusable, reshaped;
      for (Name name : ch_.tensors) {
        const ModelTensor &t = *m_.tensor(*name);
        if (t.empty() || t.kind != type.kind || t.dims != type.dims) {
          // Of another kind or shape with as many elements; of the same
          // kind in another shape is what a check of sizes alone accepts.
          if (refused && !t.empty() && t.numElements() == type.numElements()) {
            refusable.push_back(name);
            if (t.kind == type.kind)
              reshaped.push_back(name);
          }
          continue;
        }
        const ModelRecord &r = m_.records().at(t.record);
        bool whole = t.offsetBytes == 0 && t.bytes() == r.bytes;
        bool taken =
            std::find(used.begin(), used.end(), t.record) != used.end();
        // Inputs are often the interesting kind: a view at an offset into a
        // resident record (offsets a backend must honour), a Mirrored one
        // (used in place), a tensor resident on another device (which the
        // run must move) or a lost one (DeviceLost). An output is
        // interesting Mirrored (the run drops the host copy, and a failing
        // run leaves it Device) or resident elsewhere (which the run
        // releases there first).
        bool isInteresting =
            isOutput
                ? resident(r) && (r.state == ResidencyState::Mirrored ||
                                  r.device != add.device)
                : r.state == ResidencyState::Lost ||
                      (resident(r) && (t.offsetBytes != 0 ||
                                       r.state == ResidencyState::Mirrored ||
                                       r.device != add.device));
        if (isOutput && (!whole || taken)) {
          if (refused)
            refusable.push_back(name);
          continue;
        }
        // A planned run reads two views of one record at different offsets
        // as readily as views of two records.
        if (!isOutput && taken && !(preferViews && isInteresting) &&
            !rng_.percent(25))
          continue;
        fit.push_back(name);
        // A planned run's inputs are distinct views where it can.
        if (isInteresting &&
            (!preferViews ||
             std::none_of(out.begin(), out.end(),
                          [&](const auto &b) { return b.second == *name; })))
          interesting.push_back(name);
        // Or what a run just issued without waiting holds, on this device.
        if (resident(r) && r.device == add.device &&
            std::find(busyRunRecords_.begin(), busyRunRecords_.end(),
                      t.record) != busyRunRecords_.end())
          interesting.push_back(name);
      }
      if (fit.empty() && refusable.empty())
        return {};
      Name pick = !reshaped.empty() && rng_.percent(35) ? rng_.pick(reshaped)
                  : !refusable.empty() && (fit.empty() || rng_.percent(50))
                      ? rng_.pick(refusable)
                  : !interesting.empty() && rng_.percent(preferViews ? 90 : 50)
                      ? rng_.pick(interesting)
                      : rng_.pick(fit);
      out.emplace_back(p.name, *pick);
      used.push_back(m_.tensor(*pick)->record);
    }
    // Outputs must not share with inputs chosen after them either.
    for (size_t i = 0; i < out.size() && !refused; ++i) {
      if (!networkWrites(add.nodes, out[i].first))
        continue;
      for (size_t j = 0; j < out.size(); ++j)
        if (j != i && m_.tensor(out[j].second)->record ==
                          m_.tensor(out[i].second)->record)
          return {};
    }
    return out;
  }

  std::string freshTensor() { return "t" + std::to_string(tensorCount_++); }

  /// A name for a network to add, not placed now, or "" when three are
  /// placed. Mostly n0, n1 or n2; now and then one that a placed network's
  /// name is a prefix of or that is a prefix of one (n1 and n10, n1_2, n1.0,
  /// n), or of an unusual length (one character, a long one): a backend
  /// that keys anything by a prefix of a network's name shows.
  std::string freshNetworkName() {
    if (m_.placement().size() >= 3)
      return "";
    std::string name;
    int how = int(rng_.below(10));
    if (how < 3 && !m_.placement().empty()) {
      auto it = m_.placement().begin();
      std::advance(it, rng_.below(m_.placement().size()));
      const std::string &p = it->first;
      switch (rng_.below(4)) {
      case 0:
        name = p + std::to_string(rng_.below(10));
        break;
      case 1:
        name = p + "_" + std::to_string(rng_.below(3));
        break;
      case 2:
        name = p + ".0";
        break;
      default:
        name =
            p.size() > 1 ? p.substr(0, 1 + rng_.below(p.size() - 1)) : p + "0";
        break;
      }
      if (name.size() > 300)
        name.clear();
    } else if (how == 3) {
      static const size_t Lengths[] = {1, 2, 64, 255, 256};
      size_t length = Lengths[rng_.below(5)];
      name = "n";
      while (name.size() < length)
        name += char('a' + name.size() % 26);
    }
    if (!name.empty() && !m_.placement().count(name))
      return name;
    for (int i = 0; i < 3; ++i)
      if (!m_.placement().count("n" + std::to_string(i)))
        return "n" + std::to_string(i);
    return "";
  }

  /// A network kind for a large network: mostly one of one byte or of two
  /// (where element counts pass millions at a few MiB), else any.
  ElemKind pickNarrowNetworkKind() {
    if (!networkKinds_)
      networkKinds_ = networkKinds();
    std::vector<ElemKind> narrow;
    size_t width = rng_.percent(70) ? 1 : 2;
    for (ElemKind k : *networkKinds_)
      if (elemSize(k) == width)
        narrow.push_back(k);
    if (narrow.empty() || rng_.percent(10))
      return pickNetworkKind();
    return rng_.pick(narrow);
  }

  /// The code of the next fault planned right before a run: the profile's
  /// distinct codes in turn from a drawn start (runs that reach the device
  /// are few: each code is as frequent as the others).
  ErrorCode nextRunFaultCode() {
    if (runFaultCodes_.empty())
      for (ErrorCode code : p_.faultCodes)
        if (std::find(runFaultCodes_.begin(), runFaultCodes_.end(), code) ==
            runFaultCodes_.end())
          runFaultCodes_.push_back(code);
    if (!runFaultTurn_)
      runFaultTurn_ = rng_.below(runFaultCodes_.size());
    return runFaultCodes_[(*runFaultTurn_)++ % runFaultCodes_.size()];
  }

  /// The next command of an allocation burst under way or due
  /// (GeneratorProfile::allocationBursts), or nullopt. A burst's commands
  /// come one after the other, on the first device.
  std::optional<Command> burstCommand() {
    ++burstClock_;
    if (ch_.devices.empty())
      return std::nullopt;
    const std::string &dev = *ch_.devices.front();
    if (m_.devices().at(dev).shutDown) {
      reuseCyclesLeft_ = 0;
      reuseStep_ = 0;
      pressureToAllocate_ = 0;
      pressureHeld_.clear();
      return std::nullopt;
    }
    auto alloc = [&](uint64_t bytes) {
      Command c;
      c.kind = CommandKind::Alloc;
      c.target = "L" + std::to_string(locationCount_++);
      c.device = dev;
      c.bytes = bytes;
      return c;
    };
    auto freeOf = [&](const std::string &name) {
      Command c;
      c.kind = CommandKind::Free;
      c.target = name;
      c.device = dev;
      return c;
    };
    auto active = [&](const std::string &name) {
      return m_.activeLocations().count(name) > 0;
    };
    if (reuseAt_ && burstClock_ >= *reuseAt_) {
      reuseAt_.reset();
      reuseBytes_.reset();
      reuseCyclesLeft_ = unsigned(
          rng_.between(p_.reuseBurstCycles.first, p_.reuseBurstCycles.second));
      reuseSize_ = burstBytes(dev, 64 * 1024);
      Command c = alloc(reuseSize_);
      reuseStale_ = c.target;
      reuseStep_ = 1;
      return c;
    }
    // 1: free the first location; then cycles of 2: allocate its size
    // again, 3: free the first one (stale), 4: free the new one.
    while (reuseStep_) {
      switch (reuseStep_) {
      case 1:
        reuseStep_ = 2;
        if (active(reuseStale_))
          return freeOf(reuseStale_);
        reuseStep_ = 0; // Refused: no stale location to name.
        break;
      case 2: {
        if (reuseCyclesLeft_ == 0) {
          reuseStep_ = 0;
          break;
        }
        --reuseCyclesLeft_;
        Command c = alloc(reuseSize_);
        reuseLive_ = c.target;
        reuseStep_ = 3;
        return c;
      }
      case 3:
        reuseStep_ = 4;
        return freeOf(reuseStale_);
      default:
        reuseStep_ = 2;
        if (active(reuseLive_))
          return freeOf(reuseLive_);
        break;
      }
    }
    if (pressureAt_ && burstClock_ >= *pressureAt_) {
      pressureAt_.reset();
      pressureToAllocate_ =
          unsigned(rng_.between(p_.pressureBurstAllocations.first,
                                p_.pressureBurstAllocations.second));
      pressureSize_ = burstBytes(dev, 16 * 1024);
    }
    if (pressureToAllocate_) {
      --pressureToAllocate_;
      Command c = alloc(pressureSize_);
      pressureHeld_.push_back(c.target);
      return c;
    }
    while (!pressureHeld_.empty()) {
      size_t k = rng_.below(pressureHeld_.size());
      std::string name = std::move(pressureHeld_[k]);
      pressureHeld_[k] = std::move(pressureHeld_.back());
      pressureHeld_.pop_back();
      if (active(name))
        return freeOf(name);
    }
    return std::nullopt;
  }

  /// The next command of a content burst under way or due
  /// (GeneratorProfile::contentBurstPercent), or nullopt. Called once the
  /// allocation bursts have nothing to issue.
  std::optional<Command> contentBurstCommand() {
    if (contentBurstAt_ && burstClock_ >= *contentBurstAt_ &&
        !ch_.devices.empty()) {
      contentBurstAt_.reset();
      const std::string &dev = *ch_.devices.front();
      if (!m_.devices().at(dev).shutDown) {
        unsigned records = unsigned(rng_.between(
            p_.contentBurstRecords.first, p_.contentBurstRecords.second));
        ElemKind kind = rng_.percent(50) ? ElemKind::Float32 : ElemKind::UInt8;
        std::vector<size_t> dims = {size_t(rng_.between(1, 16))};
        uint64_t pattern = pickPattern();
        std::vector<std::string> names;
        for (unsigned i = 0; i < records; ++i) {
          Command create = commandOn(CommandKind::Create, freshTensor(), "");
          create.elemKind = kind;
          create.dims = dims;
          create.pattern = pattern;
          names.push_back(create.target);
          contentBurstPlan_.push_back(std::move(create));
          contentBurstPlan_.push_back(
              commandOn(CommandKind::ToDevice, names.back(), dev));
        }
        // A run that computes (a copy may be carried out by sharing) into
        // one of them, in place.
        Command add =
            commandOn(CommandKind::AddNetwork,
                      "burst" + std::to_string(locationCount_++), dev);
        add.elemKind = kind;
        add.dims = dims;
        add.nodes = {NetworkNode{OpKind::Scale, {"x"}, "o0", 2.0}};
        Command x = commandOn(CommandKind::Create, freshTensor(), "");
        x.elemKind = kind;
        x.dims = dims;
        x.pattern = pattern % 200 + 1;
        std::string written = rng_.pick(names);
        Command run;
        run.kind = CommandKind::Run;
        run.target = add.target;
        run.bindings = {{"x", x.target}, {"o0", written}};
        contentBurstPlan_.push_back(add);
        contentBurstPlan_.push_back(x);
        contentBurstPlan_.push_back(run);
        auto readBack = [&](const std::string &name) {
          Command back = commandOn(CommandKind::FromDevice, name, dev);
          back.release = false;
          contentBurstPlan_.push_back(std::move(back));
        };
        readBack(written);
        readBack(names.front());
        readBack(names.back());
        readBack(rng_.pick(names));
        // Destroyed in an order drawn; one in sixteen read back first.
        shuffle(names);
        for (const std::string &name : names) {
          if (rng_.percent(6))
            readBack(name);
          contentBurstPlan_.push_back(
              commandOn(CommandKind::Destroy, name, ""));
        }
        contentBurstPlan_.push_back(
            commandOn(CommandKind::Destroy, x.target, ""));
        contentBurstPlan_.push_back(
            commandOn(CommandKind::EvictNetwork, add.target, ""));
      }
    }
    return takeFirst(contentBurstPlan_);
  }

  /// The next command of the released-block plan
  /// (GeneratorProfile::releasedBlockRunPercent), or nullopt.
  std::optional<Command> releasedBlockCommand() {
    if (releasedBlockAt_ && burstClock_ >= *releasedBlockAt_) {
      releasedBlockAt_.reset();
      if (!ch_.liveDevices.empty() && m_.placement().size() < 3 &&
          m_.tensors().size() + 3 <= p_.maxTensors) {
        const std::string &dev = *rng_.pick(ch_.liveDevices);
        Command a;
        a.kind = CommandKind::Create;
        a.target = freshTensor();
        pickType(a);
        a.pattern = pickPattern();
        auto command = [&](CommandKind kind, const std::string &target) {
          return commandOn(kind, target, dev);
        };
        auto create = [&](const std::string &name) {
          Command c = command(CommandKind::Create, name);
          c.device.clear();
          c.elemKind = a.elemKind;
          c.dims = a.dims;
          c.pattern = pickPattern();
          return c;
        };
        std::string net = "landed" + std::to_string(locationCount_++);
        std::string released = freshTensor(), output = freshTensor();
        Command keep = command(CommandKind::FromDevice, a.target);
        keep.release = false;
        Command add = command(CommandKind::AddNetwork, net);
        add.elemKind = a.elemKind;
        add.dims = a.dims;
        add.nodes = {NetworkNode{OpKind::Copy, {"x"}, "o0", 1.0}};
        Command run = command(CommandKind::Run, net);
        run.device.clear();
        run.bindings = {{"x", a.target}, {"o0", output}};
        Command back = command(CommandKind::FromDevice, output);
        releasedBlockPlan_ = {command(CommandKind::ToDevice, a.target),
                              keep,
                              add,
                              create(released),
                              command(CommandKind::ToDevice, released),
                              command(CommandKind::Release, released),
                              create(output),
                              run,
                              back};
        return a;
      }
    }
    return takeFirst(releasedBlockPlan_);
  }

  /// Plans, after \p upload that a planned fault fails, an upload of a
  /// fresh pageable tensor of its type (of its record's bytes for a view)
  /// and fill pattern of its own to the same device, and its read-back:
  /// the failed upload's block is freed, and an allocator hands it to the
  /// next upload of its size, so that whatever the failure left behind in
  /// it (cache lines, staged chunks, an entry keyed by the block) shows
  /// through the other tensor's bytes.
  /// A retry of the same upload writes the same bytes and hides it.
  void planAfterFailedUpload(const Command &upload) {
    const ModelTensor *t = m_.tensor(upload.target);
    if (!t || t->empty())
      return;
    Command create;
    create.kind = CommandKind::Create;
    create.target = freshTensor();
    create.elemKind = t->kind;
    create.dims = t->dims;
    // A view's upload allocates its whole record: bytes of that size.
    if (t->isView) {
      create.elemKind = ElemKind::UInt8;
      create.dims = {size_t(m_.records().at(t->record).bytes)};
    }
    create.pattern = pickPattern();
    planned_ = {
        create, commandOn(CommandKind::ToDevice, create.target, upload.device),
        commandOn(CommandKind::FromDevice, create.target, upload.device)};
  }

  /// Makes network \p add a near twin of a network placed, when there is
  /// one: the same nodes, kind, shape and declared order with one thing
  /// changed, a scale factor (for an integer one an f32 cannot hold, the
  /// neighbour an f32 cannot tell from it), else the element kind, else
  /// the shape (of one on another device, half the time nothing); and runs
  /// it soon. A backend that keys compiled code by a lossy summary of a
  /// network (a factor as an f32, no kind) runs the twin with the other's
  /// code.
  void makeNearTwin(Command &add) {
    // Mostly one with an integer factor an f32 cannot hold, where one is
    // placed: few are.
    std::vector<const Command *> placed, wide;
    for (const auto &[deviceName, device] : m_.devices())
      for (const auto &[name, network] : device.networks) {
        placed.push_back(&network);
        if (!isFloatingPoint(network.elemKind) &&
            std::any_of(network.nodes.begin(), network.nodes.end(),
                        [](const NetworkNode &n) {
                          return n.op == OpKind::Scale && wideForF32(n.factor);
                        }))
          wide.push_back(&network);
      }
    if (placed.empty())
      return;
    const Command &original = !wide.empty() && rng_.percent(80)
                                  ? *rng_.pick(wide)
                                  : *rng_.pick(placed);
    add.elemKind = original.elemKind;
    add.dims = original.dims;
    add.nodes = original.nodes;
    add.declared = original.declared;
    twinNet_ = add.target;
    twinStepsLeft_ = 10;
    // On another device, half the time the very same network: code the
    // process shares between devices must suit both (their configurations
    // may differ, otherConfigurationPercent).
    if (original.device != add.device && rng_.percent(50))
      return;
    std::vector<NetworkNode *> scales;
    for (NetworkNode &n : add.nodes)
      if (n.op == OpKind::Scale)
        scales.push_back(&n);
    if (!scales.empty()) {
      bool integer = !isFloatingPoint(add.elemKind);
      auto narrow = [](const NetworkNode *n) { return !wideForF32(n->factor); };
      if (integer && !std::all_of(scales.begin(), scales.end(), narrow))
        std::erase_if(scales, narrow);
      NetworkNode &n = *rng_.pick(scales);
      double before = n.factor;
      if (integer && wideForF32(before))
        for (double twin : {before - 1, before + 1})
          if (float(twin) == float(before) && twin != before &&
              (add.elemKind == ElemKind::Int64 ||
               (twin >= -0x1p31 && twin < 0x1p31)))
            n.factor = twin;
      for (int tries = 0; n.factor == before && tries < 4; ++tries)
        n.factor = pickFactor(add.elemKind);
    } else if (rng_.percent(50)) {
      add.elemKind = pickNetworkKind();
    } else {
      uint64_t elements = 1;
      for (size_t dim : add.dims)
        elements *= dim;
      add.dims = shapeOf(elements + 1 + rng_.below(16));
    }
  }

  /// The next command of the network burst
  /// (GeneratorProfile::networkBurstPercent), or nullopt. Called once the
  /// burst is due: networkBurstNetworks networks of one type and distinct
  /// factors placed on the first device at once, each run as it is added
  /// and again, in an order drawn, once all are placed, its result read
  /// back every time; then all evicted.
  std::optional<Command> networkBurstCommand() {
    if (networkBurstAt_ && burstClock_ >= *networkBurstAt_ &&
        !ch_.devices.empty()) {
      networkBurstAt_.reset();
      const std::string &dev = *ch_.devices.front();
      if (!m_.devices().at(dev).shutDown) {
        unsigned networks = unsigned(rng_.between(
            p_.networkBurstNetworks.first, p_.networkBurstNetworks.second));
        std::vector<size_t> dims = {size_t(rng_.between(1, 64))};
        Command x = commandOn(CommandKind::Create, freshTensor(), "");
        x.elemKind = ElemKind::Float32;
        x.dims = dims;
        x.pattern = pickPattern();
        Command y = x;
        y.target = freshTensor();
        y.pattern = pickPattern();
        networkBurstPlan_ = {x, commandOn(CommandKind::ToDevice, x.target, dev),
                             y};
        std::string prefix = "nets" + std::to_string(locationCount_++) + "_";
        auto runAndReadBack = [&](unsigned k) {
          Command run;
          run.kind = CommandKind::Run;
          run.target = prefix + std::to_string(k);
          run.bindings = {{"x", x.target}, {"o0", y.target}};
          networkBurstPlan_.push_back(std::move(run));
          Command back = commandOn(CommandKind::FromDevice, y.target, dev);
          back.release = rng_.percent(50);
          networkBurstPlan_.push_back(std::move(back));
        };
        std::vector<unsigned> order;
        for (unsigned k = 0; k < networks; ++k) {
          Command add = commandOn(CommandKind::AddNetwork,
                                  prefix + std::to_string(k), dev);
          add.elemKind = ElemKind::Float32;
          add.dims = dims;
          add.nodes = {NetworkNode{OpKind::Scale, {"x"}, "o0", double(k + 2)}};
          networkBurstPlan_.push_back(std::move(add));
          runAndReadBack(k);
          order.push_back(k);
        }
        shuffle(order);
        for (unsigned k : order)
          runAndReadBack(k);
        for (unsigned k = 0; k < networks; ++k)
          networkBurstPlan_.push_back(commandOn(
              CommandKind::EvictNetwork, prefix + std::to_string(k), ""));
        networkBurstPlan_.push_back(
            commandOn(CommandKind::Destroy, x.target, ""));
        networkBurstPlan_.push_back(
            commandOn(CommandKind::Destroy, y.target, ""));
      }
    }
    return takeFirst(networkBurstPlan_);
  }

  /// Puts \p items in an order drawn (Fisher-Yates).
  template <typename T> void shuffle(std::vector<T> &items) {
    for (size_t i = items.size(); i > 1; --i)
      std::swap(items[i - 1], items[rng_.below(i)]);
  }

  /// A command of \p kind on tensor (or network) \p target and \p device.
  static Command commandOn(CommandKind kind, const std::string &target,
                           const std::string &device) {
    Command c;
    c.kind = kind;
    c.target = target;
    c.device = device;
    return c;
  }

  /// The first command of \p plan, taken out of it; nullopt when empty.
  static std::optional<Command> takeFirst(std::vector<Command> &plan) {
    if (plan.empty())
      return std::nullopt;
    Command c = std::move(plan.front());
    plan.erase(plan.begin());
    return c;
  }

  /// The next command of the content twins' plan
  /// (GeneratorProfile::contentTwinsPercent), or nullopt.
  std::optional<Command> twinsCommand() {
    if (twinsAt_ && burstClock_ >= *twinsAt_) {
      twinsAt_.reset();
      if (!ch_.liveDevices.empty() &&
          m_.tensors().size() + 4 <= p_.maxTensors) {
        Command a;
        a.kind = CommandKind::Create;
        a.target = freshTensor();
        pickType(a);
        a.pattern = pickPattern();
        Command b = a;
        b.target = freshTensor();
        const std::string &first = *rng_.pick(ch_.liveDevices);
        const std::string &second =
            rng_.percent(50) ? first : *rng_.pick(ch_.liveDevices);
        twinsPlan_ = {b};
        // A few elements in the middle of the second, through a view: the
        // twins then agree in their first and last bytes only.
        size_t elements = 1;
        for (size_t d : a.dims)
          elements *= d;
        if (elements >= 8 && rng_.percent(50)) {
          Command v;
          v.kind = CommandKind::View;
          v.target = freshTensor();
          v.source = b.target;
          size_t changed = 1 + rng_.below(std::min<size_t>(4, elements / 4));
          v.dims = {changed};
          v.offset = elements / 2 - changed / 2;
          Command w;
          w.kind = CommandKind::Write;
          w.target = v.target;
          w.pattern = a.pattern % 200 + 1;
          twinsPlan_.push_back(v);
          twinsPlan_.push_back(w);
        }
        Command firstUpload = commandOn(CommandKind::ToDevice, a.target, first);
        bool runs = m_.placement().size() < 3 && rng_.percent(50);
        // Half the runs are issued without waiting, the first twin uploaded
        // while the run is in flight: the twins come to share a block after
        // the run was issued and before it writes. Not under budgets, nor
        // where a loss is planned (scenario validation refuses a run issued
        // without waiting there).
        bool uploadBehindRun = runs && !anyBudget() &&
                               !m_.devices().at(second).lossPlanned &&
                               rng_.percent(50);
        if (!uploadBehindRun)
          twinsPlan_.push_back(firstUpload);
        twinsPlan_.push_back(
            commandOn(CommandKind::ToDevice, b.target, second));
        // Its bytes read back first (kept): an upload a run will overwrite
        // need never land, but these have, for the first twin to match.
        if (uploadBehindRun) {
          Command kept = commandOn(CommandKind::FromDevice, b.target, second);
          kept.release = false;
          twinsPlan_.push_back(kept);
        }
        // Half the time a run then writes the second in place: a block the
        // twins share is the first's too, whichever device holds it.
        if (runs) {
          Command add =
              commandOn(CommandKind::AddNetwork,
                        "twin" + std::to_string(locationCount_++), second);
          add.elemKind = a.elemKind;
          add.dims = a.dims;
          // Half the time the run computes: a backend may carry out a copy
          // by sharing its input's block, and write none.
          add.nodes = {rng_.percent(50)
                           ? NetworkNode{OpKind::Copy, {"x"}, "o0", 1.0}
                           : NetworkNode{OpKind::Scale, {"x"}, "o0", 2.0}};
          Command x = a;
          x.target = freshTensor();
          x.pattern = a.pattern % 200 + 1;
          Command run;
          run.kind = CommandKind::Run;
          run.target = add.target;
          run.bindings = {{"x", x.target}, {"o0", b.target}};
          run.noWait = uploadBehindRun;
          twinsPlan_.push_back(add);
          twinsPlan_.push_back(x);
          twinsPlan_.push_back(run);
          if (uploadBehindRun)
            twinsPlan_.push_back(firstUpload);
        }
        Command back = commandOn(CommandKind::FromDevice, b.target, second);
        back.release = rng_.percent(50);
        Command firstBack = commandOn(CommandKind::FromDevice, a.target, first);
        // The twin uploaded behind the run is read back first, while the
        // run may still be in flight: a backend that lands an upload when
        // its bytes are first needed shares the block then.
        if (uploadBehindRun)
          std::swap(back, firstBack);
        twinsPlan_.push_back(back);
        twinsPlan_.push_back(firstBack);
        return a;
      }
    }
    return takeFirst(twinsPlan_);
  }

  /// A create of a fresh tensor of \p kind and \p dims, with a fill drawn.
  Command createOf(ElemKind kind, const std::vector<size_t> &dims) {
    Command create = commandOn(CommandKind::Create, freshTensor(), "");
    create.elemKind = kind;
    create.dims = dims;
    create.pattern = pickPattern();
    return create;
  }

  /// The next command of the wide-run plan (GeneratorProfile::
  /// wideRunPercent), or nullopt.
  std::optional<Command> wideRunCommand() {
    if (wideRunAt_ && burstClock_ >= *wideRunAt_) {
      wideRunAt_.reset();
      if (!ch_.liveDevices.empty() && m_.placement().size() < 3) {
        const std::string &dev = *rng_.pick(ch_.liveDevices);
        Command add = commandOn(CommandKind::AddNetwork,
                                "wide" + std::to_string(locationCount_++), dev);
        add.elemKind = pickNetworkKind();
        add.dims = !p_.shapes.empty() ? rng_.pick(p_.shapes)
                                      : shapeOf(1 + rng_.below(64));
        add.nodes = wideNodes(add.elemKind, wideRunPlaceholders_ - 3);
        Command run = commandOn(CommandKind::Run, add.target, "");
        for (const Placeholder &p :
             networkPlaceholders(add.nodes, Type{add.elemKind, add.dims})) {
          Command create = createOf(add.elemKind, add.dims);
          run.bindings.emplace_back(p.name, create.target);
          wideRunPlan_.push_back(create);
          if (!networkWrites(add.nodes, p.name) && rng_.percent(50))
            wideRunPlan_.push_back(
                commandOn(CommandKind::ToDevice, create.target, dev));
        }
        wideRunPlan_.push_back(run);
        return add;
      }
    }
    return takeFirst(wideRunPlan_);
  }

  using Bindings = std::vector<std::pair<std::string, std::string>>;
  /// A run of \p add issued without waiting, its placeholders bound as
  /// \p given says, \p skip left unbound, and the others to fresh tensors
  /// whose creates and uploads to \p dev go to \p plan: a run joins only
  /// records already on its device.
  Command runOnFreshResidents(const Command &add, const std::string &dev,
                              std::vector<Command> &plan,
                              const Bindings &given = {},
                              const std::string &skip = {}) {
    Command run = commandOn(CommandKind::Run, add.target, "");
    run.noWait = true;
    for (const Placeholder &p :
         networkPlaceholders(add.nodes, Type{add.elemKind, add.dims})) {
      if (p.name == skip)
        continue;
      auto it = std::find_if(given.begin(), given.end(),
                             [&](const auto &g) { return g.first == p.name; });
      if (it != given.end()) {
        run.bindings.push_back(*it);
        continue;
      }
      Command create = createOf(add.elemKind, add.dims);
      run.bindings.emplace_back(p.name, create.target);
      plan.push_back(create);
      plan.push_back(commandOn(CommandKind::ToDevice, create.target, dev));
    }
    return run;
  }
  /// The tensor \p run binds to placeholder \p ph, or "".
  static std::string boundTo(const Command &run, const std::string &ph) {
    for (const auto &[p, name] : run.bindings)
      if (p == ph)
        return name;
    return {};
  }
  /// The first placeholder of the network \p add describes that no node
  /// writes, or "".
  static std::string firstInput(const Command &add) {
    for (const Placeholder &p :
         networkPlaceholders(add.nodes, Type{add.elemKind, add.dims}))
      if (!networkWrites(add.nodes, p.name))
        return p.name;
    return {};
  }

  /// The next command of the plan of a run that overwrites what a pending
  /// run reads (GeneratorProfile::writeAfterReadPercent), or nullopt. It
  /// waits for the plan of viewOfPendingOutputCommand to end, and that plan
  /// starts only once this one has ended, so that no command of one waits
  /// between the runs of the other.
  std::optional<Command> writeAfterReadCommand() {
    if (writeAfterReadAt_ && burstClock_ >= *writeAfterReadAt_ &&
        viewOfPendingPlan_.empty()) {
      writeAfterReadAt_.reset();
      if (!ch_.liveDevices.empty()) {
        const std::string &dev = *rng_.pick(ch_.liveDevices);
        ElemKind kind = pickNetworkKind();
        std::vector<size_t> dims = p_.shapes.empty()
                                       ? shapeOf(rng_.between(1, 1024))
                                       : rng_.pick(p_.shapes);
        std::string id = std::to_string(locationCount_++);
        Command writer = commandOn(CommandKind::AddNetwork, "writer" + id, dev);
        writer.elemKind = kind;
        writer.dims = dims;
        writer.nodes = pickNodes(kind);
        Command reader = writer;
        reader.target = "reader" + id;
        reader.nodes = pickNodes(kind);
        writeAfterReadPlan_ = {reader};
        // The first run writes a result, the second reads an input, and the
        // third reads the first's result and writes the second's input in
        // place: a backend that fuses the third into the first, or moves it
        // up, must not move it past the second's read.
        auto &plan = writeAfterReadPlan_;
        Command first = runOnFreshResidents(writer, dev, plan);
        Command second = runOnFreshResidents(reader, dev, plan);
        std::string result = boundTo(first, writer.nodes.back().output);
        std::string read = boundTo(second, firstInput(reader));
        Command third = runOnFreshResidents(
            writer, dev, plan,
            {{firstInput(writer), result}, {writer.nodes.back().output, read}});
        writeAfterReadPlan_.push_back(first);
        writeAfterReadPlan_.push_back(second);
        writeAfterReadPlan_.push_back(third);
        for (const std::string &name :
             {boundTo(second, reader.nodes.back().output), read}) {
          Command back = commandOn(CommandKind::FromDevice, name, dev);
          back.release = false;
          writeAfterReadPlan_.push_back(back);
        }
        return writer;
      }
    }
    return takeFirst(writeAfterReadPlan_);
  }

  /// The next command of the plan of a run reading a view of a pending
  /// run's output (GeneratorProfile::viewOfPendingOutputPercent), or
  /// nullopt.
  std::optional<Command> viewOfPendingOutputCommand() {
    if (viewOfPendingAt_ && burstClock_ >= *viewOfPendingAt_ &&
        writeAfterReadPlan_.empty()) {
      viewOfPendingAt_.reset();
      if (!ch_.liveDevices.empty() && m_.placement().size() < 2) {
        const std::string &dev = *rng_.pick(ch_.liveDevices);
        ElemKind kind = pickNetworkKind();
        auto count = [kind](const std::vector<size_t> &dims) {
          return Type{kind, dims}.numElements();
        };
        std::vector<size_t> first, second;
        if (p_.shapes.size() >= 2 && rng_.percent(50)) {
          first = rng_.pick(p_.shapes);
          second = rng_.pick(p_.shapes);
          if (count(second) > count(first))
            std::swap(first, second);
        } else {
          // An output from the size classes, up to several of the pieces
          // (a kilobyte, 64 KiB) a backend may split a run into, so that a
          // view's bytes may lie pieces away from its element offset; room
          // for the tensors of both networks.
          size_t size = elemSize(kind);
          uint64_t most = std::max<uint64_t>(
              std::min<uint64_t>(liveBytesLeft() / 8, 256 * 1024), 2 * size);
          uint64_t least = most >= 4096 && rng_.percent(50) ? 4096 : 0;
          first = shapeOf(
              std::max<uint64_t>(pickBytes(size, most, least) / size, 2));
          second = shapeOf(rng_.between(1, count(first)));
        }
        size_t room = count(first) - count(second);
        // Often at the very end of the output, as far from the start as the
        // view can be.
        uint64_t offset = 0;
        if (room && rng_.percent(70))
          offset = rng_.percent(30) ? room : rng_.between(1, room);
        std::string id = std::to_string(locationCount_++);
        Command addFirst =
            commandOn(CommandKind::AddNetwork, "producer" + id, dev);
        addFirst.elemKind = kind;
        addFirst.dims = first;
        addFirst.nodes = pickNodes(kind);
        Command addSecond = addFirst;
        addSecond.target = "consumer" + id;
        addSecond.dims = second;
        addSecond.nodes = pickNodes(kind);
        viewOfPendingPlan_ = {addSecond};
        // A resident tensor for each placeholder but the one the view
        // takes.
        Command runFirst =
            runOnFreshResidents(addFirst, dev, viewOfPendingPlan_);
        std::string input = firstInput(addSecond);
        Command runSecond =
            runOnFreshResidents(addSecond, dev, viewOfPendingPlan_, {}, input);
        Command view = commandOn(CommandKind::View, freshTensor(), "");
        view.source = boundTo(runFirst, addFirst.nodes.back().output);
        view.dims = second;
        view.offset = offset;
        if (!input.empty())
          runSecond.bindings.emplace_back(input, view.target);
        // Half the time behind a read-back of a tensor of their own still in
        // flight: a device that spreads work over several queues then has
        // one busy, and the pieces of the two runs there wait while the
        // others' go ahead.
        if (rng_.percent(50)) {
          Command busy = createOf(kind, second);
          Command back = commandOn(CommandKind::FromDevice, busy.target, dev);
          back.release = false;
          back.noWait = true;
          viewOfPendingPlan_.push_back(busy);
          viewOfPendingPlan_.push_back(
              commandOn(CommandKind::ToDevice, busy.target, dev));
          viewOfPendingPlan_.push_back(back);
        }
        viewOfPendingPlan_.push_back(view);
        viewOfPendingPlan_.push_back(runFirst);
        viewOfPendingPlan_.push_back(runSecond);
        Command back =
            commandOn(CommandKind::FromDevice,
                      boundTo(runSecond, addSecond.nodes.back().output), dev);
        back.release = false;
        viewOfPendingPlan_.push_back(back);
        return addFirst;
      }
    }
    return takeFirst(viewOfPendingPlan_);
  }

  /// \p count (at least 3) nodes over inputs x, y and z, the first three
  /// reading one each, every later one the output before it: every
  /// placeholder is used, and the last output depends on all of them.
  std::vector<NetworkNode> wideNodes(ElemKind kind, size_t count) {
    std::vector<std::string> values = {"x", "y", "z"};
    std::vector<NetworkNode> nodes;
    // Half the time a tree: about half the nodes compute values from the
    // inputs, which all stay live until the other half add or multiply
    // them together, so that a fused pass holds a dozen values at once (a
    // backend that keeps them in a register file of a fixed size must not
    // reuse one still live). A chain holds two or three.
    if (count >= 3 && rng_.percent(50)) {
      size_t leaves = (count + 1) / 2;
      std::vector<std::string> live;
      for (size_t i = 0; i < count; ++i) {
        NetworkNode n;
        n.output = "o" + std::to_string(i);
        if (i < leaves) {
          n.op = pickOp(kind, 0, OpKind::Copy);
          n.inputs.push_back(values[i % 3]);
          if (n.op == OpKind::Add || n.op == OpKind::Mul)
            n.inputs.push_back(values[(i + 1) % 3]);
          if (n.op == OpKind::Scale)
            n.factor = 2;
        } else {
          // The two oldest live values (a balanced tree), or the last one
          // with an input.
          n.op = rng_.percent(50) ? OpKind::Add : OpKind::Mul;
          for (int operand = 0; operand < 2; ++operand) {
            if (live.empty()) {
              n.inputs.push_back(values[i % 3]);
              continue;
            }
            n.inputs.push_back(live.front());
            live.erase(live.begin());
          }
        }
        live.push_back(n.output);
        nodes.push_back(std::move(n));
      }
      return nodes;
    }
    for (size_t i = 0; i < count; ++i) {
      NetworkNode n;
      n.op = pickOp(kind, i, i > 0 ? nodes.back().op : OpKind::Copy);
      n.output = "o" + std::to_string(i);
      n.inputs.push_back(i < 3 ? values[i] : values.back());
      if (n.op == OpKind::Add || n.op == OpKind::Mul)
        n.inputs.push_back(rng_.pick(values));
      // A factor the network would refuse loses the whole plan.
      if (n.op == OpKind::Scale)
        n.factor = 2;
      nodes.push_back(std::move(n));
      values.push_back(nodes.back().output);
    }
    return nodes;
  }

  /// The size of a burst's allocations on \p dev: that of a record resident
  /// there of at most \p most bytes (its size class), else a small one.
  uint64_t burstBytes(const std::string &dev, uint64_t most) {
    std::vector<uint64_t> sizes;
    for (const auto &[id, r] : m_.records())
      if (r.device == dev && r.bytes && r.bytes <= most &&
          (r.state == ResidencyState::Device ||
           r.state == ResidencyState::Mirrored))
        sizes.push_back(r.bytes);
    if (!sizes.empty())
      return sizes[rng_.below(sizes.size())];
    return pickBytes(1, 4096);
  }

  /// The next command about anchors (GeneratorProfile::anchorTensors), or
  /// nullopt: each anchor made and uploaded to the first device, then every
  /// anchorReadPeriod commands the one uploaded last read back (released)
  /// and uploaded again.
  std::optional<Command> anchorCommand() {
    if (!p_.anchorTensors || ch_.devices.empty())
      return std::nullopt;
    ++anchorClock_;
    const std::string &dev = *ch_.devices.front();
    auto onDevice = [&](const std::string &name) {
      const ModelRecord *r = m_.recordOf(name);
      return r && r->state == ResidencyState::Device && r->device == dev;
    };
    if (anchorUpload_) {
      std::string name = *std::exchange(anchorUpload_, {});
      const ModelRecord *r = m_.recordOf(name);
      if (r && r->state == ResidencyState::Host) {
        Command c;
        c.kind = CommandKind::ToDevice;
        c.target = name;
        c.device = dev;
        return c;
      }
    }
    if (anchorsMade_ < p_.anchorTensors && !wanted_ &&
        m_.tensors().size() < p_.maxTensors) {
      ++anchorsMade_;
      Command c;
      c.kind = CommandKind::Create;
      c.target = freshTensor();
      pickType(c);
      c.pattern = pickPattern(true);
      anchors_.push_back(c.target);
      anchorUpload_ = c.target;
      return c;
    }
    if (p_.anchorReadPeriod && anchorClock_ % p_.anchorReadPeriod == 0)
      for (auto it = anchors_.rbegin(); it != anchors_.rend(); ++it) {
        if (!onDevice(*it))
          continue;
        Command c;
        c.kind = CommandKind::FromDevice;
        c.target = *it;
        c.device = dev;
        c.release = true;
        anchorUpload_ = *it;
        // Uploaded again next: the most recent anchor.
        std::string name = *it;
        anchors_.erase(std::next(it).base());
        anchors_.push_back(name);
        return c;
      }
    return std::nullopt;
  }

  std::optional<Command> draw(CommandKind kind) {
    Command c;
    c.kind = kind;
    switch (kind) {
    case CommandKind::Create: {
      // A tensor made for a run's input often holds unusual values: where
      // value-dependent arithmetic goes wrong.
      bool forRun = wanted_.has_value();
      c.target = freshTensor();
      pickType(c);
      // Rarely a type without dimensions or with a zero one, which the
      // contract refuses (semantics §1).
      if (!forRun && rng_.percent(1)) {
        if (rng_.percent(50))
          c.dims.clear();
        else
          c.dims[rng_.below(c.dims.size())] = 0;
      }
      c.pattern = pickPattern(
          (p_.unusualValuesPercent && rng_.percent(p_.unusualValuesPercent)) ||
          (forRun && rng_.percent(50)));
      // Every fourth tensor has pinned storage, chosen without a draw of
      // its own so that the draws of every seed stay what they were.
      if (tensorCount_ % 4 == 0 && !ch_.devices.empty())
        c.device = *ch_.devices.front();
      break;
    }
    case CommandKind::View: {
      c.target = freshTensor();
      if (viewForNetwork(c))
        break;
      Name source = !ch_.roomy.empty() && rng_.percent(70)
                        ? rng_.pick(ch_.roomy)
                        : pickTensor();
      c.source = *source;
      const ModelTensor *src = m_.tensor(c.source);
      if (src->empty()) {
        c.dims = {1};
        break;
      }
      c.dims = viewShape(*src, c.offset);
      break;
    }
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      c.target = freshTensor();
      c.source = *pickTensor();
      break;
    case CommandKind::MoveAssign:
      c.target = *pickTensor();
      c.source = *rng_.pick(ch_.tensors);
      break;
    case CommandKind::SelfMove:
    case CommandKind::Destroy:
    case CommandKind::Read:
      c.target = *pickTensor();
      break;
    case CommandKind::Write:
    case CommandKind::Refill:
      c.target = *pickTensor();
      c.pattern = pickPattern();
      if (c.pattern == 0)
        c.pattern = 1;
      break;
    case CommandKind::ToDevice: {
      if (planTakeover_) {
        c = *std::exchange(planTakeover_, {});
        break;
      }
      if (planToDevice_) {
        // The device allocates: a given location may be refused.
        std::tie(c.target, c.device) = *std::exchange(planToDevice_, {});
        break;
      }
      if (std::optional<Command> second = secondTakeover()) {
        c = std::move(*second);
        break;
      }
      c.target = *pickTensor();
      c.device = *rng_.pick(ch_.devices);
      const ModelRecord *r = m_.recordOf(c.target);
      // Live locations of the record's size here, other live ones here, and
      // ones of the record's size on another device, which this device must
      // refuse though its own handles may look the same.
      // Now and then one of the record's size here that is no longer the
      // caller's to give: taken over by a tensor, or freed.
      std::vector<Name> fitting, here, elsewhere, given;
      for (Name name : ch_.locations) {
        const ModelLocation &l = m_.locations().at(*name);
        bool sameSize = r && l.bytes == r->bytes;
        if (l.state != ModelLocation::State::Live) {
          if (sameSize && l.device == c.device)
            given.push_back(name);
          continue;
        }
        if (l.device != c.device) {
          if (sameSize)
            elsewhere.push_back(name);
          continue;
        }
        here.push_back(name);
        if (sameSize)
          fitting.push_back(name);
      }
      if (!elsewhere.empty() && rng_.percent(p_.foreignLocationPercent))
        c.location = *rng_.pick(elsewhere);
      else if (!fitting.empty() && rng_.percent(60))
        c.location = *rng_.pick(fitting);
      else if (!here.empty() && rng_.percent(15))
        c.location = *rng_.pick(here);
      else if (!elsewhere.empty() && rng_.percent(10))
        c.location = *rng_.pick(elsewhere);
      else if (!given.empty() && rng_.percent(10))
        c.location = *rng_.pick(given);
      break;
    }
    case CommandKind::FromDevice:
      c.target = *pickTensor();
      c.device = deviceFor(c.target);
      c.release = rng_.percent(50);
      break;
    case CommandKind::Release:
    case CommandKind::DoubleRelease:
      c.target = *pickTensor();
      c.device = deviceFor(c.target);
      break;
    case CommandKind::AddNetwork: {
      std::string fresh = freshNetworkName();
      if (fresh.empty() && ch_.networks.empty())
        return std::nullopt;
      c.target = fresh.empty() ? *rng_.pick(ch_.networks) : fresh;
      // Mostly on a device that is up, where the network can run.
      c.device = !ch_.liveDevices.empty() && rng_.percent(85)
                     ? *rng_.pick(ch_.liveDevices)
                     : *rng_.pick(ch_.devices);
      // One large network a scenario at most: its runs cost the model and
      // the device millions of elements each.
      largeAdd_ = p_.largeNetworkPercent && p_.shapes.empty() && !largeAdded_ &&
                  rng_.percent(p_.largeNetworkPercent);
      largeAdded_ = largeAdded_ || largeAdd_;
      c.elemKind = largeAdd_ ? pickNarrowNetworkKind() : pickNetworkKind();
      if (!p_.shapes.empty()) {
        c.dims = rng_.pick(p_.shapes);
      } else if (largeAdd_) {
        // Millions of elements: several tensors of the type are live while
        // it runs, a quarter of the live bytes each at most. Of a one-byte
        // kind mostly just past 2^22 elements (past a grid of 65536 blocks
        // of 64, or of 65535 groups of 64), else a size from the large
        // classes.
        size_t size = elemSize(c.elemKind);
        uint64_t most = p_.space.maxLiveBytes / 4 / size;
        uint64_t beyond = uint64_t(1) << 22;
        c.dims = shapeOf(
            size == 1 && most > beyond && rng_.percent(85)
                ? rng_.between(beyond + 1,
                               std::min(most, beyond + (uint64_t(1) << 20)))
                : pickBytes(size, most * size, p_.largeNetworkMinBytes) / size);
      } else {
        // Runs compute every element in the model: mostly small networks.
        uint64_t room = std::min<uint64_t>(64 * 1024, p_.space.maxLiveBytes);
        size_t size = elemSize(c.elemKind);
        c.dims =
            shapeOf(pickBytes(size, rng_.percent(90) ? 4096 : room) / size);
      }
      c.nodes = pickNodes(c.elemKind);
      // A large network computes every element in the model too: one node.
      if (largeAdd_)
        c.nodes.resize(1);
      else if (p_.nearTwinNetworkPercent &&
               rng_.percent(p_.nearTwinNetworkPercent))
        makeNearTwin(c);
      break;
    }
    case CommandKind::Run: {
      std::optional<std::string> planned = std::exchange(planRun_, {});
      std::optional<std::string> target = std::exchange(runTarget_, {});
      if (target && !m_.placement().count(*target))
        target.reset();
      c.target = planned  ? *planned
                 : target ? *target
                          : *rng_.pick(ch_.networks);
      const std::string &dev = m_.networkDevices().at(c.target);
      auto it = m_.devices().at(dev).networks.find(c.target);
      if (it == m_.devices().at(dev).networks.end()) {
        c.bindings = {{"x", *rng_.pick(ch_.tensors)}};
        break;
      }
      c.bindings = pickBindings(it->second, planned.has_value());
      if (twinNet_ && c.target == *twinNet_ && !c.bindings.empty())
        twinNet_.reset();
      // A large network runs once, then is evicted: each run costs
      // millions of elements.
      if (largeNet_ && c.target == *largeNet_ && !c.bindings.empty()) {
        evictNext_ = *largeNet_;
        largeNet_.reset();
      }
      if (!planned && !plannedNetwork_ && p_.viewInputPlanPercent &&
          rng_.percent(p_.viewInputPlanPercent) &&
          residentViewsFor(c.target).size() < viewInputsWanted(it->second)) {
        plannedNetwork_ = c.target;
        planStepsLeft_ = 12;
      }
      if (c.bindings.empty()) {
        // Too few tensors of the network's type: make one next (and a plan
        // then runs the network again).
        wanted_ = Type{it->second.elemKind, it->second.dims};
        if (planned)
          plannedNetwork_ = c.target;
        return std::nullopt;
      }
      break;
    }
    case CommandKind::EvictNetwork:
      c.target = *rng_.pick(ch_.networks);
      break;
    case CommandKind::EnsureOutputs: {
      std::optional<std::string> planned = std::exchange(planEnsure_, {});
      c.target = planned ? *planned : *rng_.pick(ch_.networks);
      break;
    }
    case CommandKind::Shutdown: {
      std::vector<Name> holding;
      for (const auto &[id, r] : m_.records())
        if (resident(r))
          holding.push_back(&r.device);
      c.device = holding.empty() || rng_.percent(10) ? *rng_.pick(ch_.devices)
                                                     : *rng_.pick(holding);
      break;
    }
    case CommandKind::InjectFault:
      if (std::optional<PlannedFault> planned = std::exchange(planFault_, {})) {
        // For one output of the several that ensure-outputs reads back
        // next, or for the run drawn with it.
        c.device = planned->device;
        c.fault.site = planned->site;
        c.fault.nth = planned->nth;
        c.fault.code = planned->code;
        break;
      }
      c.device = ch_.liveDevices.empty() ? *rng_.pick(ch_.devices)
                                         : *rng_.pick(ch_.liveDevices);
      {
        // Sites and codes in turn from a drawn start: the k-th fault takes
        // site k % 4 and code (k / 4 + k) % codes, which walks every pair
        // of them in 4 * codes faults.
        if (!faultTurn_)
          faultTurn_ = rng_.below(4 * p_.faultCodes.size());
        uint64_t k = (*faultTurn_)++;
        c.fault.site =
            std::array{FaultSite::Allocation, FaultSite::TransferToDevice,
                       FaultSite::TransferFromDevice, FaultSite::Run}[k % 4];
        c.fault.code = p_.faultCodes[(k / 4 + k) % p_.faultCodes.size()];
      }
      // A fault planned at random meets an operation at its site only
      // where those are frequent: most transfer faults, and run faults
      // where runs are planned for (runFaultPercent), wait for the next
      // command that reaches the device there instead (one at a time).
      if (((c.fault.site == FaultSite::Run && p_.runFaultPercent) ||
           c.fault.site == FaultSite::TransferToDevice ||
           c.fault.site == FaultSite::TransferFromDevice) &&
          !faultWanted_ && rng_.percent(70)) {
        faultWanted_ = WantedFault{c.fault.site, c.fault.code};
        faultWantedStepsLeft_ = 16;
        return std::nullopt;
      }
      c.fault.nth = unsigned(rng_.between(1, 3));
      break;
    case CommandKind::Alloc: {
      c.target = "L" + std::to_string(locationCount_++);
      recentLocations_.push_back(c.target);
      if (recentLocations_.size() > 4)
        recentLocations_.erase(recentLocations_.begin());
      c.device = *rng_.pick(ch_.devices);
      int how = int(rng_.below(10));
      uint64_t left = budgetLeft(c.device);
      // A device without a budget of the scenario's own is held to the
      // backend's default one: one byte past what is left of it costs a
      // correct backend nothing (it refuses before allocating).
      const ModelDevice &md = m_.devices().at(c.device);
      bool defaultBudget = !md.spec.budget && md.budget();
      if (defaultBudget)
        left = md.budget() > md.used ? md.budget() - md.used : 0;
      // Exactly what is left only when nothing issued without waiting is
      // pending whose completion changes what is left: an upload moving a
      // record from another device allocates once its read-back completes,
      // and a read-back that releases frees then (semantics §3).
      bool exact = !m_.transfersPending() || m_.pendingAccountingFixed();
      if (reuseBytes_) {
        c.bytes = *reuseBytes_;
      } else if (exact && left && how < 3 && (!defaultBudget || how == 1)) {
        // Exactly what is left, one byte more or one byte less.
        c.bytes = left + (how == 1 ? 1 : 0) - (how == 2 && left > 1 ? 1 : 0);
      } else if (how < 7 && !m_.records().empty()) {
        // The size of a live record, so that a to-device can take it over.
        auto it = m_.records().begin();
        std::advance(it, rng_.below(m_.records().size()));
        c.bytes = it->second.bytes;
      } else {
        c.bytes = pickBytes(1, 64 * 1024);
      }
      reuseBytes_.reset();
      break;
    }
    case CommandKind::Free:
      if (followLocation_ && m_.locations().count(*followLocation_)) {
        c.target = *followLocation_;
        c.device = m_.locations().at(c.target).device;
        break;
      }
      c.target = *rng_.pick(ch_.locations);
      // Now and then on another device, which must refuse it.
      c.device = ch_.devices.size() > 1 &&
                         rng_.percent(std::max(10u, p_.foreignLocationPercent))
                     ? *rng_.pick(ch_.devices)
                     : m_.locations().at(c.target).device;
      break;
    }
    return c;
  }

  const GeneratorProfile &p_;
  ChoiceSource &rng_;
  Model &m_;
  Choices ch_;
  std::optional<CommandKind> focus_;
  /// The tensor the next command mostly names: that of a transfer just
  /// issued without waiting (the command meets it busy), or an output that
  /// an ensure-outputs just brought home (its upload, issued without
  /// waiting, leaves a run's output Host and busy: what the next
  /// ensure-outputs must wait for).
  std::optional<std::string> followTensor_;
  /// The command drawn last issues the next one from its callback.
  bool continueInCallback_ = false;
  /// The record of a transfer just issued without waiting that the next
  /// command transfers another record beside, and whether this command is
  /// that transfer.
  std::optional<int> besideRecord_;
  bool besideNow_ = false;
  /// The records bound by the runs issued without waiting since the last
  /// command that was not one.
  std::vector<int> busyRunRecords_;
  /// The size of a block just freed: the next raw allocation takes it.
  std::optional<uint64_t> reuseBytes_;
  /// A raw location that the last command, an upload issued without
  /// waiting, takes over: the next free or upload names it.
  std::optional<std::string> followLocation_;
  /// The next command: an upload into a raw location of a record whose
  /// upload to another device the last command issued without waiting.
  std::optional<Command> planTakeover_;
  /// The type a run lacked a tensor of: the next create makes one.
  std::optional<Type> wanted_;
  /// A view-input plan (viewPlanStep): the network it works towards, the
  /// steps it may still take, and what its next command acts on.
  std::optional<std::string> plannedNetwork_;
  int planStepsLeft_ = 0;
  std::optional<std::string> planRun_;
  std::optional<std::string> planView_;
  std::optional<std::pair<std::string, std::string>> planToDevice_;
  /// A read-back fault plan (faultedEnsureStep): its network, whether its
  /// faults are planned, those still to inject (last first) and the steps
  /// it may still take; then the fault the next inject-fault plans, and the
  /// network ensure-outputs brings back.
  struct PlannedFault {
    std::string device;
    FaultSite site;
    unsigned nth;
    ErrorCode code;
  };
  struct FaultedEnsurePlan {
    std::string network;
    bool faultPlanned = false;
    std::vector<PlannedFault> faults;
    int stepsLeft = 8;
  };
  std::optional<FaultedEnsurePlan> faultedEnsure_;
  std::optional<PlannedFault> planFault_;
  /// The fault planned next, behind a read-back issued without waiting.
  std::optional<PlannedFault> faultBehind_;
  /// Commands planned to come next, in order.
  std::vector<Command> planned_;
  /// A run drawn after the fault planned for it, issued next.
  std::optional<Command> heldCommand_;
  std::optional<std::string> planEnsure_;
  /// The input space's value classes, in order of first appearance, and the
  /// patterns of each (pickPattern fills them on first use).
  std::vector<const std::string *> valueClassNames_;
  std::vector<std::vector<uint64_t>> valueClassPatterns_;
  /// The element kinds networks are drawn from (found on first use).
  std::optional<std::vector<ElemKind>> networkKinds_;
  /// The element kinds of this scenario (scenarioKinds).
  std::optional<std::vector<ElemKind>> kinds_;
  /// The (kind, producer, consumer) triples networks of this scenario were
  /// made for.
  std::set<std::tuple<ElemKind, OpKind, OpKind>> plannedPairs_;
  /// The labels the run reached before this scenario, or null.
  const std::map<std::string, int> *reached_;
  size_t tensorCount_ = 0;
  size_t locationCount_ = 0;
  /// The names of the last raw allocations drawn.
  std::vector<std::string> recentLocations_;
  /// Anchors (anchorCommand), in the order of their last upload; how many
  /// were made, the one to upload next, and the commands drawn so far.
  std::vector<std::string> anchors_;
  size_t anchorsMade_ = 0;
  std::optional<std::string> anchorUpload_;
  size_t anchorClock_ = 0;
  /// Allocation bursts (burstCommand): the commands drawn so far, when each
  /// burst is due, and where each is.
  size_t burstClock_ = 0;
  std::optional<size_t> reuseAt_, pressureAt_;
  unsigned reuseStep_ = 0, reuseCyclesLeft_ = 0;
  uint64_t reuseSize_ = 0;
  std::string reuseStale_, reuseLive_;
  unsigned pressureToAllocate_ = 0;
  /// The content burst (contentBurstCommand): when it is due, and its
  /// commands still to come.
  std::optional<size_t> contentBurstAt_;
  /// The network burst (networkBurstCommand): when it is due, and its
  /// commands still to come.
  std::optional<size_t> networkBurstAt_;
  std::vector<Command> networkBurstPlan_;
  std::vector<Command> contentBurstPlan_;
  uint64_t pressureSize_ = 0;
  std::vector<std::string> pressureHeld_;
  /// The released-block plan (releasedBlockCommand): when it is due, and
  /// its commands not yet drawn.
  std::optional<size_t> releasedBlockAt_;
  std::optional<size_t> twinsAt_;
  std::vector<Command> twinsPlan_;
  /// The wide-run plan (wideRunCommand): when it is due, how many
  /// placeholders, and its commands not yet drawn.
  std::optional<size_t> wideRunAt_;
  size_t wideRunPlaceholders_ = 0;
  std::vector<Command> wideRunPlan_;
  /// The plan of viewOfPendingOutputCommand: when it is due, and its
  /// commands not yet drawn.
  std::optional<size_t> viewOfPendingAt_;
  std::vector<Command> viewOfPendingPlan_;
  /// The plan of writeAfterReadCommand: when it is due, and its commands
  /// not yet drawn.
  std::optional<size_t> writeAfterReadAt_;
  std::vector<Command> writeAfterReadPlan_;
  std::vector<Command> releasedBlockPlan_;
  /// The next fault's turn among sites and codes, and the next run fault's
  /// among codes (drawn on first use).
  std::optional<uint64_t> faultTurn_;
  std::optional<uint64_t> runFaultTurn_;
  std::vector<ErrorCode> runFaultCodes_;
  /// The code of a run-site fault waiting for a run that reaches the
  /// device, and the steps it may still wait.
  /// A fault waiting for the next command that reaches the device at its
  /// site, for up to faultWantedStepsLeft_ more commands.
  struct WantedFault {
    FaultSite site;
    ErrorCode code;
  };
  std::optional<WantedFault> faultWanted_;
  int faultWantedStepsLeft_ = 0;
  /// A run's network chosen by an earlier command (an evict, a large add).
  std::optional<std::string> runTarget_;
  /// A near twin of a placed network (makeNearTwin) not run yet, and the
  /// commands left in which to run it.
  std::optional<std::string> twinNet_;
  int twinStepsLeft_ = 0;
  /// A large network just added, whose run the next commands work towards,
  /// for a few steps; whether the add being drawn is a large one.
  std::optional<std::string> largeNet_;
  int largeStepsLeft_ = 0;
  bool largeAdd_ = false;
  bool largeAdded_ = false;
  /// A network to evict next (a large one, run once).
  std::optional<std::string> evictNext_;
};

/// Budgets relative to the sizes scenarios allocate: small enough that
/// OutOfMemory happens, and now and then exactly a multiple of a common
/// size or one byte off it.
uint64_t drawBudget(ChoiceSource &rng, const InputSpace &space) {
  switch (rng.below(4)) {
  case 0:
  case 1:
    return rng.between(1024, 64 * 1024);
  case 2: {
    std::vector<uint64_t> edges;
    for (uint64_t b : space.boundaries)
      if (b >= 256 && b <= 1024 * 1024)
        edges.push_back(b);
    uint64_t b = edges.empty() ? 4096 : rng.pick(edges);
    return b + rng.below(3) - 1;
  }
  default:
    return rng.between(64, 1024);
  }
}

} // namespace

ScenarioGenerator::ScenarioGenerator(GeneratorProfile profile,
                                     Capabilities capabilities)
    : profile_(std::move(profile)), capabilities_(capabilities) {}

namespace {
/// FNV-1a of \p text, continuing from \p h.
uint64_t textHash(std::string_view text, uint64_t h = 14695981039346656037ull) {
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}
} // namespace

void declareInAnotherOrder(Command &add) {
  // Chosen by a hash of the network rather than drawn, so that every
  // family's draws, and with them its cases, stay what they were.
  uint64_t h = textHash(add.target);
  for (const NetworkNode &n : add.nodes)
    h = textHash(n.output, h);
  if (h % 2 == 0)
    return;
  std::vector<std::string> firstUse;
  for (const Placeholder &p :
       networkPlaceholders(add.nodes, Type{add.elemKind, {1}}))
    firstUse.push_back(p.name);
  std::vector<std::string> order = firstUse;
  std::stable_sort(order.begin(), order.end(),
                   [h](const std::string &a, const std::string &b) {
                     return textHash(a, h) < textHash(b, h);
                   });
  if (order != firstUse)
    add.declared = std::move(order);
}

namespace {
/// Appends \p c to \p s with the outcome \p model predicts, which it
/// applies: a network first gets its declared order (runs stage in it), and
/// a command written in-callback whose command before it was not drawn
/// (commandFitsModel refused it) is issued as the next one instead.
void appendCommand(Scenario &s, Model &model, Command c) {
  s.commands.push_back(std::move(c));
  Command &added = s.commands.back();
  if (added.inCallback &&
      !inCallbackProblem(s.commands, s.commands.size() - 1).empty())
    added.inCallback = false;
  if (added.kind == CommandKind::AddNetwork)
    declareInAnotherOrder(added);
  added.expect = model.apply(added).outcome;
}
} // namespace

Scenario
ScenarioGenerator::generate(uint64_t seed, size_t steps,
                            const std::map<std::string, int> *reached) const {
  RandomSource rng(seed);
  return generate(rng, steps, reached);
}

Scenario
ScenarioGenerator::generate(ChoiceSource &rng, size_t steps,
                            const std::map<std::string, int> *reached) const {
  Scenario s;
  s.devices = profile_.devices;
  bool fanIn = profile_.parallelBranches >= MaxBranches &&
               profile_.fanInPercent && rng.percent(profile_.fanInPercent);
  if (fanIn)
    for (DeviceSpec &d : s.devices)
      d.parameters.insert(profile_.fanInDeviceParameters.begin(),
                          profile_.fanInDeviceParameters.end());
  if (!profile_.slowDeviceParameters.empty() &&
      rng.percent(profile_.slowDevicePercent))
    for (DeviceSpec &d : s.devices)
      d.parameters.insert(profile_.slowDeviceParameters.begin(),
                          profile_.slowDeviceParameters.end());
  if (!profile_.raceWideningParameters.empty() &&
      rng.percent(profile_.raceWideningPercent))
    for (DeviceSpec &d : s.devices)
      d.parameters.insert(profile_.raceWideningParameters.begin(),
                          profile_.raceWideningParameters.end());
  if (!profile_.otherConfigurations.empty() && s.devices.size() > 1 &&
      rng.percent(profile_.otherConfigurationPercent)) {
    const auto &other = profile_.otherConfigurations[rng.below(
        profile_.otherConfigurations.size())];
    s.devices.back().parameters.insert(other.begin(), other.end());
  }
  if (profile_.drawBudgets)
    for (DeviceSpec &d : s.devices)
      d.budget = drawBudget(rng, profile_.space);
  // A device that names its backend declares that backend's capabilities;
  // the others, the ones the generator was made for.
  Model model(
      s.devices,
      [&](const DeviceSpec &spec) {
        return spec.backend.empty()
                   ? DeviceTraits{capabilities_, profile_.defaultMaximumMemory}
                   : probedDeviceTraits(spec.backend, spec);
      },
      /*trackContents=*/false);
  Drawing drawing(profile_, rng, model, reached);
  s.commands.reserve(steps);
  // Room for the parallel block: a view per branch of each shared record,
  // and the branches' commands.
  size_t block = 0;
  // Runs over shared records need room for the second shared record and
  // for a network, an output or two and two views per branch besides its
  // commands: a scenario of 14 steps or more, with a short prefix.
  bool sharedRuns = !fanIn && profile_.parallelBranches > 1 &&
                    profile_.sharedRecords >= 2 && steps >= 14 &&
                    profile_.sharedRunsPercent &&
                    rng.percent(profile_.sharedRunsPercent);
  if (fanIn)
    block = std::min(steps, FanInMostCommands);
  else if (sharedRuns)
    block = steps - std::max<size_t>(2, steps / 5);
  else if (profile_.parallelBranches > 1)
    block =
        std::min(steps / 2, size_t(MaxBranches) * (2 + profile_.branchLength));
  // Content twins for the branches (GeneratorProfile::branchTwinsPercent)
  // take room from the sequential part: a create and an upload each.
  bool branchTwins = block && !fanIn && !sharedRuns &&
                     profile_.branchTwinsPercent &&
                     rng.percent(profile_.branchTwinsPercent);
  size_t sequentialSteps = steps - block;
  if (branchTwins)
    sequentialSteps -= std::min(sequentialSteps / 2, size_t(2 * MaxBranches));
  drawing.plan(sequentialSteps);
  // A drawn kind can be impossible in the current state; a few redraws
  // always find one (create is always possible below maxTensors).
  for (size_t attempts = 0; s.commands.size() < sequentialSteps &&
                            attempts < 4 * steps && !rng.exhausted();
       ++attempts) {
    std::optional<Command> c = drawing.next();
    if (!c || !commandFitsModel(*c, model))
      continue;
    appendCommand(s, model, std::move(*c));
  }
  if (fanIn && !rng.exhausted())
    addFanInBlock(s, model, rng, steps);
  else if (block && !rng.exhausted())
    addParallelBlock(
        s, model, rng, steps, sharedRuns, branchTwins,
        [&](ElemKind kind) { return drawing.nodesReadingTwo(kind); });
  return s;
}

namespace {
/// A run of the network \p add describes with each placeholder bound to one
/// of \p tensors of its type (outputs whole, on records no other binding
/// uses), or nothing when they cannot bind it.
std::optional<Command> branchRun(const Model &model, const Command &add,
                                 const std::vector<std::string> &tensors,
                                 ChoiceSource &rng) {
  Type type{add.elemKind, add.dims};
  Command run;
  run.kind = CommandKind::Run;
  run.target = add.target;
  std::vector<int> outputRecords, inputRecords;
  for (const Placeholder &p : networkPlaceholders(add.nodes, type)) {
    bool isOutput =
        std::any_of(add.nodes.begin(), add.nodes.end(),
                    [&](const NetworkNode &n) { return n.output == p.name; });
    std::vector<const std::string *> fit;
    for (const std::string &name : tensors) {
      const ModelTensor &t = *model.tensor(name);
      if (t.empty() || t.kind != type.kind || t.dims != type.dims)
        continue;
      auto among = [&](const std::vector<int> &records) {
        return std::find(records.begin(), records.end(), t.record) !=
               records.end();
      };
      bool whole =
          t.offsetBytes == 0 && t.bytes() == model.records().at(t.record).bytes;
      if (among(outputRecords) || (isOutput && (!whole || among(inputRecords))))
        continue;
      fit.push_back(&name);
    }
    if (fit.empty())
      return std::nullopt;
    const std::string &chosen = *fit[rng.below(fit.size())];
    (isOutput ? outputRecords : inputRecords)
        .push_back(model.tensor(chosen)->record);
    run.bindings.emplace_back(p.name, chosen);
  }
  return run;
}
} // namespace

void ScenarioGenerator::addParallelBlock(
    Scenario &s, Model &model, ChoiceSource &rng, size_t steps, bool sharedRuns,
    bool branchTwins,
    const std::function<std::optional<std::vector<NetworkNode>>(ElemKind)>
        &networkNodes) const {
  // Up to sharedRecords records the branches share, each through a full
  // view per branch (a tensor object belongs to one branch).
  std::vector<std::string> owners;
  std::vector<int> records;
  for (const auto &[name, t] : model.tensors())
    if (!t.empty() && !t.isView &&
        std::find(records.begin(), records.end(), t.record) == records.end()) {
      owners.push_back(name);
      records.push_back(t.record);
    }
  auto append = [&](Command c) { appendCommand(s, model, std::move(c)); };
  // Appends a create of a fresh tensor named after \p base; its name. Often
  // with the fill of the block's last tensor of its type: twins in other
  // branches, which a device that shares the blocks of equal uploads links
  // though no record does.
  std::map<std::pair<ElemKind, std::vector<size_t>>, uint64_t> fills;
  auto create = [&](std::string base, ElemKind kind,
                    const std::vector<size_t> &dims) {
    Command c;
    c.kind = CommandKind::Create;
    c.target = std::move(base);
    while (model.tensor(c.target))
      c.target += "_";
    c.elemKind = kind;
    c.dims = dims;
    c.pattern = 1 + rng.below(200);
    auto [fill, fresh] = fills.try_emplace({kind, dims}, c.pattern);
    if (!fresh && rng.percent(40))
      c.pattern = fill->second;
    fill->second = c.pattern;
    std::string name = c.target;
    append(std::move(c));
    return name;
  };
  std::vector<std::string> liveDevices;
  for (const auto &[name, d] : model.devices())
    if (!d.shutDown)
      liveDevices.push_back(name);
  // A block tests something parallel only with two branches or more, and a
  // branch needs a view of each shared record and a command: the room left
  // decides how many records are shared and how many branches there can be.
  size_t room = steps > s.commands.size() ? steps - s.commands.size() : 0;
  std::vector<std::string> shared;
  size_t fit = 0;
  // Runs over shared records: each branch needs two views, a network and
  // an output or two besides its commands, and the block may create the
  // second record. The first record is a small one (a run computes every
  // element in the model) of a kind with networks.
  std::optional<std::vector<NetworkNode>> firstNodes;
  if (sharedRuns) {
    std::vector<size_t> small;
    for (size_t i = 0; i < owners.size(); ++i)
      if (model.tensor(owners[i])->bytes() <= 64 * 1024)
        small.push_back(i);
    fit = std::min<size_t>(std::min(profile_.parallelBranches, MaxBranches),
                           room > 1 ? (room - 1) / 5 : 0);
    if (small.empty() || liveDevices.empty() || fit < 2)
      sharedRuns = false;
    else {
      size_t i = small[rng.below(small.size())];
      firstNodes = networkNodes(model.tensor(owners[i])->kind);
      if (!firstNodes) {
        sharedRuns = false;
      } else {
        shared.push_back(owners[i]);
        owners.erase(owners.begin() + ptrdiff_t(i));
      }
    }
  }
  if (sharedRuns) {
    const ModelTensor &first = *model.tensor(shared[0]);
    std::vector<size_t> alike;
    for (size_t i = 0; i < owners.size(); ++i) {
      const ModelTensor &t = *model.tensor(owners[i]);
      if (t.kind == first.kind && t.dims == first.dims)
        alike.push_back(i);
    }
    if (!alike.empty()) {
      size_t i = alike[rng.below(alike.size())];
      shared.push_back(owners[i]);
      owners.erase(owners.begin() + ptrdiff_t(i));
    } else {
      shared.push_back(create(shared[0] + "_twin", first.kind, first.dims));
      if (rng.percent(50)) {
        Command up;
        up.kind = CommandKind::ToDevice;
        up.target = shared.back();
        up.device = liveDevices[rng.below(liveDevices.size())];
        append(up);
      }
    }
  } else {
    size_t sharedCount = std::min<size_t>(
        std::min<size_t>(profile_.sharedRecords, 2), owners.size());
    while (sharedCount > 0 && room < 2 * (sharedCount + 1))
      --sharedCount;
    // Without a shared record, each branch needs one of its own.
    if (room < 2 * (sharedCount + 1) || (sharedCount == 0 && owners.size() < 2))
      return;
    for (size_t k = 0; k < sharedCount; ++k) {
      size_t i = rng.below(owners.size());
      shared.push_back(owners[i]);
      owners.erase(owners.begin() + ptrdiff_t(i));
    }
    fit = std::min(size_t(std::min(profile_.parallelBranches, MaxBranches)),
                   room / (sharedCount + 1));
    if (sharedCount == 0)
      fit = std::min(fit, owners.size());
  }
  size_t sharedCount = shared.size();
  size_t branches = size_t(rng.between(2, fit));
  // The branch that shuts a device down, if any (1-based; 0: none).
  size_t shutdownBranch = !sharedRuns && profile_.branchShutdownPercent &&
                                  rng.percent(profile_.branchShutdownPercent)
                              ? 1 + rng.below(branches)
                              : 0;
  // The branch that plans a fault, if any, and the fault: not DeviceLost,
  // which would fail what other threads have in flight, nor beside a
  // shutdown (validateScenario).
  size_t faultBranch = 0;
  FaultSpec fault;
  if (profile_.branchFaultPercent && !sharedRuns && !shutdownBranch &&
      rng.percent(profile_.branchFaultPercent)) {
    faultBranch = 1 + rng.below(branches);
    fault.site =
        std::array{FaultSite::Allocation, FaultSite::TransferToDevice,
                   FaultSite::TransferFromDevice, FaultSite::Run}[rng.below(4)];
    fault.nth = rng.percent(50) ? 1 : unsigned(rng.between(1, 3));
    fault.code =
        rng.percent(50) ? ErrorCode::DeviceError : ErrorCode::OutOfMemory;
  }
  // A network per branch, of the shared records' type, on any live device:
  // a run on another device than a shared record's copies or moves it.
  // Half the later ones are the first one again on its device (two
  // instances of one model), so that runs on several threads use the same
  // kernels at the same time.
  std::vector<std::string> ownNetworks(branches);
  std::string firstDevice;
  for (size_t b = 0; b < branches && sharedRuns; ++b) {
    const ModelTensor &first = *model.tensor(shared[0]);
    Command add;
    add.kind = CommandKind::AddNetwork;
    add.target = "shared_runs_" + std::to_string(b + 1);
    while (model.networkDevices().count(add.target))
      add.target += "_";
    bool again = b > 0 && rng.percent(50);
    add.device =
        again ? firstDevice : liveDevices[rng.below(liveDevices.size())];
    if (b == 0)
      firstDevice = add.device;
    add.elemKind = first.kind;
    add.dims = first.dims;
    add.nodes = b == 0 || again
                    ? *firstNodes
                    : networkNodes(first.kind).value_or(*firstNodes);
    append(add);
    if (s.commands.back().expect == Outcome::ok())
      ownNetworks[b] = add.target;
  }
  std::vector<std::vector<std::string>> targets(branches);
  for (size_t b = 1; b <= branches; ++b)
    for (const std::string &owner : shared) {
      const ModelTensor &t = *model.tensor(owner);
      Command v;
      v.kind = CommandKind::View;
      v.target = owner + "_" + std::to_string(b);
      while (model.tensor(v.target))
        v.target += "_";
      v.source = owner;
      v.dims = t.dims;
      targets[b - 1].push_back(v.target);
      append(std::move(v));
    }
  // The records not shared go to one branch each, which uses the owner
  // itself. Without shared records every branch gets one first. An owner
  // often joins one of its type, so that a branch can bind a network's
  // placeholders to tensors of its own.
  auto sameType = [&](const std::string &a, const std::string &b) {
    const ModelTensor &x = *model.tensor(a), &y = *model.tensor(b);
    return x.kind == y.kind && x.dims == y.dims;
  };
  for (size_t i = 0; i < owners.size(); ++i) {
    if (sharedCount == 0 && i < branches) {
      targets[i].push_back(owners[i]);
      continue;
    }
    if (sharedCount != 0 && !rng.percent(75))
      continue;
    size_t b = rng.below(branches);
    for (size_t j = 0; j < i; ++j)
      if (sameType(owners[i], owners[j]) && rng.percent(85))
        for (size_t k = 0; k < branches; ++k)
          if (std::find(targets[k].begin(), targets[k].end(), owners[j]) !=
              targets[k].end())
            b = k;
    targets[b].push_back(owners[i]);
  }
  // The first and second commands of a branch, where a plan below gives
  // it some.
  std::vector<std::optional<Command>> firsts(branches);
  std::vector<std::optional<Command>> seconds(branches);
  // The live devices without a budget of their own, whose backend enforces
  // budgets, that held at most MaxContendedBytes more than they hold now:
  // the block may give one a budget without changing an earlier outcome.
  auto budgetable = [&] {
    std::vector<std::string> candidates;
    for (const std::string &name : liveDevices) {
      const ModelDevice &d = model.devices().at(name);
      if (!d.spec.budget && d.traits.capabilities.memoryBudget &&
          d.peakUsed - d.used <= MaxContendedBytes)
        candidates.push_back(name);
    }
    return candidates;
  };
  // Gives \p device the budget \p budget from the scenario's start, in the
  // model and in its declaration, with \p parameters besides.
  auto giveBudget = [&](const std::string &device, uint64_t budget,
                        const std::map<std::string, std::string> &parameters) {
    model.setDeviceBudget(device, budget);
    for (DeviceSpec &spec : s.devices)
      if (spec.name == device) {
        spec.budget = budget;
        spec.parameters.insert(parameters.begin(), parameters.end());
      }
  };
  // A command of branch \p b (counted from 0) on \p target and \p device.
  auto inBranch = [](CommandKind kind, size_t b, std::string target,
                     std::string device) {
    Command c;
    c.kind = kind;
    c.branch = int(b + 1);
    c.target = std::move(target);
    c.device = std::move(device);
    return c;
  };
  // Two branches that begin with an upload each to a device whose budget
  // fits one of them (GeneratorProfile::contendedBudgetPercent).
  if (profile_.contendedBudgetPercent && !sharedRuns && !shutdownBranch &&
      !faultBranch && rng.percent(profile_.contendedBudgetPercent)) {
    std::vector<std::string> candidates = budgetable();
    // Two creates, then a command per branch at least.
    if (!candidates.empty() && steps >= s.commands.size() + 2 + branches) {
      std::string device = candidates[rng.below(candidates.size())];
      const ModelDevice &d = model.devices().at(device);
      // Each upload at least what the device held at its most beyond what
      // it holds now, so that the budget never refuses what it let through.
      uint64_t bytes = std::max<uint64_t>(d.peakUsed - d.used,
                                          uint64_t(4) << rng.between(4, 16));
      bytes = (bytes + 3) / 4 * 4;
      uint64_t budget = d.used + bytes + rng.below(bytes);
      if (!d.budget() || budget <= d.budget()) {
        giveBudget(device, budget, {});
        size_t first = rng.below(branches);
        size_t second = (first + 1 + rng.below(branches - 1)) % branches;
        for (size_t b : {first, second}) {
          Command up;
          up.kind = CommandKind::ToDevice;
          up.branch = int(b + 1);
          up.target = create("contended_" + std::to_string(b + 1),
                             ElemKind::Float32, {size_t(bytes / 4)});
          up.device = device;
          if (profile_.syncPercent)
            up.sync = rng.percent(profile_.syncPercent);
          targets[b].push_back(up.target);
          firsts[b] = std::move(up);
        }
      }
    }
  }
  // A release beside another branch's upload, then an upload into the
  // freed room (GeneratorProfile::freeBesideUploadPercent).
  if (profile_.freeBesideUploadPercent && !sharedRuns && !shutdownBranch &&
      !faultBranch &&
      std::none_of(
          firsts.begin(), firsts.end(),
          [](const std::optional<Command> &c) { return c.has_value(); }) &&
      rng.percent(profile_.freeBesideUploadPercent)) {
    std::vector<std::string> candidates = budgetable();
    // Three creates and an upload, then two commands in one branch and one
    // in another.
    if (!candidates.empty() && steps >= s.commands.size() + 4 + branches + 1) {
      std::string device = candidates[rng.below(candidates.size())];
      uint64_t freedBytes = uint64_t(4) << rng.between(6, 14);
      std::string freed =
          create("freed", ElemKind::Float32, {size_t(freedBytes / 4)});
      Command up;
      up.kind = CommandKind::ToDevice;
      up.target = freed;
      up.device = device;
      append(up);
      const ModelDevice &d = model.devices().at(device);
      // The first upload at least what the device held at its most beyond
      // what it holds now, so that the budget never refuses what it let
      // through; the budget leaves less than the freed bytes beyond it.
      uint64_t besideBytes = std::max<uint64_t>(
          d.peakUsed - d.used, uint64_t(4) << rng.between(4, 14));
      besideBytes = (besideBytes + 3) / 4 * 4;
      uint64_t budget = d.used + besideBytes + rng.below(freedBytes / 2);
      if (s.commands.back().expect == Outcome::ok() &&
          (!d.budget() || budget <= d.budget())) {
        giveBudget(device, budget, profile_.slowDeviceParameters);
        size_t uploader = rng.below(branches);
        size_t freer = (uploader + 1 + rng.below(branches - 1)) % branches;
        std::string beside =
            create("beside", ElemKind::Float32, {size_t(besideBytes / 4)});
        targets[uploader].push_back(beside);
        firsts[uploader] =
            inBranch(CommandKind::ToDevice, uploader, beside, device);
        firsts[freer] = inBranch(CommandKind::Release, freer, freed, device);
        std::string into =
            create("into_freed", ElemKind::Float32, {size_t(freedBytes / 4)});
        targets[freer].push_back(freed);
        targets[freer].push_back(into);
        seconds[freer] = inBranch(CommandKind::ToDevice, freer, into, device);
      }
    }
  }
  // The device the shutdown takes down while another branch copies a
  // record of tens of MiB to or from it, and destroys the record once the
  // copy has called back (GeneratorProfile::longCopyBesideShutdownPercent).
  std::optional<std::string> shutdownDevice;
  if (shutdownBranch && profile_.longCopyBesideShutdownPercent &&
      !liveDevices.empty() && steps >= s.commands.size() + 3 + branches &&
      rng.percent(profile_.longCopyBesideShutdownPercent)) {
    auto [least, most] = profile_.longCopyBytes;
    uint64_t bytes = (least + rng.below(most - least + 1)) / 4 * 4;
    uint64_t live = 0;
    for (const auto &[id, r] : model.records())
      live += r.bytes;
    std::string device = liveDevices[rng.below(liveDevices.size())];
    const ModelDevice &d = model.devices().at(device);
    bool upload = rng.percent(50);
    // Within the scenario's bound on live bytes, like any other tensor, and
    // an upload within what the device's budget leaves.
    if (bytes >= 4 && live + bytes <= profile_.space.maxLiveBytes &&
        (!upload || !d.budget() || d.available() >= bytes)) {
      std::string name =
          create("long_copy", ElemKind::Float32, {size_t(bytes / 4)});
      size_t b = (shutdownBranch + rng.below(branches - 1)) % branches;
      Command copy;
      copy.branch = int(b + 1);
      copy.target = name;
      copy.device = device;
      if (upload) {
        copy.kind = CommandKind::ToDevice;
      } else {
        Command up;
        up.kind = CommandKind::ToDevice;
        up.target = name;
        up.device = device;
        append(up);
        copy.kind = CommandKind::FromDevice;
        copy.release = rng.percent(50);
      }
      if (profile_.syncPercent)
        copy.sync = rng.percent(profile_.syncPercent);
      if (upload || s.commands.back().expect == Outcome::ok()) {
        firsts[b] = std::move(copy);
        shutdownDevice = device;
        // The record goes as soon as its copy has called back, also when
        // the shutdown ended the copy: a backend that still reads an
        // upload's source or writes a read-back's destination after that
        // touches freed memory, which blocks past 32 MiB unmap (a crash).
        // A read-back's record stays in half the cases, for the branch's
        // other commands.
        if (upload || rng.percent(50)) {
          Command destroy;
          destroy.kind = CommandKind::Destroy;
          destroy.branch = int(b + 1);
          destroy.target = name;
          seconds[b] = std::move(destroy);
        } else {
          targets[b].push_back(name);
        }
        // The shutdown branch first moves a record of its own to another
        // device, tens of microseconds, so that the copy is under way when
        // the shutdown comes: one issued at once often reaches the device
        // before the copy starts, and a device's queue drops what has not.
        std::vector<std::string> others;
        for (const std::string &o : liveDevices)
          if (o != device)
            others.push_back(o);
        std::vector<std::string> &own = targets[shutdownBranch - 1];
        if (!others.empty() && !own.empty()) {
          Command move;
          move.kind = CommandKind::ToDevice;
          move.branch = int(shutdownBranch);
          move.target = own[rng.below(own.size())];
          move.device = others[rng.below(others.size())];
          firsts[shutdownBranch - 1] = std::move(move);
        }
      }
    }
  }
  // Content twins, one per branch (GeneratorProfile::branchTwinsPercent):
  // the creates and most uploads now, each branch's first command on its
  // twin below. Every branch keeps room for a command.
  if (branchTwins && !liveDevices.empty() &&
      std::none_of(
          firsts.begin(), firsts.end(),
          [](const std::optional<Command> &c) { return c.has_value(); }) &&
      steps >= s.commands.size() + 3 * branches) {
    std::string device = liveDevices[rng.below(liveDevices.size())];
    std::vector<std::string> others;
    for (const std::string &o : liveDevices)
      if (o != device)
        others.push_back(o);
    Command twin;
    twin.kind = CommandKind::Create;
    twin.elemKind = rng.percent(50) ? ElemKind::Float32 : ElemKind::UInt8;
    twin.dims = {size_t(1 + rng.below(1024))};
    twin.pattern = 1 + rng.below(200);
    for (size_t b = 0; b < branches; ++b) {
      twin.target = "twin_" + std::to_string(b + 1);
      while (model.tensor(twin.target))
        twin.target += "_";
      append(twin);
      Command first;
      first.branch = int(b + 1);
      first.target = twin.target;
      first.device = device;
      // One branch in three, past the first, uploads its twin while the
      // others drop theirs.
      if (b > 0 && rng.percent(33)) {
        first.kind = CommandKind::ToDevice;
      } else {
        Command up;
        up.kind = CommandKind::ToDevice;
        up.target = twin.target;
        up.device = device;
        append(up);
        unsigned how = unsigned(rng.below(3));
        if (how == 0) {
          first.kind = CommandKind::Release;
        } else if (how == 1 || others.empty()) {
          first.kind = CommandKind::FromDevice;
          first.release = true;
        } else {
          first.kind = CommandKind::ToDevice;
          first.device = others[rng.below(others.size())];
        }
      }
      if (profile_.syncPercent && first.kind != CommandKind::Release)
        first.sync = rng.percent(profile_.syncPercent);
      targets[b].push_back(twin.target);
      firsts[b] = std::move(first);
    }
  }
  // A run a branch can make: of a network each placeholder of which it
  // binds to a tensor of its own. A network runs in one branch at most:
  // its context belongs to that branch.
  std::vector<std::optional<Command>> runs(branches);
  std::vector<const Command *> networks;
  for (const auto &[deviceName, d] : model.devices())
    for (const auto &[network, add] : d.networks)
      networks.push_back(&add);
  // Most branches get a network and tensors of its type made for it, so
  // that runs meet runs and transfers of other branches; each branch keeps
  // room for its one command.
  if (shutdownBranch || faultBranch)
    networks.clear();
  for (size_t b = 0; b < branches && !networks.empty(); ++b) {
    size_t i = rng.below(networks.size());
    if (sharedRuns) {
      auto own =
          std::find_if(networks.begin(), networks.end(), [&](const Command *n) {
            return n->target == ownNetworks[b];
          });
      if (own == networks.end())
        continue;
      i = size_t(own - networks.begin());
    }
    const Command &add = *networks[i];
    std::vector<Placeholder> placeholders =
        networkPlaceholders(add.nodes, Type{add.elemKind, add.dims});
    // Inputs often read the branch's views of shared records, in an order
    // of their own: runs on other threads then hold the same records
    // together, each taking them while it holds others. The other
    // placeholders get tensors made for them.
    std::vector<std::string> sharedViews(
        targets[b].begin(),
        targets[b].begin() +
            ptrdiff_t(std::min(shared.size(), targets[b].size())));
    std::vector<std::optional<std::string>> reused(placeholders.size());
    size_t creates = 0;
    for (size_t k = 0; k < placeholders.size(); ++k) {
      if (!networkWrites(add.nodes, placeholders[k].name) &&
          !sharedViews.empty() && (sharedRuns || rng.percent(50))) {
        // Runs over shared records: mostly the first branch binds them in
        // the order they were shared, the second in the other order, ...
        size_t v = rng.below(sharedViews.size());
        if (sharedRuns && rng.percent(75))
          v = b % 2 ? sharedViews.size() - 1 : 0;
        const ModelTensor &t = *model.tensor(sharedViews[v]);
        if (t.kind == add.elemKind && t.dims == add.dims) {
          reused[k] = sharedViews[v];
          sharedViews.erase(sharedViews.begin() + ptrdiff_t(v));
          continue;
        }
      }
      ++creates;
    }
    if (s.commands.size() + creates + branches > steps ||
        (!sharedRuns && !rng.percent(70)))
      continue;
    networks.erase(networks.begin() + ptrdiff_t(i));
    Command run;
    run.kind = CommandKind::Run;
    run.target = add.target;
    for (size_t k = 0; k < placeholders.size(); ++k) {
      const Placeholder &p = placeholders[k];
      if (reused[k]) {
        run.bindings.emplace_back(p.name, *reused[k]);
        continue;
      }
      std::string made =
          create(add.target + "_" + p.name + "_" + std::to_string(b + 1),
                 add.elemKind, add.dims);
      targets[b].push_back(made);
      run.bindings.emplace_back(p.name, made);
    }
    runs[b] = std::move(run);
  }
  // The other networks, on tensors a branch owns already.
  for (const Command *add : networks) {
    size_t b = rng.below(branches);
    if (!runs[b])
      runs[b] = branchRun(model, *add, targets[b], rng);
  }
  std::vector<std::string> devices;
  for (const auto &[name, d] : model.devices())
    devices.push_back(name);
  static constexpr std::array<std::pair<CommandKind, unsigned>, 6> Kinds = {
      {{CommandKind::ToDevice, 4},
       {CommandKind::FromDevice, 3},
       {CommandKind::Read, 2},
       {CommandKind::Refill, 2},
       {CommandKind::Release, 1},
       {CommandKind::Run, 5}}};
  for (size_t b = 1; b <= branches; ++b) {
    const std::optional<Command> &run = runs[b - 1];
    unsigned total = 0;
    for (const auto &[kind, weight] : Kinds)
      if (kind != CommandKind::Run || run)
        total += weight;
    // Every later branch keeps room for its one command.
    size_t left = steps - s.commands.size() - (branches - b);
    size_t length =
        std::min(size_t(rng.between(1, profile_.branchLength)), left);
    // Room for the shutdown after the command that comes first, and for
    // the destroy after a long copy.
    if (((b == shutdownBranch || b == faultBranch) && firsts[b - 1]) ||
        seconds[b - 1]) {
      length = std::min<size_t>(std::max<size_t>(length, 2), left);
      if (length < 2) {
        firsts[b - 1].reset();
        seconds[b - 1].reset();
      }
    }
    // A destroyed long copy leaves the branch nothing else to name.
    if (seconds[b - 1] && targets[b - 1].empty())
      length = std::min<size_t>(length, 2);
    // The shutdown takes one of the branch's places, often after a
    // command of its own, so that the others' transfers are under way.
    // Beside a long copy, right after the branch's first command: the
    // copy, which the other branch issues first, is then under way.
    size_t shutdownAt = b != shutdownBranch ? length
                        : shutdownDevice    ? std::min<size_t>(1, length - 1)
                                            : rng.below(length);
    // Half the time the fault is planned first: the branches start
    // together, so the operation it strikes is submitted while the others'
    // first operations are still in flight, their completions undelivered.
    size_t faultAt = b != faultBranch  ? length
                     : rng.percent(50) ? 0
                                       : rng.below(length);
    // Neither takes the place of the branch's first command.
    if (firsts[b - 1]) {
      shutdownAt = std::max<size_t>(shutdownAt, 1);
      faultAt = std::max<size_t>(faultAt, 1);
    }
    // A branch of runs over shared records runs its network at least once,
    // mostly first (the branches start together, so their first runs take
    // the records at the same time), and often again.
    size_t runAt = !sharedRuns || !run ? length
                   : rng.percent(70)   ? 0
                                       : rng.below(length);
    for (size_t k = 0; k < length; ++k) {
      Command c;
      if (k == 0 && firsts[b - 1]) {
        s.commands.push_back(*firsts[b - 1]);
        continue;
      }
      if (k == 1 && seconds[b - 1]) {
        s.commands.push_back(*seconds[b - 1]);
        continue;
      }
      if (k == shutdownAt || k == faultAt) {
        c.kind =
            k == shutdownAt ? CommandKind::Shutdown : CommandKind::InjectFault;
        c.branch = int(b);
        c.device = c.kind == CommandKind::Shutdown && shutdownDevice
                       ? *shutdownDevice
                       : devices[rng.below(devices.size())];
        // Where both fall on one place, the shutdown takes it.
        if (c.kind == CommandKind::InjectFault)
          c.fault = fault;
        s.commands.push_back(c);
        continue;
      }
      unsigned at = unsigned(rng.below(total));
      for (const auto &[kind, weight] : Kinds) {
        if (kind == CommandKind::Run && !run)
          continue;
        if (at < weight) {
          c.kind = kind;
          break;
        }
        at -= weight;
      }
      if (k == runAt || (sharedRuns && run && rng.percent(50)))
        c.kind = CommandKind::Run;
      if (c.kind == CommandKind::Run) {
        c = *run;
        c.branch = int(b);
        c.sync = profile_.syncPercent && rng.percent(profile_.syncPercent);
        s.commands.push_back(c);
        continue;
      }
      c.branch = int(b);
      c.target = targets[b - 1][rng.below(targets[b - 1].size())];
      // Only the fields the command's kind has: what is printed is then the
      // whole command, and no other kind's field holds on to a device.
      switch (c.kind) {
      case CommandKind::ToDevice:
      case CommandKind::Release:
        c.device = devices[rng.below(devices.size())];
        break;
      case CommandKind::FromDevice:
        c.device = devices[rng.below(devices.size())];
        c.release = rng.percent(50);
        break;
      case CommandKind::Refill:
        c.pattern = 1 + rng.below(200);
        break;
      default:
        break;
      }
      if ((c.kind == CommandKind::ToDevice ||
           c.kind == CommandKind::FromDevice) &&
          profile_.syncPercent)
        c.sync = rng.percent(profile_.syncPercent);
      s.commands.push_back(c);
    }
  }
}

void ScenarioGenerator::addFanInBlock(Scenario &s, Model &model,
                                      ChoiceSource &rng, size_t steps) const {
  // The create, the upload, a view and a command per branch.
  if (steps < s.commands.size() + 2 + 2 * size_t(MaxBranches))
    return;
  std::string device;
  for (const auto &[name, d] : model.devices())
    if (!d.shutDown) {
      device = name;
      break;
    }
  if (device.empty())
    return;
  auto append = [&](Command c) { appendCommand(s, model, std::move(c)); };
  // A record large enough that its transfers take a while on any backend.
  Command create;
  create.kind = CommandKind::Create;
  create.target = "fan";
  while (model.tensor(create.target))
    create.target += "_";
  create.elemKind = ElemKind::Float32;
  create.dims = {rng.percent(50) ? size_t(64) * 1024 : size_t(256) * 1024};
  create.pattern = 1 + rng.below(200);
  append(create);
  Command upload;
  upload.kind = CommandKind::ToDevice;
  upload.target = create.target;
  upload.device = device;
  append(upload);
  std::vector<std::string> views;
  for (int b = 1; b <= MaxBranches; ++b) {
    Command v;
    v.kind = CommandKind::View;
    v.target = create.target + "_" + std::to_string(b);
    while (model.tensor(v.target))
      v.target += "_";
    v.source = create.target;
    v.dims = create.dims;
    append(v);
    views.push_back(v.target);
  }
  // The holder reads the record back, uploads it again and reads it back
  // once more: three windows in which it is busy, so that the others'
  // later commands meet one of them though the threads start in any order.
  // The others mostly only wait: a read, a write or a release sets no busy
  // of its own whose end would pass a wakeup on to the next waiter (one in
  // ten is a read-back, which does).
  int holder = 1 + int(rng.below(MaxBranches));
  static constexpr std::array<std::pair<CommandKind, unsigned>, 4> Waits = {
      {{CommandKind::Read, 4},
       {CommandKind::Refill, 3},
       {CommandKind::Release, 2},
       {CommandKind::FromDevice, 1}}};
  for (int b = 1; b <= MaxBranches; ++b) {
    // Every later branch keeps room for its one command.
    size_t left = steps - s.commands.size() - size_t(MaxBranches - b);
    size_t length = std::min<size_t>(3, left);
    for (size_t k = 0; k < length; ++k) {
      Command c;
      c.branch = b;
      c.target = views[size_t(b - 1)];
      if (b == holder) {
        c.kind = k == 1 ? CommandKind::ToDevice : CommandKind::FromDevice;
      } else {
        unsigned at = unsigned(rng.below(10));
        for (const auto &[kind, weight] : Waits) {
          if (at < weight) {
            c.kind = kind;
            break;
          }
          at -= weight;
        }
      }
      switch (c.kind) {
      case CommandKind::ToDevice:
      case CommandKind::Release:
        c.device = device;
        break;
      case CommandKind::FromDevice:
        c.device = device;
        // The holder releases the device copy, so that its upload moves
        // the record again.
        c.release = b == holder || rng.percent(50);
        break;
      case CommandKind::Refill:
        c.pattern = 1 + rng.below(200);
        break;
      default:
        break;
      }
      s.commands.push_back(c);
    }
  }
}

rc::Gen<Scenario> genScenario(const GeneratorProfile &profile,
                              const Capabilities &capabilities) {
  // Shared, not copied: rapidcheck copies its generators' functions many
  // times per value, and a profile holds the whole input space.
  auto generator =
      std::make_shared<const ScenarioGenerator>(profile, capabilities);
  return rc::gen::withSize([generator](int size) {
    return rc::gen::map(rc::gen::arbitrary<uint64_t>(),
                        [generator, size](uint64_t seed) {
                          return generator->generate(seed, size_t(size) + 1);
                        });
  });
}

} // namespace drt::conformance
