//===- Generators.cpp - Scenario generators -------------------------------===//
#include "drt/conformance/Generators.h"

#include <algorithm>

#include "drt/conformance/ScenarioText.h"

#include <ostream>

namespace drt::conformance {

using GenCommandPtr =
    std::shared_ptr<const rc::state::Command<Model, ScenarioBuilder>>;

bool commandFitsModel(const Command &c, const Model &model) {
  auto has = [&](const std::string &name) { return model.tensor(name); };
  auto hasDevice = [&](const std::string &name) {
    return model.devices().count(name) != 0;
  };
  auto locationOn = [&](const std::string &name, const std::string &device) {
    auto it = model.locations().find(name);
    return it != model.locations().end() && it->second.device == device;
  };
  auto network = [&](const std::string &name) {
    return model.networkDevices().count(name) != 0;
  };
  switch (c.kind) {
  case CommandKind::Create:
    return !has(c.target);
  case CommandKind::View:
  case CommandKind::Clone:
  case CommandKind::MoveConstruct:
    return has(c.source) && !has(c.target);
  case CommandKind::MoveAssign:
    return has(c.source) && has(c.target);
  case CommandKind::SelfMove:
  case CommandKind::Destroy:
  case CommandKind::Read:
  case CommandKind::Write:
  case CommandKind::Refill:
    return has(c.target);
  case CommandKind::ToDevice:
    return has(c.target) && hasDevice(c.device) &&
           (c.location.empty() || locationOn(c.location, c.device));
  case CommandKind::FromDevice:
  case CommandKind::Release:
  case CommandKind::DoubleRelease:
    return has(c.target) && hasDevice(c.device);
  case CommandKind::AddNetwork:
  case CommandKind::Shutdown:
  case CommandKind::InjectFault:
    return hasDevice(c.device);
  case CommandKind::Run:
    for (const auto &[ph, t] : c.bindings)
      if (!has(t))
        return false;
    return network(c.target);
  case CommandKind::EvictNetwork:
  case CommandKind::EnsureOutputs:
    return network(c.target);
  case CommandKind::Alloc:
    return hasDevice(c.device) && !model.locations().count(c.target);
  case CommandKind::Free:
    return locationOn(c.target, c.device);
  }
  return false;
}

void GeneratedCommand::checkPreconditions(const Model &model) const {
  RC_PRE(commandFitsModel(command_, model));
}

void GeneratedCommand::apply(Model &model) const { model.apply(command_); }

void GeneratedCommand::run(const Model &, ScenarioBuilder &builder) const {
  builder.commands.push_back(command_);
}

void GeneratedCommand::show(std::ostream &os) const {
  os << printCommand(command_);
}

namespace {

bool resident(const ModelRecord &r) {
  return r.state == ResidencyState::Device ||
         r.state == ResidencyState::Mirrored;
}

/// The state a generation step looks at, gathered once per step.
struct Choices {
  /// "resident" also holds tensors whose record is Lost.
  std::vector<std::string> tensors, owners, views, resident, onDevice, mirrored,
      devices, liveDevices;
  std::vector<std::string> networks, placed, locations;
  std::string freshTensor, freshLocation, freshNetwork;
};

Choices gather(const Model &m) {
  Choices ch;
  for (const auto &[name, t] : m.tensors()) {
    ch.tensors.push_back(name);
    if (!t.empty() && !t.isView)
      ch.owners.push_back(name);
    if (!t.empty() && t.isView)
      ch.views.push_back(name);
    if (!t.empty() && (resident(m.records().at(t.record)) ||
                       m.records().at(t.record).state == ResidencyState::Lost))
      ch.resident.push_back(name);
    if (!t.empty() && m.records().at(t.record).state == ResidencyState::Device)
      ch.onDevice.push_back(name);
    if (!t.empty() &&
        m.records().at(t.record).state == ResidencyState::Mirrored)
      ch.mirrored.push_back(name);
  }
  for (const auto &[name, d] : m.devices()) {
    ch.devices.push_back(name);
    if (!d.shutDown)
      ch.liveDevices.push_back(name);
  }
  for (const auto &[name, d] : m.networkDevices())
    ch.networks.push_back(name);
  for (const auto &[name, d] : m.placement())
    ch.placed.push_back(name);
  for (const auto &[name, l] : m.locations())
    ch.locations.push_back(name);
  for (int i = 0;; ++i)
    if (!m.tensor("t" + std::to_string(i))) {
      ch.freshTensor = "t" + std::to_string(i);
      break;
    }
  for (int i = 0;; ++i)
    if (!m.locations().count("L" + std::to_string(i))) {
      ch.freshLocation = "L" + std::to_string(i);
      break;
    }
  for (int i = 0; i < 3; ++i)
    if (!m.placement().count("n" + std::to_string(i))) {
      ch.freshNetwork = "n" + std::to_string(i);
      break;
    }
  return ch;
}

template <typename T> T pick(const std::vector<T> &v) {
  return *rc::gen::elementOf(v);
}

/// A tensor: often one whose record is resident (deep states are where
/// bugs live), mostly an owner (owners move residency; views observe it).
std::string pickTensor(const Choices &ch) {
  int draw = *rc::gen::inRange(0, 10);
  if (!ch.resident.empty() && draw < 4)
    return pick(ch.resident);
  if (!ch.owners.empty() && draw < 8)
    return pick(ch.owners);
  return pick(ch.tensors);
}

/// The device a tensor's record lives on, or any device.
std::string deviceFor(const Model &m, const Choices &ch,
                      const std::string &tensor) {
  const ModelRecord *r = m.recordOf(tensor);
  if (r && resident(*r) && *rc::gen::inRange(0, 10) < 8)
    return r->device;
  return pick(ch.devices);
}

std::vector<NetworkNode> pickNodes() {
  switch (*rc::gen::inRange(0, 5)) {
  case 0:
    return {{OpKind::Add, {"x", "y"}, "o", 1.0}};
  case 1:
    return {{OpKind::Mul, {"x", "y"}, "o", 1.0},
            {OpKind::Relu, {"o"}, "p", 1.0}};
  case 2:
    return {{OpKind::Scale,
             {"x"},
             "o",
             *rc::gen::elementOf(std::vector<double>{0.5, 2.0, -1.5, 3.0})}};
  case 3:
    return {{OpKind::Copy, {"x"}, "o", 1.0}};
  default:
    return {{OpKind::Add, {"x", "y"}, "o", 1.0},
            {OpKind::Scale, {"o"}, "p", 2.0}};
  }
}

/// Bindings for network \p net: matching types, outputs on whole tensors
/// whose records no other placeholder uses. Empty when impossible.
std::vector<std::pair<std::string, std::string>>
pickBindings(const Model &m, const Command &add) {
  std::vector<std::pair<std::string, std::string>> out;
  Type type{add.elemKind, add.dims};
  Function fn = networkFunction(add);
  std::vector<int> used;
  for (const Placeholder &p : networkPlaceholders(add.nodes, type)) {
    bool isOutput = fn.isOutput(p.name);
    std::vector<std::string> fit;
    for (const auto &[name, t] : m.tensors()) {
      if (t.empty() || t.kind != type.kind || t.dims != type.dims)
        continue;
      const ModelRecord &r = m.records().at(t.record);
      bool whole = t.offsetBytes == 0 && t.bytes() == r.bytes;
      bool taken = std::find(used.begin(), used.end(), t.record) != used.end();
      if (isOutput && (!whole || taken))
        continue;
      if (!isOutput && taken && *rc::gen::inRange(0, 4) != 0)
        continue;
      fit.push_back(name);
    }
    if (fit.empty())
      return {};
    // Inputs are often the interesting kind: a view at an offset into a
    // resident record (offsets a backend must honour) or a tensor resident
    // on another device (which the run must move).
    std::vector<std::string> interesting;
    for (const std::string &name : fit) {
      const ModelTensor *t = m.tensor(name);
      const ModelRecord &r = m.records().at(t->record);
      if (!isOutput && resident(r) &&
          (t->offsetBytes != 0 || r.device != add.device))
        interesting.push_back(name);
    }
    std::string chosen = !interesting.empty() && *rc::gen::inRange(0, 2) == 0
                             ? pick(interesting)
                             : pick(fit);
    out.emplace_back(p.name, chosen);
    used.push_back(m.tensor(chosen)->record);
  }
  // Outputs must not share with inputs chosen after them either.
  for (size_t i = 0; i < out.size(); ++i) {
    if (!fn.isOutput(out[i].first))
      continue;
    for (size_t j = 0; j < out.size(); ++j)
      if (j != i &&
          m.tensor(out[j].second)->record == m.tensor(out[i].second)->record)
        return {};
  }
  return out;
}

/// Command choices ignore rapidcheck's size (which scales inRange towards its
/// lower bound); the size bounds only the number of steps.
rc::Gen<GenCommandPtr> wrap(rc::Gen<Command> gen) {
  return rc::gen::map(rc::gen::resize(rc::kNominalSize, std::move(gen)),
                      [](Command c) -> GenCommandPtr {
                        return std::make_shared<GeneratedCommand>(std::move(c));
                      });
}

rc::Gen<Command> genCommandOfKind(CommandKind kind, const Model &m,
                                  const GeneratorProfile &profile) {
  return rc::gen::exec([kind, m, profile]() {
    Choices ch = gather(m);
    Command c;
    c.kind = kind;
    switch (kind) {
    case CommandKind::Create:
      c.target = ch.freshTensor;
      c.elemKind = pick(profile.elemKinds);
      c.dims = pick(profile.shapes);
      c.pattern = *rc::gen::inRange<uint64_t>(0, 6);
      break;
    case CommandKind::View: {
      c.target = ch.freshTensor;
      c.source = pickTensor(ch);
      // Mostly a source with room for a view of the profile's longest
      // length at a non-zero offset.
      size_t longest = 1;
      for (size_t k : profile.viewLengths)
        longest = std::max(longest, k);
      std::vector<std::string> roomy;
      for (const std::string &name : ch.tensors)
        if (!m.tensor(name)->empty() && m.tensor(name)->numElements() > longest)
          roomy.push_back(name);
      if (!roomy.empty() && *rc::gen::inRange(0, 10) < 7)
        c.source = pick(roomy);
      const ModelTensor *src = m.tensor(c.source);
      size_t n = src->empty() ? 4 : src->numElements();
      int shape = *rc::gen::inRange(0, 10);
      if (shape < 2 && !src->empty()) {
        c.dims = src->dims;
      } else {
        size_t k = *rc::gen::elementOf(profile.viewLengths);
        k = std::min(k, n);
        c.dims = {k};
        c.offset = *rc::gen::inRange<uint64_t>(0, n - k + 1);
        if (shape == 9)
          c.offset = n - k + 1;
      }
      break;
    }
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
      c.target = ch.freshTensor;
      c.source = pickTensor(ch);
      break;
    case CommandKind::MoveAssign:
      c.target = pickTensor(ch);
      c.source = pick(ch.tensors);
      break;
    case CommandKind::SelfMove:
    case CommandKind::Destroy:
    case CommandKind::Read:
      c.target = pickTensor(ch);
      break;
    case CommandKind::Write:
    case CommandKind::Refill:
      c.target = pickTensor(ch);
      c.pattern = *rc::gen::inRange<uint64_t>(1, 10);
      break;
    case CommandKind::ToDevice: {
      // Mirrored records are rare and short-lived: move them often.
      c.target = !ch.mirrored.empty() && *rc::gen::inRange(0, 2) == 0
                     ? pick(ch.mirrored)
                     : pickTensor(ch);
      c.device = pick(ch.devices);
      std::vector<std::string> here;
      for (const auto &[name, l] : m.locations())
        if (l.device == c.device && l.state == ModelLocation::State::Live)
          here.push_back(name);
      if (!here.empty() && *rc::gen::inRange(0, 10) < 6)
        c.location = pick(here);
      break;
    }
    case CommandKind::FromDevice:
      c.target = !ch.onDevice.empty() && *rc::gen::inRange(0, 2) == 0
                     ? pick(ch.onDevice)
                     : pickTensor(ch);
      c.device = deviceFor(m, ch, c.target);
      c.release = *rc::gen::arbitrary<bool>();
      break;
    case CommandKind::Release:
    case CommandKind::DoubleRelease:
      c.target = pickTensor(ch);
      c.device = deviceFor(m, ch, c.target);
      break;
    case CommandKind::AddNetwork:
      c.target = ch.freshNetwork.empty() ? pick(ch.networks) : ch.freshNetwork;
      c.device = pick(ch.devices);
      c.elemKind = pick(profile.elemKinds);
      c.dims = {4};
      c.nodes = pickNodes();
      break;
    case CommandKind::Run: {
      c.target = pick(ch.networks);
      const std::string &dev = m.networkDevices().at(c.target);
      auto it = m.devices().at(dev).networks.find(c.target);
      if (it == m.devices().at(dev).networks.end()) {
        c.bindings = {{"x", pick(ch.tensors)}};
      } else {
        c.bindings = pickBindings(m, it->second);
        RC_PRE(!c.bindings.empty());
      }
      break;
    }
    case CommandKind::EvictNetwork:
    case CommandKind::EnsureOutputs:
      c.target = pick(ch.networks);
      break;
    case CommandKind::Shutdown: {
      std::vector<std::string> holding;
      for (const auto &[id, r] : m.records())
        if (resident(r))
          holding.push_back(r.device);
      c.device = pick(holding);
      break;
    }
    case CommandKind::InjectFault:
      c.device =
          ch.liveDevices.empty() ? pick(ch.devices) : pick(ch.liveDevices);
      c.fault.site =
          *rc::gen::element(FaultSite::Allocation, FaultSite::TransferToDevice,
                            FaultSite::TransferFromDevice, FaultSite::Run);
      c.fault.nth = *rc::gen::inRange(1u, 3u);
      c.fault.code = pick(profile.faultCodes);
      break;
    case CommandKind::Alloc: {
      c.target = ch.freshLocation;
      c.device = pick(ch.devices);
      std::vector<uint64_t> sizes = profile.allocationSizes;
      for (const auto &[name, r] : m.records())
        sizes.push_back(r.bytes);
      c.bytes = pick(sizes);
      break;
    }
    case CommandKind::Free: {
      c.target = pick(ch.locations);
      c.device = m.locations().at(c.target).device;
      break;
    }
    }
    return c;
  });
}

} // namespace

rc::Gen<Scenario> genScenario(const GeneratorProfile &profile,
                              const Capabilities &capabilities) {
  Model initial(profile.devices, capabilities);
  auto makeInitial = [initial] { return initial; };
  auto genFunc = [profile](const Model &m) {
    Choices ch = gather(m);
    std::vector<std::pair<uint32_t, rc::Gen<GenCommandPtr>>> options;
    for (const auto &[kind, weight] : profile.weights) {
      if (weight <= 0)
        continue;
      bool possible = true;
      switch (kind) {
      case CommandKind::Create:
        possible = m.tensors().size() < profile.maxTensors;
        break;
      case CommandKind::View:
      case CommandKind::Clone:
      case CommandKind::MoveConstruct:
        possible =
            !ch.tensors.empty() && m.tensors().size() < profile.maxTensors;
        break;
      case CommandKind::Run:
      case CommandKind::EvictNetwork:
      case CommandKind::EnsureOutputs:
        possible = !ch.networks.empty() && !ch.tensors.empty();
        break;
      case CommandKind::AddNetwork:
        possible = !ch.freshNetwork.empty() || !ch.networks.empty();
        break;
      case CommandKind::Free:
        possible = !ch.locations.empty();
        break;
      case CommandKind::Shutdown: {
        // Shutting down an empty device teaches little: wait for residents.
        possible = false;
        for (const auto &[id, r] : m.records())
          possible = possible || resident(r);
        break;
      }
      case CommandKind::Alloc:
      case CommandKind::InjectFault:
        break;
      default:
        possible = !ch.tensors.empty();
        break;
      }
      if (possible)
        options.emplace_back(uint32_t(weight),
                             wrap(genCommandOfKind(kind, m, profile)));
    }
    if (options.empty())
      options.emplace_back(
          1u, wrap(genCommandOfKind(CommandKind::Create, m, profile)));
    // Weighted choice (rapidcheck's weightedOneOf takes only literal lists);
    // shrinking the draw moves towards the first listed command kind.
    uint32_t total = 0;
    for (const auto &option : options)
      total += option.first;
    return rc::gen::mapcat(
        rc::gen::resize(rc::kNominalSize, rc::gen::inRange<uint32_t>(0, total)),
        [options](uint32_t draw) {
          for (const auto &[weight, gen] : options) {
            if (draw < weight)
              return gen;
            draw -= weight;
          }
          return options.back().second;
        });
  };
  return rc::gen::map(
      rc::state::gen::commands(makeInitial, genFunc),
      [devices = profile.devices](
          const rc::state::Commands<rc::state::Command<Model, ScenarioBuilder>>
              &commands) {
        Scenario s;
        s.devices = devices;
        for (const auto &c : commands)
          s.commands.push_back(
              static_cast<const GeneratedCommand &>(*c).command());
        return s;
      });
}

} // namespace drt::conformance
