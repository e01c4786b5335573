//===- BackendRegistry.cpp - Backends by name -----------------------------===//
#include "drt/BackendRegistry.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>

namespace drt {

namespace {

std::optional<bool> parseBoolean(const std::string &text) {
  if (text == "1" || text == "true" || text == "on")
    return true;
  if (text == "0" || text == "false" || text == "off")
    return false;
  return std::nullopt;
}

std::optional<uint64_t> parseUnsigned(const std::string &text) {
  uint64_t value = 0;
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

std::string joinedNames(const std::vector<BackendParameter> &declared) {
  std::string out;
  for (const BackendParameter &p : declared)
    out += (out.empty() ? "" : ", ") + p.name;
  return out.empty() ? "none" : out;
}

} // namespace

BackendParameter BackendParameter::boolean(std::string name, bool defaultValue,
                                           std::string meaning) {
  BackendParameter p;
  p.name = std::move(name);
  p.kind = Kind::Boolean;
  p.defaultValue = defaultValue ? "1" : "0";
  p.meaning = std::move(meaning);
  p.testValues = {p.defaultValue, defaultValue ? "0" : "1"};
  return p;
}

BackendParameter BackendParameter::unsignedInRange(
    std::string name, uint64_t defaultValue, uint64_t minimum, uint64_t maximum,
    std::string meaning, std::vector<uint64_t> testValues) {
  BackendParameter p;
  p.name = std::move(name);
  p.kind = Kind::Unsigned;
  p.defaultValue = std::to_string(defaultValue);
  p.meaning = std::move(meaning);
  p.minimum = minimum;
  p.maximum = maximum;
  p.testValues = {p.defaultValue};
  for (uint64_t v : testValues)
    if (v != defaultValue)
      p.testValues.push_back(std::to_string(v));
  return p;
}

BackendParameter BackendParameter::text(std::string name, std::string meaning) {
  BackendParameter p;
  p.name = std::move(name);
  p.kind = Kind::Text;
  p.meaning = std::move(meaning);
  p.testValues = {""};
  return p;
}

std::vector<std::string>
untestedParameters(const std::vector<BackendParameter> &parameters) {
  std::vector<std::string> out;
  for (const BackendParameter &p : parameters)
    if (p.kind != BackendParameter::Kind::Text && p.testValues.size() < 2 &&
        !p.seedsRandomness && p.untestedBecause.empty())
      out.push_back(p.name);
  return out;
}

BackendParameter BackendParameter::choice(std::string name,
                                          std::string defaultValue,
                                          std::vector<std::string> choices,
                                          std::string meaning,
                                          std::vector<std::string> testValues) {
  BackendParameter p;
  p.name = std::move(name);
  p.kind = Kind::Choice;
  p.defaultValue = std::move(defaultValue);
  p.meaning = std::move(meaning);
  p.choices = std::move(choices);
  p.testValues = {p.defaultValue};
  for (std::string &v : testValues)
    if (v != p.defaultValue)
      p.testValues.push_back(std::move(v));
  return p;
}

std::string BackendParameter::allowedValues() const {
  switch (kind) {
  case Kind::Boolean:
    return "0 or 1 (also true/false, on/off)";
  case Kind::Unsigned:
    return std::string(powerOfTwo ? "a power of two" : "an integer") +
           " from " + std::to_string(minimum) + " to " +
           std::to_string(maximum);
  case Kind::Text:
    return "any text";
  case Kind::Choice: {
    std::string out = "one of";
    for (size_t i = 0; i < choices.size(); ++i)
      out += (i ? ", " : " ") + choices[i];
    return out;
  }
  }
  return "?";
}

Error BackendParameter::check(const std::string &value,
                              const std::string &where) const {
  bool ok = true;
  switch (kind) {
  case Kind::Boolean:
    ok = parseBoolean(value).has_value();
    break;
  case Kind::Unsigned: {
    std::optional<uint64_t> v = parseUnsigned(value);
    ok = v && *v >= minimum && *v <= maximum &&
         (!powerOfTwo || (*v != 0 && (*v & (*v - 1)) == 0));
    break;
  }
  case Kind::Text:
    break;
  case Kind::Choice:
    ok = std::find(choices.begin(), choices.end(), value) != choices.end();
    break;
  }
  if (ok)
    return Error::success();
  return makeError(ErrorCode::InvalidArgument,
                   where + ": parameter '" + name + "' must be " +
                       allowedValues() + ", got '" + value + "'");
}

Error checkParameters(const DeviceConfig &config,
                      const std::vector<BackendParameter> &declared,
                      const std::string &who) {
  for (const auto &[key, value] : config.parameters) {
    auto it = std::find_if(
        declared.begin(), declared.end(),
        [&key = key](const BackendParameter &p) { return p.name == key; });
    if (it == declared.end())
      return makeError(ErrorCode::InvalidArgument,
                       who + ": unknown parameter '" + key +
                           "' (known: " + joinedNames(declared) + ")");
    if (Error e = it->check(value, who))
      return e;
  }
  return Error::success();
}

BackendRegistry &BackendRegistry::instance() {
  static BackendRegistry registry;
  return registry;
}

bool BackendRegistry::add(BackendInfo info) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BackendInfo &b : backends_)
    if (b.name == info.name)
      return false;
  backends_.push_back(std::move(info));
  return true;
}

