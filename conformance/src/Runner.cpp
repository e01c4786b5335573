//===- Runner.cpp - Scenarios against backends ----------------------------===//
#include "drt/conformance/Runner.h"

#include "drt/BackendRegistry.h"
#include "drt/HostManager.h"
#include "drt/Violation.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/ScenarioText.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace drt::conformance {

std::string Divergence::toString() const {
  std::string s = "step " + std::to_string(step) + ": " + command + "\n";
  s += "  backend:  " + backend + "\n";
  s += "  what:     " + what + "\n";
  s += "  expected: " + expected + "\n";
  s += "  observed: " + observed + "\n";
  return s;
}

namespace {

/// Counts the calls of one completion callback.
struct CallbackProbe {
  std::mutex mutex;
  std::condition_variable called;
  int calls = 0;
  Error first;
  /// The residency state the transferred tensor had inside the first call
  /// (the record must already be updated then).
  std::optional<ResidencyState> stateAtCallback;
  /// The host bytes of a tensor brought back, read inside the first call
  /// (the data must already be there then).
  std::optional<std::vector<std::optional<uint8_t>>> contentsAtCallback;
  /// Cleared once the step is over: a late call must not touch the tensor,
  /// which the scenario may have destroyed since.
  bool open = true;

  /// Counts a call; the first one made while the step is open also runs
  /// \p observe (under the probe's lock) to record what the tensor showed.
  template <typename Observe> void record(Error e, Observe observe) {
    std::lock_guard<std::mutex> lock(mutex);
    if (calls++ == 0) {
      first = std::move(e);
      if (open)
        observe(first);
    }
    called.notify_all();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex);
    open = false;
  }
  /// Waits for the first call and returns the call count. Gives up after
  /// \p timeoutMs, or \p graceMs after \p settled() first holds (nothing is
  /// in flight, so a call that has not come will not come).
  int wait(unsigned timeoutMs, unsigned graceMs,
           const std::function<bool()> &settled) {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
    // Set while nothing is in flight; work that starts again (the second
    // half of a move) clears it.
    std::optional<Clock::time_point> graceEnd;
    std::unique_lock<std::mutex> lock(mutex);
    while (calls == 0 && Clock::now() < deadline &&
           (!graceEnd || Clock::now() < *graceEnd)) {
      called.wait_for(lock, std::chrono::milliseconds(5),
                      [&] { return calls > 0; });
      if (calls > 0)
        break;
      lock.unlock();
      bool idle = settled();
      lock.lock();
      if (!idle)
        graceEnd.reset();
      else if (!graceEnd)
        graceEnd = Clock::now() + std::chrono::milliseconds(graceMs);
    }
    return calls;
  }
  int count() {
    std::lock_guard<std::mutex> lock(mutex);
    return calls;
  }
};

/// What a step showed, of the model or of a backend, in comparable form.
struct TensorObservation {
  bool empty = true;
  std::string state;
  std::string device;
  /// Readable host bytes; nullopt for unknown (model) or unreadable.
  std::vector<std::optional<uint8_t>> contents;
};

struct DeviceObservation {
  uint64_t used = 0;
  size_t live = 0;
  bool shutDown = false;
};

struct Observation {
  /// The command blocked past the callback timeout and was ended by
  /// shutting the devices down.
  bool blocked = false;
  Outcome outcome;
  std::string message;
  int callbacks = 0;
  std::map<std::string, TensorObservation> tensors;
  std::map<std::string, DeviceObservation> devices;
  /// "a=b" for every pair of tensors sharing one record (a < b).
  std::set<std::string> sharing;
  /// takeBackgroundErrors() of each device ("device: error"); the model
  /// expects none.
  std::vector<std::string> backgroundErrors;
};

struct Difference {
  std::string what, expected, observed;
};

std::string hexBytes(const std::vector<std::optional<uint8_t>> &bytes,
                     size_t from, size_t count) {
  std::string s;
  char buf[8];
  for (size_t i = from; i < bytes.size() && i < from + count; ++i) {
    if (bytes[i])
      std::snprintf(buf, sizeof buf, "%02x", *bytes[i]);
    else
      std::snprintf(buf, sizeof buf, "??");
    s += (i > from ? " " : "") + std::string(buf);
  }
  return s;
}

