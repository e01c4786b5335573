//===- FuzzInput.cpp - Fuzzer inputs as scenarios -------------------------===//
#include "drt/fuzz/FuzzInput.h"

#include "drt/BackendRegistry.h"
#include "drt/conformance/ChoiceSource.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Generators.h"
#include "drt/conformance/InputSpace.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/Properties.h"
#include "drt/conformance/ScenarioText.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

namespace drt::fuzz {

using namespace drt::conformance;

std::string_view targetName(Target target) {
  switch (target) {
  case Target::Residency:
    return "residency";
  case Target::Differential:
    return "differential";
  case Target::ScenarioText:
    return "scenario-text";
  }
  return "?";
}

std::optional<Target> parseTarget(std::string_view name) {
  for (Target t :
       {Target::Residency, Target::Differential, Target::ScenarioText})
    if (targetName(t) == name)
      return t;
  return std::nullopt;
}

FuzzSetup setupFromEnvironment(Target target) {
  FuzzSetup setup;
  if (target == Target::Differential) {
    setup.backend = "opencl";
    setup.against = "fake";
  }
  if (const char *b = std::getenv("DRT_FUZZ_BACKEND"); b && *b)
    setup.backend = b;
  if (const char *a = std::getenv("DRT_FUZZ_AGAINST"))
    setup.against = a;
  auto number = [](const char *text) -> uint64_t {
    char *end = nullptr;
    unsigned long long v = std::strtoull(text, &end, 10);
    return *end == '\0' ? uint64_t(v) : 0;
  };
  if (const char *n = std::getenv("DRT_FUZZ_MAX_COMMANDS"); n && *n)
    setup.maxCommands = size_t(number(n));
  if (const char *n = std::getenv("DRT_FUZZ_MAX_LIVE_BYTES"); n && *n)
    setup.maxLiveBytes = number(n);
  if (const char *n = std::getenv("DRT_FUZZ_MAX_LARGE_LIVE_BYTES"); n && *n)
    setup.maxLargeLiveBytes = number(n);
  const char *p = std::getenv("DRT_FUZZ_DEVICE_PARAMS");
  if (!p) {
    // Simulated delays off on every backend the inputs may create devices
    // of that has them: the one under test (a mutant:NAME backend reads
    // only keys qualified by its own name), its partner, and the fake
    // device of families with a reference device.
    setup.deviceParameters.clear();
    for (const std::string &name :
         {setup.backend, setup.against, std::string("fake")})
      if (const BackendInfo *info = BackendRegistry::instance().find(name))
        for (const BackendParameter &parameter : info->parameters)
          if (parameter.name == "max-delay-us")
            setup.deviceParameters[name + ":max-delay-us"] = "0";
  } else {
    setup.deviceParameters.clear();
    setup.delayedInputsOneIn = 0;
    std::string_view text = p;
    while (!text.empty()) {
      size_t comma = text.find(',');
      std::string_view item = text.substr(0, comma);
      text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
      size_t eq = item.find('=');
      if (eq == 0 || eq == std::string_view::npos) {
        setup.environmentProblem =
            "DRT_FUZZ_DEVICE_PARAMS: '" + std::string(item) +
            "' is not KEY=VALUE (KEY may be BACKEND:NAME)";
        break;
      }
      setup.deviceParameters[std::string(item.substr(0, eq))] =
          std::string(item.substr(eq + 1));
    }
  }
  return setup;
}

std::string setupProblem(const FuzzSetup &setup) {
  if (!setup.environmentProblem.empty())
    return setup.environmentProblem;
  for (const std::string *b : {&setup.backend, &setup.against}) {
    if (b->empty() && b == &setup.against)
      continue;
    if (!BackendRegistry::instance().find(*b)) {
      std::string known;
      for (const BackendInfo &info : BackendRegistry::instance().list())
        known += (known.empty() ? "" : ", ") + info.name;
      return "unknown backend '" + *b + "' (registered: " + known + ")";
    }
  }
  if (setup.maxCommands == 0)
    return "DRT_FUZZ_MAX_COMMANDS must be a positive number";
  if (setup.maxLiveBytes == 0)
    return "DRT_FUZZ_MAX_LIVE_BYTES must be a positive number";
  if (setup.maxLargeLiveBytes == 0)
    return "DRT_FUZZ_MAX_LARGE_LIVE_BYTES must be a positive number";
  return "";
}

uint64_t generatorNameHash(std::string_view family,
                           std::string_view configuration) {
  return fnv1a(configuration, fnv1a("\n", fnv1a(family)));
}

size_t slotOwner(std::span<const uint64_t> nameHashes, uint64_t slot) {
  size_t owner = 0;
  uint64_t best = 0;
  for (size_t i = 0; i < nameHashes.size(); ++i)
    if (uint64_t score = mix64(nameHashes[i] ^ mix64(slot + 1));
        score >= best) {
      best = score;
      owner = i;
    }
  return owner;
}

std::string DecodedInput::describe() const {
  if (form == Form::Text)
    return "scenario text";
  return "choices (family '" + family + "', configuration " + configuration +
         ")";
}

namespace {

/// The generator of one property family in one configuration of the backend
/// under test, as a setup decodes with it.
struct FamilyGenerator {
  std::string family;
  /// The configuration's parameters, set on every device the scenario
  /// creates on the backend under test.
  ParameterMap parameters;
  ScenarioGenerator generator;
};

/// A setup's generators, and the hashes of their names (slotOwner) in the
/// same order.
struct SetupGenerators {
  std::vector<FamilyGenerator> generators;
  std::vector<uint64_t> nameHashes;
};

/// The generators of every (family, configuration) pair that runs on \p
/// setup's backends, as a conformance run sweeps them: the configurations
/// the backend declares worth testing, a family only where the
/// configuration's capabilities allow it (a differential partner is held to
/// its own, whatever they are). Built
/// once per setup (a profile costs more to build than a short input costs
/// to decode), their live bytes bounded by the setup.
const SetupGenerators &generatorsFor(const FuzzSetup &setup) {
  using Key = std::tuple<std::string, std::string, uint64_t, uint64_t>;
  static std::mutex mutex;
  static std::map<Key, SetupGenerators> cache;
  std::lock_guard<std::mutex> lock(mutex);
  Key key{setup.backend, setup.against, setup.maxLiveBytes,
          setup.maxLargeLiveBytes};
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  BackendRegistry &registry = BackendRegistry::instance();
  SetupGenerators out;
  auto configurations = registry.configurationsToTest(setup.backend);
  if (!configurations) {
    (void)configurations.takeError();
    configurations = std::vector<ParameterMap>{{}};
  }
  for (const ParameterMap &configuration : *configurations) {
    auto caps = registry.capabilitiesFor(setup.backend, configuration);
    if (!caps) {
      (void)caps.takeError();
      continue;
    }
    for (const PropertyFamily &family : propertyFamilies()) {
      if (!family.skipReason(*caps).empty())
        continue;
      GeneratorProfile profile = family.profile();
      profile.space.maxLiveBytes =
          std::min(profile.space.maxLiveBytes, family.aboutLargeTensors
                                                   ? setup.maxLargeLiveBytes
                                                   : setup.maxLiveBytes);
      out.generators.push_back({family.name, configuration,
                                ScenarioGenerator(std::move(profile), *caps)});
      out.nameHashes.push_back(
          generatorNameHash(family.name, configurationName(configuration)));
    }
  }
  return cache.emplace(key, std::move(out)).first->second;
}

/// The parameter names a text input may set on its devices: those the
/// backend's test configurations set, and the seed of its randomness, so
/// that a text input cannot configure what the sweep never would.
std::set<std::string> testedParameters(const std::string &backend) {
  std::set<std::string> names = {"seed"};
  auto configurations =
      BackendRegistry::instance().configurationsToTest(backend);
  if (!configurations) {
    (void)configurations.takeError();
    return names;
  }
  for (const ParameterMap &configuration : *configurations)
    for (const auto &[name, value] : configuration)
      names.insert(name);
  return names;
}

/// Bytes of \p dims elements of \p kind, or nullopt when the product
/// overflows.
std::optional<uint64_t> bytesOf(ElemKind kind,
                                const std::vector<size_t> &dims) {
  uint64_t bytes = elemSize(kind);
  for (size_t d : dims)
    if (__builtin_mul_overflow(bytes, uint64_t(d), &bytes))
      return std::nullopt;
  return bytes;
}

const InputSpace &inputSpace() {
  static const InputSpace space = makeInputSpace();
  return space;
}

/// Why the commands of a parsed scenario leave the input space the
/// generators draw from (so that a text input cannot ask for unbounded time
/// or memory), or "". Tensors and raw allocations are bounded by what they
/// keep live (tooMuchLive), so that a huge size the backend must refuse
/// (a budget miss, a size past the contract's limit) stays a valid input;
/// networks, whose runs allocate their outputs, by the largest size class.
std::string outsideInputSpace(const Scenario &s, const FuzzSetup &setup) {
  const uint64_t largest = inputSpace().sizeClasses.back().maxBytes;
  if (s.commands.size() > setup.maxCommands)
    return "more than " + std::to_string(setup.maxCommands) + " commands";
  if (s.devices.size() > 4)
    return "more than 4 devices";
  std::set<std::string> allowed = testedParameters(setup.backend);
  for (const DeviceSpec &d : s.devices)
    for (const auto &[key, value] : d.parameters) {
      // "backend:key" sets a parameter of that backend only; another
      // backend's are ignored here.
      size_t colon = key.rfind(':');
      std::string name = key.substr(colon == std::string::npos ? 0 : colon + 1);
      bool ours = colon == std::string::npos ||
                  key.compare(0, colon, setup.backend) == 0;
      if (ours && !allowed.count(name))
        return "device parameter '" + key +
               "' (not one the backend's test configurations set)";
    }
  for (const Command &c : s.commands) {
    if (c.kind != CommandKind::AddNetwork)
      continue;
    std::optional<uint64_t> bytes = bytesOf(c.elemKind, c.dims);
    if (!bytes || *bytes > largest)
      return "'" + printCommand(c) + "' is larger than the largest size class";
  }
  return "";
}

/// Why well formed scenario \p s keeps more bytes live at once than the
/// input space allows (records and raw locations, as the generators count
/// them), or "".
std::string tooMuchLive(const Scenario &s, const FuzzSetup &setup) {
  uint64_t most = std::min(inputSpace().maxLiveBytes, setup.maxLiveBytes);
  Model model(
      s.devices,
      [&](const DeviceSpec &spec) {
        return probedDeviceTraits(setup.backend, spec);
      },
      /*trackContents=*/false);
  for (const Command &c : s.commands) {
    model.apply(c);
    uint64_t live = 0;
    for (const auto &[id, r] : model.records())
      live += r.bytes;
    for (const std::string &name : model.activeLocations())
      live += model.locations().at(name).bytes;
    if (live > most)
      return "'" + printCommand(c) + "' keeps more than " +
             std::to_string(most) + " bytes live";
  }
  return "";
}

/// The simulated delays of a delayed input (FuzzSetup::delayedInputsOneIn):
/// long enough for a run to still be queued when the next command comes,
/// a quarter of the fake device's default so that such inputs cost little.
constexpr unsigned DelayedInputMaxDelayUs = 50;

/// \p scenario with \p setup's device parameters set on every device, with
/// delays of up to DelayedInputMaxDelayUs where they turn delays off when
/// \p keepDelays.
Scenario withDeviceParameters(Scenario scenario, const FuzzSetup &setup,
                              bool keepDelays = false) {
  for (DeviceSpec &d : scenario.devices)
    for (const auto &[key, value] : setup.deviceParameters)
      d.parameters[key] =
          keepDelays && key.ends_with("max-delay-us") && value == "0"
              ? std::to_string(DelayedInputMaxDelayUs)
              : value;
  return scenario;
}

std::variant<DecodedInput, Rejection> decodeText(std::string_view text,
                                                 const FuzzSetup &setup) {
  ParseResult parsed = parseScenario(text);
  if (const auto *e = std::get_if<ParseError>(&parsed))
    return Rejection{"scenario text: " + e->toString()};
  const Scenario &scenario = std::get<Scenario>(parsed);
  std::string why = outsideInputSpace(scenario, setup);
  DecodedInput out;
  out.form = DecodedInput::Form::Text;
  if (why.empty()) {
    out.scenario = wellFormedScenario(withDeviceParameters(scenario, setup),
                                      setup.backend);
    why = tooMuchLive(out.scenario, setup);
  }
  if (!why.empty())
    return Rejection{"scenario text outside the input space: " + why};
  return out;
}

/// decodeInput, with a choices input's expectations set from the reference
/// model only where \p annotate says so.
std::variant<DecodedInput, Rejection>
decode(std::span<const uint8_t> input, const FuzzSetup &setup, bool annotate) {
  if (!input.empty() && input[0] == '#')
    return decodeText(
        std::string_view(reinterpret_cast<const char *>(input.data()),
                         input.size()),
        setup);
  const SetupGenerators &generators = generatorsFor(setup);
  if (generators.generators.empty())
    return Rejection{"no property family runs on backend '" + setup.backend +
                     "'"};
  ByteChoiceSource choices(input);
  uint64_t slot = choices.below(GeneratorSlots);
  const FamilyGenerator &chosen =
      generators.generators[slotOwner(generators.nameHashes, slot)];
  bool keepDelays =
      setup.delayedInputsOneIn != 0 && slot % setup.delayedInputsOneIn == 0;
  DecodedInput out;
  out.family = chosen.family;
  out.configuration = configurationName(chosen.parameters);
  out.scenario = withDeviceParameters(
      configureScenario(chosen.generator.generate(choices, setup.maxCommands),
                        setup.backend, chosen.parameters),
      setup, keepDelays);
  if (annotate)
    out.scenario = annotateExpectations(out.scenario, setup.backend);
  return out;
}

} // namespace

std::variant<DecodedInput, Rejection>
decodeInput(std::span<const uint8_t> input, const FuzzSetup &setup) {
  return decode(input, setup, true);
}

std::string encodeSeed(const Scenario &scenario, std::string_view origin) {
  return "# " + std::string(origin) + "\n" + printScenario(scenario);
}

std::string Finding::report() const {
  std::string s = "drt fuzz finding: an input of " + input.describe() + "\n";
  if (!result.setupError.empty())
    s += "setup error: " + result.setupError + "\n";
  if (result.divergence)
    s += result.divergence->toString();
  s += "scenario (" + std::to_string(input.scenario.commands.size()) +
       " commands):\n" + printScenario(input.scenario);
  return s;
}

InputCheck checkScenarioInput(std::span<const uint8_t> input,
                              const FuzzSetup &setup) {
  InputCheck check;
  // A choices input's expectations would be the outcomes of the model the
  // runner holds every step to: set only in a finding, which is reported
  // and converted with them.
  std::variant<DecodedInput, Rejection> decoded = decode(input, setup, false);
  if (auto *r = std::get_if<Rejection>(&decoded)) {
    check.rejected = std::move(*r);
    return check;
  }
  DecodedInput &in = std::get<DecodedInput>(decoded);
  RunOptions options;
  options.backend = setup.backend;
  options.against = setup.against;
  // A call that never returns holds this thread: the report, then abort(),
  // so that libFuzzer keeps the input.
  options.reportAborted = [](const AbortedStep &stuck) {
    std::string s = "drt-fuzz: an input is stuck at " + stuck.toString() +
                    "scenario up to that step:\n" +
                    printScenario(stuck.prefix());
    std::fputs(s.c_str(), stderr);
    std::fflush(stderr);
    std::abort();
  };
  RunResult result = runScenario(in.scenario, options);
  if (!result.setupError.empty() && in.form == DecodedInput::Form::Text) {
    check.rejected =
        Rejection{"the backend refuses the devices: " + result.setupError};
    return check;
  }
  if (result.passed())
    return check;
  if (in.form == DecodedInput::Form::Choices)
    in.scenario = annotateExpectations(in.scenario, setup.backend);
  check.finding = Finding{std::move(in), std::move(result)};
  return check;
}

std::string checkScenarioText(std::string_view text) {
  ParseResult parsed = parseScenario(text);
  const Scenario *scenario = std::get_if<Scenario>(&parsed);
  if (!scenario)
    return "";
  std::string printed = printScenario(*scenario);
  ParseResult again = parseScenario(printed);
  if (const auto *e = std::get_if<ParseError>(&again))
    return "the printed scenario does not parse (" + e->toString() + "):\n" +
           printed;
  const Scenario &reparsed = std::get<Scenario>(again);
  if (reparsed.devices != scenario->devices)
    return "the printed devices parse to other devices:\n" + printed;
  for (size_t i = 0; i < scenario->commands.size(); ++i) {
    if (i >= reparsed.commands.size())
      return "the printed scenario loses command " + std::to_string(i + 1) +
             " '" + printCommand(scenario->commands[i]) + "':\n" + printed;
    if (!(reparsed.commands[i] == scenario->commands[i]))
      return "command " + std::to_string(i + 1) + " prints as '" +
             printCommand(scenario->commands[i]) + "', which parses to '" +
             printCommand(reparsed.commands[i]) + "', another command:\n" +
             printed;
  }
  if (reparsed.commands.size() != scenario->commands.size())
    return "the printed scenario has more commands:\n" + printed;
  if (std::string second = printScenario(reparsed); second != printed)
    return "printing is not stable: the printed scenario prints as\n" + second +
           "instead of\n" + printed;
  return "";
}

} // namespace drt::fuzz