const BackendInfo *BackendRegistry::find(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const BackendInfo &b : backends_)
    if (b.name == name)
      return &b;
  return nullptr;
}

std::vector<BackendInfo> BackendRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<BackendInfo> out = backends_;
  std::sort(out.begin(), out.end(),
            [](const BackendInfo &a, const BackendInfo &b) {
              return a.name < b.name;
            });
  return out;
}

std::vector<std::string> BackendRegistry::productionNames() const {
  std::vector<std::string> out;
  for (const BackendInfo &b : list())
    if (!b.testOnly)
      out.push_back(b.name);
  return out;
}

Error BackendRegistry::unknownBackend(const std::string &name) const {
  std::string known;
  for (const BackendInfo &b : list())
    known += (known.empty() ? "" : ", ") + b.name;
  return makeError(ErrorCode::InvalidArgument,
                   "unknown backend '" + name + "'; registered backends: " +
                       (known.empty() ? "none" : known));
}

ParameterMap BackendRegistry::parametersFor(const std::string &backend,
                                            const ParameterMap &parameters) {
  ParameterMap out;
  ParameterMap qualified;
  for (const auto &[key, value] : parameters) {
    size_t colon = key.rfind(':');
    if (colon == std::string::npos)
      out[key] = value;
    else if (key.compare(0, colon, backend) == 0 && colon == backend.size())
      qualified[key.substr(colon + 1)] = value;
  }
  for (auto &[key, value] : qualified)
    out[key] = std::move(value);
  return out;
}

Expected<Capabilities>
BackendRegistry::capabilitiesFor(const std::string &name,
                                 const ParameterMap &parameters) const {
  const BackendInfo *info = find(name);
  if (!info)
    return unknownBackend(name);
  DeviceConfig config;
  config.name = name;
  config.parameters = parametersFor(name, parameters);
  if (Error e =
          checkParameters(config, info->parameters, "backend '" + name + "'"))
    return e;
  return info->capabilitiesFor ? info->capabilitiesFor(config)
                               : info->capabilities;
}