/// The first byte known on both sides where host contents differ, as a
/// Difference about tensor \p name (\p where and \p note qualify it).
std::optional<Difference>
contentsDifference(const std::string &name,
                   const std::vector<std::optional<uint8_t>> &expected,
                   const std::vector<std::optional<uint8_t>> &observed,
                   const std::string &where = "",
                   const std::string &note = "") {
  for (size_t i = 0; i < expected.size() && i < observed.size(); ++i) {
    if (!expected[i] || !observed[i] || *expected[i] == *observed[i])
      continue;
    size_t from = i - i % 4;
    return Difference{"host contents of tensor '" + name + "' at byte " +
                          std::to_string(i) + where,
                      hexBytes(expected, from, 8) + note,
                      hexBytes(observed, from, 8)};
  }
  return std::nullopt;
}

std::string describeTensor(const TensorObservation &t) {
  if (t.empty)
    return "empty";
  return t.state + (t.device.empty() ? "" : " on " + t.device);
}

std::optional<Difference> compareObservations(const Observation &expected,
                                              const Observation &observed) {
  if (observed.blocked)
    return Difference{"the command's return", "before the callback timeout",
                      "it blocked; the devices were shut down to end it"};
  // Without its callback an operation has no outcome to compare.
  if (expected.callbacks > 0 && observed.callbacks == 0)
    return Difference{"completion callbacks",
                      std::to_string(expected.callbacks) + " call(s)",
                      "0 call(s)"};
  if (!(expected.outcome == observed.outcome))
    return Difference{
        "outcome", expected.outcome.toString(),
        observed.outcome.toString() +
            (observed.message.empty() ? "" : " (" + observed.message + ")")};
  if (expected.callbacks != observed.callbacks)
    return Difference{"completion callbacks",
                      std::to_string(expected.callbacks) + " call(s)",
                      std::to_string(observed.callbacks) + " call(s)"};
  for (const auto &[name, e] : expected.tensors) {
    auto it = observed.tensors.find(name);
    if (it == observed.tensors.end())
      return Difference{"tensor '" + name + "'", "to exist", "missing"};
    const TensorObservation &o = it->second;
    if (e.empty != o.empty || e.state != o.state || e.device != o.device)
      return Difference{"residency of tensor '" + name + "'", describeTensor(e),
                        describeTensor(o)};
    if (e.contents.empty() || o.contents.empty())
      continue;
    if (e.contents.size() != o.contents.size())
      return Difference{"host size of tensor '" + name + "'",
                        std::to_string(e.contents.size()) + " bytes",
                        std::to_string(o.contents.size()) + " bytes"};
    if (auto d = contentsDifference(name, e.contents, o.contents))
      return d;
  }
  for (const auto &[name, o] : observed.tensors)
    if (!expected.tensors.count(name))
      return Difference{"tensor '" + name + "'", "not to exist", "exists"};
  if (expected.sharing != observed.sharing) {
    auto join = [](const std::set<std::string> &s) {
      std::string out;
      for (const std::string &p : s)
        out += (out.empty() ? "" : ", ") + p;
      return out.empty() ? std::string("none") : out;
    };
    return Difference{"tensors sharing a residency record",
                      join(expected.sharing), join(observed.sharing)};
  }
  if (expected.backgroundErrors != observed.backgroundErrors)
    return Difference{
        "takeBackgroundErrors()",
        expected.backgroundErrors.empty() ? "none"
                                          : expected.backgroundErrors.front(),
        observed.backgroundErrors.empty() ? "none"
                                          : observed.backgroundErrors.front()};
  for (const auto &[name, e] : expected.devices) {
    const DeviceObservation &o = observed.devices.at(name);
    if (e.shutDown != o.shutDown)
      return Difference{"device '" + name + "' shut down",
                        e.shutDown ? "yes" : "no", o.shutDown ? "yes" : "no"};
    if (e.used != o.used)
      return Difference{"usedMemory() of device '" + name + "'",
                        std::to_string(e.used) + " bytes",
                        std::to_string(o.used) + " bytes"};
    if (e.live != o.live)
      return Difference{"liveAllocations() of device '" + name + "'",
                        std::to_string(e.live), std::to_string(o.live)};
  }
  return std::nullopt;
}

