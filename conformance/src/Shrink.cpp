//===- Shrink.cpp - Minimal failing scenarios -----------------------------===//
#include "drt/conformance/Shrink.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

namespace drt::conformance {

namespace {

size_t elementsOf(const std::vector<size_t> &dims) {
  size_t n = 1;
  for (size_t d : dims)
    n *= d;
  return n;
}

/// Simpler versions of \p c, simplest first; a create's fill becomes \p
/// smallPattern at most.
std::vector<Command> simplerCommands(const Command &c, uint64_t smallPattern) {
  std::vector<Command> out;
  auto with = [&](auto change) {
    Command s = c;
    change(s);
    // A network's declared order keeps the placeholders its nodes still
    // name (a simpler network names fewer, never new ones).
    if (!s.declared.empty()) {
      std::vector<Placeholder> named =
          networkPlaceholders(s.nodes, Type{s.elemKind, {1}});
      std::erase_if(s.declared, [&](const std::string &name) {
        return std::none_of(
            named.begin(), named.end(),
            [&](const Placeholder &p) { return p.name == name; });
      });
    }
    if (!(s == c))
      out.push_back(std::move(s));
  };
  // A smaller shape of the same kind: one element, then halves, then one
  // dimension.
  auto shrinkDims = [&](bool allowOne) {
    size_t n = elementsOf(c.dims);
    if (c.dims.empty())
      return;
    if (allowOne && n > 1)
      with([](Command &s) { s.dims = {1}; });
    for (size_t m = n / 2; m >= 1 && m < n; m /= 2) {
      with([m](Command &s) { s.dims = {m}; });
      if (m == 1)
        break;
    }
    if (n > 1)
      with([n](Command &s) { s.dims = {n - 1}; });
    if (c.dims.size() > 1)
      with([n](Command &s) { s.dims = {n}; });
  };
  // A callback of the runner's own is the plainer way to wait.
  if (c.sync)
    with([](Command &s) { s.sync = false; });
  // So is issuing a command from the thread that runs the scenario.
  if (c.inCallback)
    with([](Command &s) { s.inCallback = false; });
  switch (c.kind) {
  case CommandKind::Create:
    shrinkDims(true);
    if (c.elemKind != ElemKind::Float32)
      with([](Command &s) { s.elemKind = ElemKind::Float32; });
    // Small exact values, not all zeros, and not the same for every
    // tensor (the n-th created gets fill n; the float patterns repeat
    // every 17): over equal contents a run computes the same bytes
    // whichever buffers it reads, so such a shrink could keep a mixed-up
    // buffer (a race, runs out of order) only through its rarer symptoms,
    // or lose it.
    if (c.pattern > smallPattern)
      with([smallPattern](Command &s) { s.pattern = smallPattern; });
    if (!c.device.empty())
      with([](Command &s) { s.device.clear(); });
    break;
  case CommandKind::View:
    if (c.offset != 0)
      with([](Command &s) { s.offset = 0; });
    if (c.offset > 1)
      with([&](Command &s) { s.offset = c.offset / 2; });
    shrinkDims(true);
    break;
  case CommandKind::Write:
  case CommandKind::Refill:
    if (c.pattern > 1)
      with([](Command &s) { s.pattern = 1; });
    break;
  case CommandKind::ToDevice:
    if (!c.location.empty())
      with([](Command &s) { s.location.clear(); });
    break;
  case CommandKind::FromDevice:
    if (!c.release)
      with([](Command &s) { s.release = true; });
    break;
  case CommandKind::DoubleRelease:
    with([](Command &s) { s.kind = CommandKind::Release; });
    break;
  case CommandKind::AddNetwork: {
    // Placeholders declared in order of first use.
    if (!c.declared.empty())
      with([](Command &s) { s.declared.clear(); });
    // Fewer nodes: drop one whose output no later node reads.
    for (size_t i = c.nodes.size(); i-- > 0 && c.nodes.size() > 1;) {
      bool read = false;
      for (size_t j = i + 1; j < c.nodes.size(); ++j)
        for (const std::string &in : c.nodes[j].inputs)
          read = read || in == c.nodes[i].output;
      if (!read)
        with([i](Command &s) { s.nodes.erase(s.nodes.begin() + i); });
    }
    // Fewer nodes: bypass some, their readers reading their first input
    // instead; halves of a long network first, then quarters and so on
    // down to one node, so that a network of 30 nodes does not take 30
    // rounds of the shrinker.
    auto bypass = [](Command &s, size_t begin, size_t end) {
      for (size_t i = end; i-- > begin;) {
        std::string output = s.nodes[i].output;
        std::string input = s.nodes[i].inputs.front();
        s.nodes.erase(s.nodes.begin() + i);
        for (NetworkNode &n : s.nodes)
          for (std::string &in : n.inputs)
            if (in == output)
              in = input;
      }
    };
    for (size_t chunk = c.nodes.size() / 2; chunk >= 1; chunk /= 2)
      for (size_t i = 0; i + chunk <= c.nodes.size() && c.nodes.size() > 1;
           i += chunk)
        with([&](Command &s) { bypass(s, i, i + chunk); });
    // Fewer placeholders: an input other than the first one the nodes
    // read reads that one instead.
    auto produced = [&](size_t i, const std::string &name) {
      for (size_t j = 0; j < i; ++j)
        if (c.nodes[j].output == name)
          return true;
      return false;
    };
    std::optional<std::string> first;
    for (size_t i = 0; i < c.nodes.size() && !first; ++i)
      for (const std::string &in : c.nodes[i].inputs)
        if (!first && !produced(i, in))
          first = in;
    std::vector<std::string> others;
    for (size_t i = 0; i < c.nodes.size(); ++i)
      for (size_t a = 0; a < c.nodes[i].inputs.size(); ++a) {
        const std::string &in = c.nodes[i].inputs[a];
        if (produced(i, in) || in == *first)
          continue;
        with([i, a, to = *first](Command &s) { s.nodes[i].inputs[a] = to; });
        if (std::find(others.begin(), others.end(), in) == others.end())
          others.push_back(in);
      }
    // Or the first reads another one: which input a failure needs is not
    // known, so either may stay.
    for (const std::string &other : others)
      with([&](Command &s) {
        for (size_t i = 0; i < s.nodes.size(); ++i)
          for (std::string &in : s.nodes[i].inputs)
            if (in == *first && !produced(i, in))
              in = other;
      });
    for (size_t i = 0; i < c.nodes.size(); ++i)
      if (c.nodes[i].op == OpKind::Scale && c.nodes[i].factor != 2.0)
        with([i](Command &s) { s.nodes[i].factor = 2.0; });
    shrinkDims(true);
    if (c.elemKind != ElemKind::Float32)
      with([](Command &s) { s.elemKind = ElemKind::Float32; });
    break;
  }
  case CommandKind::Run:
    // One binding fewer: a binding of a placeholder that removing nodes
    // left the network without still names its tensor, which then cannot
    // be removed.
    for (size_t i = 0; i < c.bindings.size(); ++i)
      with([i](Command &s) { s.bindings.erase(s.bindings.begin() + i); });
    break;
  case CommandKind::InjectFault:
    if (c.fault.nth > 1)
      with([](Command &s) { s.fault.nth = 1; });
    if (c.fault.code != ErrorCode::DeviceError)
      with([](Command &s) { s.fault.code = ErrorCode::DeviceError; });
    break;
  case CommandKind::Alloc:
    if (c.bytes > 1) {
      with([&](Command &s) { s.bytes = c.bytes / 2; });
      with([&](Command &s) { s.bytes = c.bytes - 1; });
    }
    break;
  default:
    break;
  }
  return out;
}

/// True when a command of \p kind names a tensor in its target field.
bool targetsTensor(CommandKind kind) {
  switch (kind) {
  case CommandKind::AddNetwork:
  case CommandKind::Run:
  case CommandKind::EvictNetwork:
  case CommandKind::EnsureOutputs:
  case CommandKind::Shutdown:
  case CommandKind::InjectFault:
  case CommandKind::Alloc:
  case CommandKind::Free:
    return false;
  default:
    return true;
  }
}

/// \p s without command \p i, the tensor named \p from called \p to in the
/// commands after it (up to a create that makes another \p from).
Scenario withoutCommandRenaming(const Scenario &s, size_t i,
                                const std::string &from,
                                const std::string &to) {
  Scenario out = s;
  out.commands.erase(out.commands.begin() + i);
  auto rename = [&](std::string &name) {
    if (name == from)
      name = to;
  };
  for (size_t j = i; j < out.commands.size(); ++j) {
    Command &c = out.commands[j];
    if (c.kind == CommandKind::Create && c.target == from)
      break;
    if (targetsTensor(c.kind))
      rename(c.target);
    rename(c.source);
    for (auto &binding : c.bindings)
      rename(binding.second);
  }
  return out;
}

/// \p s without the move at \p i, its target called by its source's name
/// from there on: a move that only renames a tensor goes, and with it often
/// the create of the tensor it was moved onto. Nothing when command \p i is
/// not a move.
std::optional<Scenario> withoutMove(const Scenario &s, size_t i) {
  const Command &move = s.commands[i];
  if (move.kind != CommandKind::MoveConstruct &&
      move.kind != CommandKind::MoveAssign)
    return std::nullopt;
  return withoutCommandRenaming(s, i, move.target, move.source);
}

/// \p s without the create at \p i, the tensor it makes called by the
/// name of \p other from there on: two tensors of one type that need not be
/// distinct become one (a run's input need not be a tensor of its own).
/// Nothing when command \p i is not a create.
std::optional<Scenario> mergedInto(const Scenario &s, size_t i,
                                   const std::string &other) {
  const Command &create = s.commands[i];
  if (create.kind != CommandKind::Create)
    return std::nullopt;
  return withoutCommandRenaming(s, i, create.target, other);
}

/// The tensors created before command \p i with the type (and host memory)
/// of the one command \p i creates, nearest first.
std::vector<std::string> sameTypeBefore(const Scenario &s, size_t i) {
  std::vector<std::string> out;
  const Command &create = s.commands[i];
  if (create.kind != CommandKind::Create)
    return out;
  for (size_t j = i; j-- > 0;) {
    const Command &c = s.commands[j];
    if (c.kind == CommandKind::Create && c.target != create.target &&
        c.elemKind == create.elemKind && c.dims == create.dims &&
        c.device == create.device &&
        std::find(out.begin(), out.end(), c.target) == out.end())
      out.push_back(c.target);
  }
  return out;
}

/// The command that last made the source of the view at \p i (a create,
/// a view, a move, ...), or nullptr when command \p i is no view or nothing
/// before it made that name.
const Command *sourceOfView(const Scenario &s, size_t i) {
  const Command &view = s.commands[i];
  if (view.kind != CommandKind::View)
    return nullptr;
  // Commands that only act on the name (a transfer, a write) made nothing.
  auto makes = [](CommandKind kind) {
    return kind == CommandKind::Create || kind == CommandKind::View ||
           kind == CommandKind::Clone || kind == CommandKind::MoveConstruct ||
           kind == CommandKind::MoveAssign;
  };
  for (size_t j = i; j-- > 0;)
    if (s.commands[j].target == view.source && makes(s.commands[j].kind))
      return &s.commands[j];
  return nullptr;
}

/// \p s with the view made at \p i taken of the tensor its source views,
/// at the sum of the two offsets: a view of a view becomes a view of the
/// base, so that the view between can go. Nothing when command \p i is no
/// view, or its source was last made by no view.
std::optional<Scenario> viewOfBase(const Scenario &s, size_t i) {
  const Command *made = sourceOfView(s, i);
  if (!made || made->kind != CommandKind::View)
    return std::nullopt;
  Scenario out = s;
  out.commands[i].source = made->source;
  out.commands[i].offset += made->offset;
  return out;
}

/// \p s with the view made at \p i made a tensor of its own instead: a
/// create of the view's type, filled as its base was. A failure that needs
/// the contents, not the sharing, then keeps no base tensor. Nothing when
/// command \p i is no view, or its source was last made by no create.
std::optional<Scenario> viewAsTensor(const Scenario &s, size_t i) {
  const Command *made = sourceOfView(s, i);
  if (!made || made->kind != CommandKind::Create)
    return std::nullopt;
  Scenario out = s;
  Command &create = out.commands[i];
  create.kind = CommandKind::Create;
  create.source.clear();
  create.offset = 0;
  create.elemKind = made->elemKind;
  create.pattern = made->pattern;
  create.device = made->device;
  return out;
}

/// \p s without the view made at \p i, its name standing for its source
/// from there on: a view of the whole of its source (offset 0, the same
/// shape) reads and writes what the source does. Nothing when command \p i
/// is no such view.
std::optional<Scenario> viewAsItsSource(const Scenario &s, size_t i) {
  const Command *made = sourceOfView(s, i);
  const Command &view = s.commands[i];
  if (!made || view.offset != 0 || made->dims != view.dims ||
      (made->kind != CommandKind::Create && made->kind != CommandKind::View))
    return std::nullopt;
  return withoutCommandRenaming(s, i, view.target, view.source);
}

/// The network command that the run at \p i runs (the last made before it
/// of that name), or nullptr.
const Command *networkOfRun(const Scenario &s, size_t i) {
  for (size_t j = i; j-- > 0;)
    if (s.commands[j].kind == CommandKind::AddNetwork &&
        s.commands[j].target == s.commands[i].target)
      return &s.commands[j];
  return nullptr;
}

/// The placeholders of network command \p n that it reads, or that it
/// writes, in order of first use.
std::vector<std::string> placeholdersOf(const Command &n, bool written) {
  std::vector<std::string> out;
  for (const Placeholder &p :
       networkPlaceholders(n.nodes, Type{n.elemKind, {1}}))
    if (networkWrites(n.nodes, p.name) == written)
      out.push_back(p.name);
  return out;
}

/// \p s with the run at \p i running network \p other instead of its own,
/// its tensors bound in order (the k-th input placeholder's tensor to the
/// other's k-th input, outputs likewise): when a failure needs two runs,
/// not two functions, one network can go. Nothing when command \p i is no
/// run, or \p other is its own network or of another device, kind or shape.
std::optional<Scenario> runOfAnotherNetwork(const Scenario &s, size_t i,
                                            const Command &other) {
  const Command &run = s.commands[i];
  if (run.kind != CommandKind::Run)
    return std::nullopt;
  const Command *own = networkOfRun(s, i);
  if (!own || own->target == other.target || own->device != other.device ||
      own->elemKind != other.elemKind || own->dims != other.dims)
    return std::nullopt;
  Scenario out = s;
  Command &changed = out.commands[i];
  changed.target = other.target;
  changed.bindings.clear();
  for (bool written : {false, true}) {
    std::vector<std::string> from = placeholdersOf(*own, written);
    std::vector<std::string> to = placeholdersOf(other, written);
    for (size_t k = 0; k < from.size() && k < to.size(); ++k)
      for (const auto &[placeholder, tensor] : run.bindings)
        if (placeholder == from[k])
          changed.bindings.emplace_back(to[k], tensor);
  }
  return out;
}

/// \p s with every create, view and network of shape \p from made of
/// shape \p to, at once: a run binds tensors of its network's shape, so
/// they shrink together or not at all. A view whose elements would then
/// end past its source's is moved back to end where the source does.
Scenario withShapeEverywhere(const Scenario &s, const std::vector<size_t> &from,
                             const std::vector<size_t> &to) {
  Scenario out = s;
  std::map<std::string, size_t> elements;
  for (Command &c : out.commands) {
    switch (c.kind) {
    case CommandKind::Create:
    case CommandKind::AddNetwork:
      if (c.dims == from)
        c.dims = to;
      if (c.kind == CommandKind::Create)
        elements[c.target] = elementsOf(c.dims);
      break;
    case CommandKind::View: {
      if (c.dims == from)
        c.dims = to;
      size_t n = elementsOf(c.dims);
      if (auto source = elements.find(c.source); source != elements.end() &&
                                                 source->second >= n &&
                                                 c.offset + n > source->second)
        c.offset = source->second - n;
      elements[c.target] = n;
      break;
    }
    case CommandKind::Clone:
    case CommandKind::MoveConstruct:
    case CommandKind::MoveAssign:
      if (auto source = elements.find(c.source); source != elements.end())
        elements[c.target] = source->second;
      break;
    default:
      break;
    }
  }
  return out;
}

/// The shapes the creates, views and networks of \p s have, each with the
/// smaller shapes to try for it, simplest first: one element, the smaller
/// shapes other commands already have (so that two networks of different
/// shapes can become one shape, and a view of a whole tensor its
/// tensor), halves, and the flat shape of as many elements.
std::vector<std::pair<std::vector<size_t>, std::vector<std::vector<size_t>>>>
smallerShapes(const Scenario &s) {
  std::vector<std::vector<size_t>> present;
  for (const Command &c : s.commands)
    if ((c.kind == CommandKind::Create || c.kind == CommandKind::View ||
         c.kind == CommandKind::AddNetwork) &&
        !c.dims.empty() &&
        std::find(present.begin(), present.end(), c.dims) == present.end())
      present.push_back(c.dims);
  std::vector<std::pair<std::vector<size_t>, std::vector<std::vector<size_t>>>>
      out;
  for (const std::vector<size_t> &dims : present) {
    size_t n = elementsOf(dims);
    std::vector<std::vector<size_t>> smaller;
    auto add = [&](std::vector<size_t> to) {
      if (to != dims && elementsOf(to) <= n &&
          std::find(smaller.begin(), smaller.end(), to) == smaller.end())
        smaller.push_back(std::move(to));
    };
    add({1});
    std::vector<std::vector<size_t>> others;
    for (const std::vector<size_t> &other : present)
      if (elementsOf(other) < n)
        others.push_back(other);
    std::stable_sort(others.begin(), others.end(),
                     [](const auto &a, const auto &b) {
                       return elementsOf(a) < elementsOf(b);
                     });
    for (const std::vector<size_t> &other : others)
      add(other);
    for (size_t m = n / 2; m > 1; m /= 2)
      add({m});
    if (dims.size() > 1)
      add({n});
    if (!smaller.empty())
      out.emplace_back(dims, std::move(smaller));
  }
  return out;
}

/// \p s with every create and network of element kind \p from made f32, at
/// once (a run binds tensors of its network's kind).
Scenario withFloat32Everywhere(const Scenario &s, ElemKind from) {
  Scenario out = s;
  for (Command &c : out.commands)
    if ((c.kind == CommandKind::Create || c.kind == CommandKind::AddNetwork) &&
        c.elemKind == from)
      c.elemKind = ElemKind::Float32;
  return out;
}

/// The element kinds other than f32 that the creates and networks of \p s
/// have.
std::vector<ElemKind> kindsOtherThanFloat32(const Scenario &s) {
  std::vector<ElemKind> out;
  for (const Command &c : s.commands)
    if ((c.kind == CommandKind::Create || c.kind == CommandKind::AddNetwork) &&
        c.elemKind != ElemKind::Float32 &&
        std::find(out.begin(), out.end(), c.elemKind) == out.end())
      out.push_back(c.elemKind);
  return out;
}

/// Simpler device lists: fewer devices (when none of the commands names
/// the one dropped), no budget, fewer parameters.
std::vector<std::vector<DeviceSpec>> simplerDevices(const Scenario &s) {
  std::vector<std::vector<DeviceSpec>> out;
  std::set<std::string> used;
  for (const Command &c : s.commands)
    if (!c.device.empty())
      used.insert(c.device);
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceSpec &d = s.devices[i];
    if (!used.count(d.name) && s.devices.size() > 1) {
      auto fewer = s.devices;
      fewer.erase(fewer.begin() + i);
      out.push_back(std::move(fewer));
    }
    if (d.budget) {
      auto plain = s.devices;
      plain[i].budget = 0;
      out.push_back(plain);
      if (d.budget > 16) {
        plain[i].budget = d.budget / 2;
        out.push_back(std::move(plain));
      }
    }
    for (const auto &[key, value] : d.parameters) {
      auto plain = s.devices;
      plain[i].parameters.erase(key);
      out.push_back(std::move(plain));
    }
    if (d.copyToHost) {
      auto plain = s.devices;
      plain[i].copyToHost = false;
      out.push_back(std::move(plain));
    }
  }
  return out;
}

} // namespace