Expected<std::vector<ParameterMap>>
BackendRegistry::configurationsToTest(const std::string &name,
                                      const ParameterMap &fixed) const {
  auto checked = capabilitiesFor(name, fixed);
  if (!checked)
    return checked.takeError();
  ParameterMap base = parametersFor(name, fixed);
  std::vector<ParameterMap> out = {base};
  for (const BackendParameter &p : find(name)->parameters) {
    if (base.count(p.name))
      continue;
    bool contradicted = false;
    for (const auto &[key, value] : p.testedWith)
      if (auto it = base.find(key); it != base.end() && it->second != value)
        contradicted = true;
    if (contradicted)
      continue;
    for (size_t v = 1; v < p.testValues.size(); ++v) {
      ParameterMap config = base;
      config.insert(p.testedWith.begin(), p.testedWith.end());
      config[p.name] = p.testValues[v];
      if (!p.testedWith.empty())
        if (auto caps = capabilitiesFor(name, config); !caps)
          return makeError(ErrorCode::InvalidArgument,
                           "backend '" + name + "': parameter '" + p.name +
                               "' is tested with parameters it cannot have: " +
                               caps.takeError().message());
      out.push_back(std::move(config));
    }
  }
  // One factor at a time never sets two non-default values together, so
  // code that only two of them reach together (a chunk count of one
  // parameter over a buffer size of another) runs in no configuration.
  // Combined configurations set every parameter that matters in every
  // scenario to a non-default test value at once (round r takes each one's
  // r-th, cycling), where its testedWith agrees with what is set and it
  // takes no capability away (a value that turns resident tensors off would
  // leave most properties nothing to run): the non-default values of
  // parameters with one meet pairwise.
  auto takesAway = [](const Capabilities &from, const Capabilities &to) {
    return (from.residentTensors && !to.residentTensors) ||
           (from.asynchronousCompletion && !to.asynchronousCompletion) ||
           (from.peerToPeer && !to.peerToPeer) ||
           (from.memoryBudget && !to.memoryBudget) ||
           (from.faultInjection && !to.faultInjection) ||
           (from.deviceLoss && !to.deviceLoss) ||
           (from.inOrderRuns && !to.inOrderRuns);
  };
  auto combined = [&](const BackendParameter &p) {
    return !base.count(p.name) &&
           p.scope == BackendParameter::Scope::EveryScenario &&
           p.testValues.size() > 1;
  };
  // Sets \p p to \p value in \p config (whose capabilities are \p caps)
  // where its testedWith agrees with what is set and it takes no capability
  // away; returns whether it did.
  auto trySet = [&](ParameterMap &config, Capabilities &caps,
                    const BackendParameter &p, const std::string &value) {
    for (const auto &[key, v] : p.testedWith)
      if (auto it = config.find(key); it != config.end() && it->second != v)
        return false;
    if (auto it = config.find(p.name);
        it != config.end() && it->second != value)
      return false;
    ParameterMap tried = config;
    tried.insert(p.testedWith.begin(), p.testedWith.end());
    tried[p.name] = value;
    Expected<Capabilities> triedCaps = capabilitiesFor(name, tried);
    if (!triedCaps || takesAway(caps, *triedCaps))
      return false;
    config = std::move(tried);
    caps = *triedCaps;
    return true;
  };
  std::vector<const BackendParameter *> swept;
  size_t rounds = 0;
  for (const BackendParameter &p : find(name)->parameters)
    if (combined(p)) {
      swept.push_back(&p);
      rounds = std::max(rounds, p.testValues.size() - 1);
    }
  for (size_t r = 0; r < rounds; ++r) {
    ParameterMap config = base;
    Capabilities caps = *checked;
    size_t set = 0;
    for (const BackendParameter *p : swept)
      set += trySet(config, caps, *p,
                    p->testValues[1 + r % (p->testValues.size() - 1)]);
    if (set >= 2 && std::find(out.begin(), out.end(), config) == out.end())
      out.push_back(std::move(config));
  }
  // Rounds pair values of the same rank: where two parameters have two or
  // more non-default values each, most of their pairs meet in no round (a
  // value that turns a path off meets only the other's value of its rank).
  // Configurations are added until every pair of non-default values of two
  // such parameters that can be set together meets in one: each starts
  // from the first pair still apart and sets every other parameter to the
  // value that brings the most pairs still apart together.
  struct Pair {
    size_t first, firstValue, second, secondValue;
  };
  auto sets = [](const ParameterMap &config, const BackendParameter &p,
                 size_t value) {
    auto it = config.find(p.name);
    return it != config.end() && it->second == p.testValues[value];
  };
  auto together = [&](const ParameterMap &config, const Pair &pair) {
    return sets(config, *swept[pair.first], pair.firstValue) &&
           sets(config, *swept[pair.second], pair.secondValue);
  };
  std::vector<Pair> apart;
  for (size_t i = 0; i < swept.size(); ++i)
    for (size_t j = i + 1; j < swept.size(); ++j)
      for (size_t a = 1; a < swept[i]->testValues.size(); ++a)
        for (size_t b = 1; b < swept[j]->testValues.size(); ++b) {
          Pair pair{i, a, j, b};
          if (std::none_of(out.begin(), out.end(), [&](const ParameterMap &c) {
                return together(c, pair);
              }))
            apart.push_back(pair);
        }
  while (!apart.empty()) {
    Pair first = apart.front();
    ParameterMap config = base;
    Capabilities caps = *checked;
    bool made = trySet(config, caps, *swept[first.first],
                       swept[first.first]->testValues[first.firstValue]) &&
                trySet(config, caps, *swept[first.second],
                       swept[first.second]->testValues[first.secondValue]);
    for (size_t k = 0; made && k < swept.size(); ++k) {
      if (k == first.first || k == first.second)
        continue;
      // The pairs still apart that value v of parameter k would bring
      // together with what the configuration sets.
      auto gain = [&](size_t v) {
        size_t n = 0;
        for (const Pair &pair : apart)
          n += (pair.first == k && pair.firstValue == v &&
                sets(config, *swept[pair.second], pair.secondValue)) ||
               (pair.second == k && pair.secondValue == v &&
                sets(config, *swept[pair.first], pair.firstValue));
        return n;
      };
      // (gain, value), the most gainful first, the earlier of equals.
      std::vector<std::pair<size_t, size_t>> values;
      for (size_t v = 1; v < swept[k]->testValues.size(); ++v)
        values.emplace_back(gain(v), v);
      std::stable_sort(
          values.begin(), values.end(),
          [](const auto &x, const auto &y) { return x.first > y.first; });
      for (const auto &[g, v] : values)
        if (trySet(config, caps, *swept[k], swept[k]->testValues[v]))
          break;
    }
    // The first pair goes whether or not it could be set: nothing sets it.
    apart.erase(apart.begin());
    if (!made)
      continue;
    std::erase_if(apart,
                  [&](const Pair &pair) { return together(config, pair); });
    if (std::find(out.begin(), out.end(), config) == out.end())
      out.push_back(std::move(config));
  }
  return out;
}