Observation expectedObservation(const Model &model, const ModelStep &step) {
  Observation obs;
  obs.outcome = step.outcome;
  obs.callbacks = step.callbacks;
  std::map<int, std::vector<std::string>> byRecord;
  for (const auto &[name, t] : model.tensors()) {
    TensorObservation to;
    to.empty = t.empty();
    if (!t.empty()) {
      const ModelRecord &r = model.records().at(t.record);
      to.state = stateLabel(r.state);
      to.device = r.device;
      if (r.state == ResidencyState::Host ||
          r.state == ResidencyState::Mirrored)
        to.contents = model.contentsOf(name);
      byRecord[t.record].push_back(name);
    }
    obs.tensors[name] = std::move(to);
  }
  for (const auto &[id, names] : byRecord)
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t j = i + 1; j < names.size(); ++j)
        obs.sharing.insert(names[i] + "=" + names[j]);
  for (const auto &[name, d] : model.devices())
    obs.devices[name] = {d.used, d.live, d.shutDown};
  return obs;
}

Capabilities capabilitiesOf(const std::string &backend) {
  const BackendInfo *info = BackendRegistry::instance().find(backend);
  return info ? info->capabilities : Capabilities{};
}

void selfMoveAssign(Tensor &target, Tensor &source) {
  target = std::move(source);
}

/// Runs an action if a step outlasts its deadline: a command that blocks on
/// a completion the backend dropped (a run staging on an asynchronous
/// device, a synchronous helper) is ended by shutting the devices down, which
/// completes every pending operation with DeviceLost.
class Watchdog {
public:
  explicit Watchdog(std::function<void()> onExpiry)
      : onExpiry_(std::move(onExpiry)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      exit_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void arm(unsigned ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline_ =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    fired_ = false;
    changed_.notify_all();
  }
  /// Disarms it; true when it fired since arm().
  bool disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline_.reset();
    return fired_;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!exit_) {
      if (!deadline_) {
        changed_.wait(lock);
        continue;
      }
      auto deadline = *deadline_;
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
          deadline_ == deadline) {
        deadline_.reset();
        fired_ = true;
        lock.unlock();
        onExpiry_();
        lock.lock();
      }
    }
  }

  std::function<void()> onExpiry_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool fired_ = false;
  bool exit_ = false;
  std::thread thread_;
};

/// One backend's devices and objects while a scenario runs on it.
class Session {
public:
  Session(std::string backend, const Scenario &scenario, unsigned timeoutMs)
      : backend_(std::move(backend)), scenario_(scenario),
        timeoutMs_(timeoutMs) {}

  ~Session() {
    // Devices stop first: work a broken backend left pending completes (with
    // DeviceLost) before the tensors it would write into are freed.
    for (const auto &[name, index] : deviceIndex_)
      host_.device(index).shutdown();
    contexts_.clear();
    tensors_.clear();
  }

  const std::string &backend() const { return backend_; }

  /// What the created devices declare (the registry's entry before setup).
  Capabilities capabilities() {
    if (scenario_.devices.empty())
      return capabilitiesOf(backend_);
    return device(scenario_.devices.front().name).capabilities();
  }

  /// True when any device may complete after a call returns (the devices of
  /// a scenario may differ: "device d1 async=1").
  bool anyAsynchronous() {
    for (const DeviceSpec &spec : scenario_.devices)
      if (device(spec.name).capabilities().asynchronousCompletion)
        return true;
    return false;
  }