unsigned runsUntilItFails(const std::function<bool()> &fails) {
  auto until = std::chrono::steady_clock::now() + SearchSeconds;
  for (unsigned run = 1; run <= SearchRuns; ++run) {
    if (fails())
      return run;
    if (std::chrono::steady_clock::now() > until)
      break;
  }
  return 0;
}

unsigned candidateRunsFor(unsigned runsToFail) {
  return std::clamp(3 * runsToFail, unsigned(TimingShrinkRuns),
                    MaxCandidateRuns);
}

ShrinkOptions shrinkLimitsFor(unsigned candidateRuns) {
  ShrinkOptions limits;
  if (candidateRuns > unsigned(TimingShrinkRuns))
    limits.maxSeconds = 120;
  return limits;
}

unsigned replayRunsFor(unsigned runsToFail) {
  return std::clamp(10 * runsToFail, unsigned(TimingReplayRuns), MaxReplayRuns);
}

bool timingDependent(const Scenario &s) {
  return std::any_of(s.commands.begin(), s.commands.end(),
                     [](const Command &c) { return c.noWait || c.branch; });
}

ShrinkResult
shrinkScenario(const Scenario &failing,
               const std::function<Scenario(const Scenario &)> &normalize,
               const std::function<bool(const Scenario &)> &fails,
               const ShrinkOptions &options) {
  using Clock = std::chrono::steady_clock;
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.maxSeconds));
  ShrinkResult result;
  result.scenario = failing;
  auto exhausted = [&] {
    return result.attempts >= options.maxAttempts || Clock::now() >= deadline;
  };
  // Runs a candidate; keeps it when it still fails.
  auto attempt = [&](const Scenario &candidate) {
    Scenario s = normalize(candidate);
    if (s == result.scenario)
      return false;
    ++result.attempts;
    if (!fails(s))
      return false;
    ++result.accepted;
    result.scenario = std::move(s);
    return true;
  };

  bool progress = true;
  while (progress && !exhausted()) {
    progress = false;
    // Remove runs of commands, long runs first, from the end (later
    // commands depend on earlier ones, so removing them first keeps more
    // candidates well formed).
    for (size_t chunk =
             std::max<size_t>(result.scenario.commands.size() / 2, 1);
         chunk >= 1 && !exhausted(); chunk /= 2) {
      for (size_t end = result.scenario.commands.size();
           end > 0 && !exhausted();) {
        size_t begin = end >= chunk ? end - chunk : 0;
        Scenario candidate = result.scenario;
        candidate.commands.erase(candidate.commands.begin() + begin,
                                 candidate.commands.begin() + end);
        if (attempt(candidate)) {
          progress = true;
          end = std::min(begin, result.scenario.commands.size());
        } else {
          end = begin;
        }
      }
      if (chunk == 1)
        break;
    }
    // A planned fault moved to just before a later command and made to
    // strike the first operation at its site: the commands between that it
    // counted can then go (a fault that strikes the third upload keeps the
    // two before it otherwise). Latest positions first.
    for (size_t i = 0; i < result.scenario.commands.size() && !exhausted();
         ++i) {
      if (result.scenario.commands[i].kind != CommandKind::InjectFault)
        continue;
      for (size_t j = result.scenario.commands.size();
           j > i + 2 && !exhausted(); --j) {
        Scenario candidate = result.scenario;
        Command fault = candidate.commands[i];
        fault.fault.nth = 1;
        candidate.commands.erase(candidate.commands.begin() + i);
        candidate.commands.insert(candidate.commands.begin() + (j - 2),
                                  std::move(fault));
        if (attempt(candidate)) {
          progress = true;
          break;
        }
      }
    }
    // Shapes shrink together: every tensor, view and network of one shape
    // at once, until no smaller shape fails (a run binds tensors of its
    // network's shape, so no one command can change shape alone).
    for (bool shrunk = true; shrunk && !exhausted();) {
      shrunk = false;
      for (const auto &[dims, smaller] : smallerShapes(result.scenario)) {
        for (const std::vector<size_t> &to : smaller) {
          if (exhausted())
            break;
          if (attempt(withShapeEverywhere(result.scenario, dims, to))) {
            progress = shrunk = true;
            break;
          }
        }
        if (shrunk)
          break;
      }
    }
    // So do element kinds, towards f32.
    for (ElemKind kind : kindsOtherThanFloat32(result.scenario)) {
      if (exhausted())
        break;
      if (attempt(withFloat32Everywhere(result.scenario, kind)))
        progress = true;
    }
    // Simplify each remaining command, then the devices.
    for (size_t i = 0; i < result.scenario.commands.size() && !exhausted();
         ++i) {
      if (std::optional<Scenario> renamed = withoutMove(result.scenario, i))
        if (attempt(*renamed)) {
          progress = true;
          continue;
        }
      if (std::optional<Scenario> same = viewAsItsSource(result.scenario, i))
        if (attempt(*same)) {
          progress = true;
          continue;
        }
      if (std::optional<Scenario> flat = viewOfBase(result.scenario, i))
        if (attempt(*flat)) {
          progress = true;
          continue;
        }
      if (std::optional<Scenario> own = viewAsTensor(result.scenario, i))
        if (attempt(*own)) {
          progress = true;
          continue;
        }
      bool rebound = false;
      for (size_t j = 0; j < i && !exhausted() && !rebound; ++j)
        if (result.scenario.commands[j].kind == CommandKind::AddNetwork)
          if (std::optional<Scenario> one = runOfAnotherNetwork(
                  result.scenario, i, result.scenario.commands[j]))
            rebound = attempt(*one);
      if (rebound) {
        progress = true;
        continue;
      }
      bool merged = false;
      for (const std::string &other : sameTypeBefore(result.scenario, i)) {
        if (exhausted())
          break;
        if (std::optional<Scenario> fewer =
                mergedInto(result.scenario, i, other);
            fewer && attempt(*fewer)) {
          merged = true;
          break;
        }
      }
      if (merged) {
        progress = true;
        continue;
      }
      // The n-th tensor created gets fill n at most: small, and distinct.
      uint64_t ordinal = 1;
      for (size_t j = 0; j < i; ++j)
        ordinal += result.scenario.commands[j].kind == CommandKind::Create;
      // Until no simpler version of it fails: a network loses its nodes
      // in one pass, not one a pass.
      for (bool simplified = true;
           simplified && !exhausted() && i < result.scenario.commands.size();) {
        simplified = false;
        for (const Command &simpler :
             simplerCommands(result.scenario.commands[i], ordinal)) {
          if (exhausted() || i >= result.scenario.commands.size())
            break;
          Scenario candidate = result.scenario;
          candidate.commands[i] = simpler;
          if (attempt(candidate)) {
            progress = simplified = true;
            break;
          }
        }
      }
    }
    for (const auto &devices : simplerDevices(result.scenario)) {
      if (exhausted())
        break;
      Scenario candidate = result.scenario;
      candidate.devices = devices;
      if (attempt(candidate)) {
        progress = true;
        break;
      }
    }
  }
  return result;
}

} // namespace drt::conformance