Expected<std::unique_ptr<DeviceManager>>
BackendRegistry::create(const std::string &name, const DeviceConfig &config) {
  const BackendInfo *info = find(name);
  if (!info)
    return unknownBackend(name);
  DeviceConfig named = config;
  if (named.name.empty())
    named.name = name + "0";
  named.parameters = parametersFor(name, config.parameters);
  // A backend reports failures as an Error; one that throws instead (a
  // plugin's table lookup, its driver's wrapper) is refused like a failing
  // init, with what it threw, not let through to the caller.
  std::string thrown;
  try {
    std::unique_ptr<DeviceManager> device = info->factory(named);
    if (!device)
      return makeError(ErrorCode::DeviceError,
                       "backend '" + name + "' failed to create a device");
    if (Error e = device->init())
      return e;
    return device;
  } catch (const std::exception &e) {
    thrown = e.what();
  } catch (...) {
    thrown = "an exception of a type that is no std::exception";
  }
  return makeError(ErrorCode::DeviceError,
                   "backend '" + name + "' threw while creating device '" +
                       named.name + "': " + thrown +
                       " (a backend reports failures as an Error)");
}

BackendRegistration::BackendRegistration(BackendInfo info) {
  std::string name = info.name;
  if (!BackendRegistry::instance().add(std::move(info)))
    std::fprintf(stderr,
                 "drt: backend '%s' registered twice; keeping the first\n",
                 name.c_str());
}

} // namespace drt