  std::string setup() {
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceConfig config;
      config.name = spec.name;
      config.memoryBudget = spec.budget;
      config.copyDeviceTensorsToHost = spec.copyToHost;
      config.parameters = spec.parameters;
      auto device = BackendRegistry::instance().create(backend_, config);
      if (!device)
        return "cannot create device '" + spec.name + "' of backend '" +
               backend_ + "': " + device.takeError().toString();
      DeviceManager *raw = device->get();
      deviceNames_[raw] = spec.name;
      physicalBaseline_[spec.name] = raw->physicalMemoryInUse();
      deviceIndex_[spec.name] = host_.addDevice(std::move(*device));
    }
    return "";
  }

  DeviceManager &device(const std::string &name) {
    return host_.device(deviceIndex_.at(name));
  }

  /// Executes \p c; fills outcome, message and callbacks of \p obs.
  void execute(const Command &c, Observation &obs) {
    std::shared_ptr<CallbackProbe> probe;
    Tensor *transferred = nullptr;
    if ((c.kind == CommandKind::ToDevice ||
         c.kind == CommandKind::FromDevice) &&
        tensors_.count(c.target))
      transferred = tensors_.at(c.target).get();
    bool fetched = c.kind == CommandKind::FromDevice;
    auto callback = [&]() -> CompletionCallback {
      probe = std::make_shared<CallbackProbe>();
      probes_.push_back(probe);
      return [p = probe, transferred, fetched](Error e) {
        CallbackProbe *probe = p.get();
        p->record(std::move(e), [&](const Error &outcome) {
          if (!transferred || transferred->isEmpty())
            return;
          ResidencyState state = transferred->residencySnapshot().state;
          probe->stateAtCallback = state;
          if (!fetched || !outcome.isSuccess() ||
              (state != ResidencyState::Host &&
               state != ResidencyState::Mirrored))
            return;
          // Never let a violation escape into the backend's thread.
          try {
            std::vector<std::optional<uint8_t>> seen;
            for (std::byte b : transferred->hostBytes())
              seen.push_back(uint8_t(b));
            probe->contentsAtCallback = std::move(seen);
          } catch (const ContractViolationError &) {
          }
        });
      };
    };
    Error result;
    // Longer than the callback wait, which ends non-blocking commands first.
    watchdog_.arm(timeoutMs_ + WatchdogMarginMs);
    try {
      result = dispatch(c, callback, probe);
    } catch (const ContractViolationError &v) {
      obs.outcome = Outcome::violationOf(v.kind());
      obs.message = v.what();
    }
    obs.blocked = watchdog_.disarm();
    transferProbe_ = transferred ? probe : nullptr;
    missedCallback_ = false;
    if (probe) {
      // A violation is raised before the operation starts: no callback. A
      // synchronous backend calls back before the call returns, so no wait.
      if (obs.outcome.kind == Outcome::Kind::Violation || !anyAsynchronous())
        obs.callbacks = probe->count();
      else
        obs.callbacks = probe->wait(timeoutMs_, SettledGraceMs,
                                    [this] { return inFlight() == 0; });
      missedCallback_ =
          obs.callbacks == 0 && obs.outcome.kind != Outcome::Kind::Violation;
      probe->close();
      if (obs.callbacks > 0 && obs.outcome.kind != Outcome::Kind::Violation) {
        std::lock_guard<std::mutex> lock(probe->mutex);
        result = probe->first;
      }
    }
    if (obs.outcome.kind != Outcome::Kind::Violation && result) {
      obs.outcome = Outcome::error(result.code());
      obs.message = result.message();
    }
  }

  /// Everything observable after a step.
  void observe(const Model &model, Observation &obs) {
    // Settle: no operation may stay in flight between steps (unless one has
    // already missed its callback, which the step reports). A synchronous
    // backend has nothing legitimately in flight once a call returns.
    bool async = anyAsynchronous();
    for (int i = 0; i < 200 && async && !missedCallback_ && inFlight() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::map<const void *, std::vector<std::string>> byStorage;
    for (const auto &[name, t] : tensors_) {
      TensorObservation to;
      to.empty = t->isEmpty();
      if (!t->isEmpty()) {
        ResidencySnapshot s = t->residencySnapshot();
        to.state = stateLabel(s.state);
        if (s.busy) {
          // Host access would wait for an operation that never completed.
          to.state += " (busy: an operation on it never completed)";
          obs.tensors[name] = std::move(to);
          continue;
        }
        if (s.manager) {
          auto it = deviceNames_.find(s.manager);
          to.device =
              it == deviceNames_.end() ? "an unknown device" : it->second;
        }
        const ModelTensor *mt = model.tensor(name);
        if ((s.state == ResidencyState::Host ||
             s.state == ResidencyState::Mirrored) &&
            mt && !mt->empty()) {
          auto bytes = t->hostBytes();
          for (std::byte b : bytes)
            to.contents.push_back(uint8_t(b));
        }
      }
      obs.tensors[name] = std::move(to);
    }
    std::vector<std::string> names;
    for (const auto &[name, t] : tensors_)
      if (!t->isEmpty())
        names.push_back(name);
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t j = i + 1; j < names.size(); ++j)
        if (tensors_.at(names[i])->sharesResidencyWith(*tensors_.at(names[j])))
          obs.sharing.insert(names[i] + "=" + names[j]);
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceManager &d = device(spec.name);
      obs.devices[spec.name] = {d.usedMemory(), d.liveAllocations(),
                                d.isShutDown()};
      for (const Error &e : d.takeBackgroundErrors())
        obs.backgroundErrors.push_back(spec.name + ": " + e.toString());
    }
  }

  /// The checks only a backend has (no model counterpart): locations,
  /// stats, background errors, late callbacks, operations in flight.
  std::optional<Difference> backendChecks(const Model &model,
                                          const Command &c) {
    if (transferProbe_) {
      std::lock_guard<std::mutex> lock(transferProbe_->mutex);
      const std::optional<ResidencyState> &seen =
          transferProbe_->stateAtCallback;
      const ModelRecord *r = model.recordOf(c.target);
      if (seen && r && *seen != r->state)
        return Difference{"residency of tensor '" + c.target +
                              "' inside its completion callback",
                          stateLabel(r->state) + " (updated before the call)",
                          stateLabel(*seen)};
      if (const auto &seenBytes = transferProbe_->contentsAtCallback) {
        if (auto d = contentsDifference(
                c.target, model.contentsOf(c.target), *seenBytes,
                " inside its completion callback",
                " (the data is in place before the call)"))
          return d;
      }
    }
    for (size_t i = 0; i < probes_.size(); ++i)
      if (int n = probes_[i]->count(); n > 1)
        return Difference{"completion callback of an earlier step",
                          "exactly 1 call", std::to_string(n) + " calls"};
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceManager &d = device(spec.name);
      if (size_t n = d.operationsInFlight())
        return Difference{"operationsInFlight() of device '" + spec.name +
                              "' between steps",
                          "0", std::to_string(n)};
      if (uint64_t copies = d.stats().deviceCopies)
        return Difference{"stats().deviceCopies of device '" + spec.name + "'",
                          "0", std::to_string(copies)};
      if (spec.budget && !d.isShutDown() && d.maximumMemory() != spec.budget)
        return Difference{"maximumMemory() of device '" + spec.name + "'",
                          std::to_string(spec.budget),
                          std::to_string(d.maximumMemory())};
    }
    std::map<std::pair<std::string, uint64_t>, std::string> seen;
    for (const auto &[name, t] : tensors_) {
      const ModelRecord *r = model.recordOf(name);
      if (!r || t->isEmpty())
        continue;
      ResidencySnapshot s = t->residencySnapshot();
      if (s.state != ResidencyState::Device &&
          s.state != ResidencyState::Mirrored)
        continue;
      if (s.location.isNull())
        return Difference{"location of tensor '" + name + "'",
                          "a live allocation", "the null location"};
      if (!r->location.empty() && s.location != locations_.at(r->location))
        return Difference{"location of tensor '" + name + "'",
                          "the taken-over location '" + r->location + "' (" +
                              locations_.at(r->location).toString() + ")",
                          s.location.toString()};
      auto key = std::make_pair(r->device, s.location.value);
      auto [it, fresh] = seen.emplace(key, name);
      if (!fresh && !t->sharesResidencyWith(*tensors_.at(it->second)))
        return Difference{"location of tensor '" + name + "'",
                          "distinct from every other record's",
                          "the same as tensor '" + it->second + "' (" +
                              s.location.toString() + ")"};
    }
    return std::nullopt;
  }

  /// Frees the remaining raw locations and destroys every tensor.
  void teardown(const Model &model) {
    transferProbe_ = nullptr;
    for (const auto &[name, l] : model.locations())
      if (l.state == ModelLocation::State::Live)
        (void)device(l.device).releaseDeviceMemory(locations_.at(name));
    contexts_.clear();
    tensors_.clear();
  }

  /// Physical memory must be back at its baseline after teardown.
  std::optional<Difference> physicalChecks() {
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceManager &d = device(spec.name);
      if (d.isShutDown())
        continue;
      if (d.physicalMemoryInUse() != physicalBaseline_.at(spec.name))
        return Difference{"physicalMemoryInUse() of device '" + spec.name +
                              "' after teardown",
                          std::to_string(physicalBaseline_.at(spec.name)) +
                              " bytes (its baseline)",
                          std::to_string(d.physicalMemoryInUse()) + " bytes"};
    }
    return std::nullopt;
  }

private:
  /// How long a callback may trail the end of its operation on another
  /// thread before it counts as missing.
  static constexpr unsigned SettledGraceMs = 250;
  /// How much longer than the callback timeout a command may block.
  static constexpr unsigned WatchdogMarginMs = 1000;

  size_t inFlight() {
    size_t n = 0;
    for (const DeviceSpec &spec : scenario_.devices)
      n += device(spec.name).operationsInFlight();
    return n;
  }

  Tensor &tensor(const std::string &name) { return *tensors_.at(name); }

  void unbindEverywhere(const std::string &name) {
    Tensor *t = tensors_.at(name).get();
    for (auto &[net, ctx] : contexts_) {
      std::vector<std::string> drop;
      for (const auto &[ph, bound] : ctx->bindings().all())
        if (bound == t)
          drop.push_back(ph);
      for (const std::string &ph : drop)
        ctx->bindings().unbind(ph);
    }
  }

  ExecutionContext &context(const std::string &network) {
    auto &slot = contexts_[network];
    if (!slot)
      slot = std::make_unique<ExecutionContext>();
    return *slot;
  }

  template <typename MakeCallback>
  Error dispatch(const Command &c, MakeCallback &callback,
                 std::shared_ptr<CallbackProbe> &) {
    switch (c.kind) {
    case CommandKind::Create: {
      tensors_[c.target] = std::make_unique<Tensor>();
      auto t = std::make_unique<Tensor>(c.elemKind, c.dims, c.target);
      if (c.pattern) {
        auto bytes =
            patternBytes(c.elemKind, c.pattern, 0, t->type().numElements());
        std::memcpy(t->mutableHostBytes().data(), bytes.data(), bytes.size());
      }
      tensors_[c.target] = std::move(t);
      return Error::success();
    }
    case CommandKind::View: {
      tensors_[c.target] = std::make_unique<Tensor>();
      Tensor v = tensor(c.source).getUnowned(c.dims, c.offset);
      v.setName(c.target);
      *tensors_[c.target] = std::move(v);
      return Error::success();
    }
    case CommandKind::Clone: {
      tensors_[c.target] = std::make_unique<Tensor>();
      Tensor copy = tensor(c.source).clone();
      copy.setName(c.target);
      *tensors_[c.target] = std::move(copy);
      return Error::success();
    }
    case CommandKind::MoveConstruct:
      tensors_[c.target] =
          std::make_unique<Tensor>(std::move(tensor(c.source)));
      return Error::success();
    case CommandKind::MoveAssign:
      selfMoveAssign(tensor(c.target), tensor(c.source));
      return Error::success();
    case CommandKind::SelfMove:
      selfMoveAssign(tensor(c.target), tensor(c.target));
      return Error::success();
    case CommandKind::Destroy:
      unbindEverywhere(c.target);
      tensors_.erase(c.target);
      return Error::success();
    case CommandKind::ToDevice: {
      std::optional<DeviceLocation> location;
      if (!c.location.empty())
        location = locations_[c.location];
      device(c.device).transferToDevice(tensor(c.target), location, callback());
      return Error::success();
    }
    case CommandKind::FromDevice:
      device(c.device).transferFromDevice(tensor(c.target), c.release,
                                          callback());
      return Error::success();
    case CommandKind::Release:
      return device(c.device).releaseDeviceTensor(tensor(c.target));
    case CommandKind::DoubleRelease:
      if (Error e = device(c.device).releaseDeviceTensor(tensor(c.target)))
        return e;
      return device(c.device).releaseDeviceTensor(tensor(c.target));
    case CommandKind::Read:
      (void)tensor(c.target).hostBytes();
      return Error::success();
    case CommandKind::Write: {
      Tensor &t = tensor(c.target);
      auto target = t.mutableHostBytes();
      auto bytes =
          patternBytes(t.elemKind(), c.pattern, 0, t.type().numElements());
      std::memcpy(target.data(), bytes.data(), bytes.size());
      return Error::success();
    }
    case CommandKind::Refill: {
      Tensor &t = tensor(c.target);
      auto bytes = patternBytes(t.elemKind(), c.pattern, 0,
                                t.isEmpty() ? 0 : t.type().numElements());
      return t.refillFromHost(std::as_bytes(std::span(bytes)));
    }
    case CommandKind::AddNetwork:
      networkDevice_[c.target] = c.device;
      return host_.addNetwork(networkFunction(c),
                              int(deviceIndex_.at(c.device)));
    case CommandKind::Run: {
      ExecutionContext &ctx = context(c.target);
      std::vector<std::string> bound;
      for (const auto &[ph, t] : ctx.bindings().all())
        bound.push_back(ph);
      for (const std::string &ph : bound)
        ctx.bindings().unbind(ph);
      for (const auto &[ph, t] : c.bindings)
        ctx.bindings().bind(ph, tensor(t));
      device(networkDevice_.at(c.target))
          .runFunction(c.target, ctx, callback());
      return Error::success();
    }
    case CommandKind::EvictNetwork:
      return host_.evictNetwork(c.target);
    case CommandKind::EnsureOutputs:
      return host_.ensureOutputsAvailable(context(c.target));
    case CommandKind::Shutdown:
      device(c.device).shutdown();
      return Error::success();
    case CommandKind::InjectFault:
      return device(c.device).injectFault(c.fault);
    case CommandKind::Alloc: {
      locations_[c.target] = DeviceLocation{};
      auto loc = device(c.device).allocateDeviceMemory(c.bytes);
      if (!loc)
        return loc.takeError();
      locations_[c.target] = *loc;
      return Error::success();
    }
    case CommandKind::Free:
      return device(c.device).releaseDeviceMemory(locations_[c.target]);
    }
    return Error::success();
  }

  // host_ is declared first so that it (and its devices) outlives tensors.
  HostManager host_;
  std::string backend_;
  const Scenario &scenario_;
  unsigned timeoutMs_;
  std::map<std::string, size_t> deviceIndex_;
  std::map<const DeviceManager *, std::string> deviceNames_;
  std::map<std::string, uint64_t> physicalBaseline_;
  std::map<std::string, std::unique_ptr<Tensor>> tensors_;
  std::map<std::string, DeviceLocation> locations_;
  std::map<std::string, std::unique_ptr<ExecutionContext>> contexts_;
  std::map<std::string, std::string> networkDevice_;
  std::vector<std::shared_ptr<CallbackProbe>> probes_;
  /// The probe of the last step's transfer, if it was one.
  std::shared_ptr<CallbackProbe> transferProbe_;
  /// True when the last step's operation did not call back.
  bool missedCallback_ = false;
  /// Declared last: it stops (and joins) before the devices go.
  Watchdog watchdog_{[this] {
    for (const auto &[name, index] : deviceIndex_)
      host_.device(index).shutdown();
  }};
};

std::string traceLine(size_t step, const std::string &command,
                      const Observation &obs) {
  std::string s = "step " + std::to_string(step) + ": " + command + "  => " +
                  obs.outcome.toString();
  if (!obs.message.empty())
    s += " (" + obs.message + ")";
  if (obs.callbacks)
    s += " [" + std::to_string(obs.callbacks) + " callback]";
  for (const auto &[name, t] : obs.tensors)
    s += "\n    tensor " + name + ": " + describeTensor(t);
  for (const auto &[name, d] : obs.devices)
    s += "\n    device " + name + ": used " + std::to_string(d.used) +
         " bytes, " + std::to_string(d.live) + " allocation(s)" +
         (d.shutDown ? ", shut down" : "");
  return s;
}

/// One from-device keep per record left in Device state on a running device,
/// of a tensor that covers the record whole (a partial view cannot move it).
std::vector<Command> finalReadBack(const Model &model) {
  std::vector<Command> out;
  std::set<int> seen;
  for (const auto &[name, t] : model.tensors()) {
    if (t.empty() || seen.count(t.record))
      continue;
    const ModelRecord &r = model.records().at(t.record);
    if (r.state != ResidencyState::Device || t.offsetBytes != 0 ||
        t.bytes() != r.bytes || model.devices().at(r.device).shutDown)
      continue;
    seen.insert(t.record);
    Command c;
    c.kind = CommandKind::FromDevice;
    c.target = name;
    c.device = r.device;
    c.release = false;
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace

Scenario annotateExpectations(const Scenario &scenario,
                              const std::string &backend) {
  Scenario out = scenario;
  Model model(scenario.devices, [&](const DeviceSpec &spec) {
    return probedDeviceTraits(backend, spec);
  });
  for (Command &c : out.commands)
    c.expect = model.apply(c).outcome;
  return out;
}

RunResult runScenario(const Scenario &scenario, const RunOptions &options) {
  RunResult result;
  ScopedThrowingViolationHandler violations;
  if (std::string problem = validateScenario(scenario); !problem.empty()) {
    result.setupError = "malformed scenario: " + problem;
    return result;
  }
  std::vector<std::unique_ptr<Session>> sessions;
  sessions.push_back(std::make_unique<Session>(options.backend, scenario,
                                               options.callbackTimeoutMs));
  if (!options.against.empty())
    sessions.push_back(std::make_unique<Session>(options.against, scenario,
                                                 options.callbackTimeoutMs));
  for (auto &s : sessions)
    if (std::string e = s->setup(); !e.empty()) {
      result.setupError = e;
      return result;
    }
  Model model(scenario.devices, [&](const DeviceSpec &spec) {
    DeviceManager &d = sessions.front()->device(spec.name);
    return DeviceTraits{d.capabilities(), d.maximumMemory()};
  });
  auto diverge = [&](size_t step, const std::string &command,
                     const std::string &backend, const Difference &d) {
    result.divergence =
        Divergence{step, command, backend, d.what, d.expected, d.observed};
  };

  // One step on the model and every session; false after a divergence.
  auto runStep = [&](const Command &c, size_t step, const std::string &text,
                     bool written) {
    result.steps = step;
    std::map<int, ResidencyState> before;
    for (const auto &[id, r] : model.records())
      before[id] = r.state;
    ModelStep predicted = model.apply(c);
    // The final read-back is the runner's, not the scenario's: it counts
    // towards no coverage.
    for (const std::string &label : predicted.labels)
      if (written)
        ++result.labels[label];
    for (const auto &[id, state] : before) {
      if (!written)
        break;
      auto it = model.records().find(id);
      std::string op(commandKindName(c.kind));
      if (it == model.records().end()) {
        if (state == ResidencyState::Device ||
            state == ResidencyState::Mirrored)
          ++result.transitions[stateLabel(state) + " -" + op + "-> freed"];
      } else if (it->second.state != state) {
        ++result.transitions[stateLabel(state) + " -" + op + "-> " +
                             stateLabel(it->second.state)];
      }
    }
    if (written && !(c.expect == predicted.outcome)) {
      diverge(step, text, "scenario",
              {"the step's written expectation against the reference model",
               "the model's " + predicted.outcome.toString(),
               "the scenario's " + c.expect.toString()});
      return false;
    }
    Observation expected = expectedObservation(model, predicted);
    std::vector<Observation> observed(sessions.size());
    for (size_t k = 0; k < sessions.size(); ++k) {
      sessions[k]->execute(c, observed[k]);
      sessions[k]->observe(model, observed[k]);
      if (options.trace)
        options.trace((sessions.size() > 1 ? "[" + sessions[k]->backend() + "] "
                                           : std::string()) +
                      traceLine(step, text, observed[k]));
      if (auto d = compareObservations(expected, observed[k])) {
        diverge(step, text, sessions[k]->backend(), *d);
        return false;
      }
      if (auto d = sessions[k]->backendChecks(model, c)) {
        diverge(step, text, sessions[k]->backend(), *d);
        return false;
      }
    }
    if (sessions.size() > 1)
      if (auto d = compareObservations(observed[1], observed[0])) {
        diverge(step, text,
                sessions[0]->backend() + " against " + sessions[1]->backend(),
                *d);
        return false;
      }
    return true;
  };

  for (size_t i = 0; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    if (!runStep(c, i + 1, printCommand(c), true))
      return result;
  }

  // Final read-back: every record still on a device is brought back (kept
  // there too), so results computed on the device are compared with the
  // model even when the scenario never reads them.
  size_t step = scenario.commands.size();
  for (const Command &c : finalReadBack(model))
    if (!runStep(c, ++step, "final read-back: " + printCommand(c), false))
      return result;

  // Teardown: every tensor goes, memory returns to the baseline.
  ++step;
  for (auto &s : sessions)
    s->teardown(model);
  model.teardown();
  ModelStep none;
  Observation expected = expectedObservation(model, none);
  for (auto &s : sessions) {
    Observation observed;
    s->observe(model, observed);
    if (auto d = compareObservations(expected, observed)) {
      diverge(step, "teardown (destroy every tensor, free every location)",
              s->backend(), *d);
      return result;
    }
    if (auto d = s->backendChecks(model, Command{})) {
      diverge(step, "teardown", s->backend(), *d);
      return result;
    }
    if (auto d = s->physicalChecks()) {
      diverge(step, "teardown", s->backend(), *d);
      return result;
    }
  }
  return result;
}

} // namespace drt::conformance
