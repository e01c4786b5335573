//===- Runner.cpp - Scenarios against backends ----------------------------===//
#include "drt/conformance/Runner.h"

#include "drt/BackendRegistry.h"
#include "drt/HostManager.h"
#include "drt/HostMemory.h"
#include "drt/SyncTransfer.h"
#include "drt/Violation.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Model.h"
#include "drt/conformance/ScenarioText.h"

#include "SameText.h"
#include "VerifiedReading.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <sys/mman.h>
#include <thread>
#include <tuple>
#include <typeinfo>
#include <unistd.h>
#include <unordered_map>
#include <utility>

namespace drt::conformance {

std::string Divergence::toString() const {
  std::string s = "step " + std::to_string(step) + ": " + command + "\n";
  if (!backend.empty())
    s += "  backend:  " + backend + "\n";
  s += "  what:     " + what + "\n";
  s += "  expected: " + expected + "\n";
  s += "  observed: " + observed + "\n";
  return s;
}

std::string AbortedStep::toString() const {
  std::string s = "step " + std::to_string(step) + ": " + command + "\n";
  if (!backend.empty())
    s += "  backend:  " + backend + "\n";
  if (signal) {
    s += "  what:     " + verdict() +
         " during the step: a crash inside the backend (or the framework)\n";
    s += "  then:     the process cannot go on from the signal\n";
    return s;
  }
  s += "  what:     the scenario made no progress for " +
       std::to_string(stuckMs / 1000) +
       " s: a call into the backend never returned (a deadlock on the "
       "thread that made it, or a wait or a loop that never ends), though "
       "any wait for a completion ends when the devices are shut down\n";
  s += "  then:     the thread running the scenario cannot be recovered; "
       "the process ends here\n";
  return s;
}

std::string AbortedStep::verdict() const {
  if (!signal)
    return "STUCK";
  const char *name = strsignal(signal);
  return "CRASHED (signal " + std::to_string(signal) + ", " +
         (name ? name : "unknown") + ")";
}

namespace {
/// The commands of \p scenario before its parallel block (all of them when
/// it has none).
size_t sequentialLength(const Scenario &scenario) {
  size_t n = scenario.commands.size();
  while (n > 0 && scenario.commands[n - 1].branch != 0)
    --n;
  return n;
}
} // namespace

Scenario AbortedStep::prefix() const {
  Scenario out = *scenario;
  if (step >= 1 && step <= sequentialLength(out))
    out.commands.resize(step);
  return out;
}

namespace {

struct Difference {
  std::string what, expected, observed;
};

/// A contract violation that callCatchingViolation caught on this thread
/// and the step that made the call has not taken yet.
struct CaughtViolation {
  bool caught = false;
  ViolationKind kind = ViolationKind::UseOfMovedFrom;
  std::string message;
};
thread_local CaughtViolation caughtViolation;

/// Makes \p call, a call into the framework that may raise a contract
/// violation the scenario expects, and catches the violation right above
/// the framework's frame (caughtViolation): unwound up to the step's own
/// handler instead, it passed through the runner's larger frames and their
/// cleanups, for several times the cost of a throw, and a scenario raises
/// many. Returns whether it caught one. A template, so that \p call is
/// inlined into it: one frame less to unwind through.
template <typename Call>
[[gnu::noinline]] bool callCatchingViolation(Call &&call) {
  try {
    call();
    return false;
  } catch (const ContractViolationError &v) {
    caughtViolation.caught = true;
    caughtViolation.kind = v.kind();
    caughtViolation.message = v.what();
    return true;
  }
}

/// Takes the violation callCatchingViolation caught on this thread, if any.
bool takeCaughtViolation(ViolationKind &kind, std::string &message) {
  if (!caughtViolation.caught)
    return false;
  caughtViolation.caught = false;
  kind = caughtViolation.kind;
  message = std::move(caughtViolation.message);
  return true;
}

/// Records at most this large have their host contents compared after every
/// step; larger ones when the step names them and once after the last step,
/// so that a step costs O(live objects + bytes it touches).
constexpr size_t SmallRecordBytes = 256;

/// "12 34 ?? 56": \p count bytes from \p from; \p known says which bytes of
/// \p bytes may be shown (the others print as ??).
template <typename Known>
std::string hexBytes(const uint8_t *bytes, size_t size, size_t from,
                     size_t count, Known known) {
  std::string s;
  char buf[8];
  for (size_t i = from; i < size && i < from + count; ++i) {
    if (known(i))
      std::snprintf(buf, sizeof buf, "%02x", bytes[i]);
    else
      std::snprintf(buf, sizeof buf, "??");
    s += (i > from ? " " : "") + std::string(buf);
  }
  return s;
}

/// True when the element at \p p of kind \p kind is a NaN.
bool isNaNElement(ElemKind kind, const uint8_t *p) {
  switch (kind) {
  case ElemKind::Float32: {
    uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0;
  }
  case ElemKind::Float16:
  case ElemKind::BFloat16: {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    uint16_t exponent = kind == ElemKind::Float16 ? 0x7c00 : 0x7f80;
    return (bits & exponent) == exponent && (bits & ~exponent & 0x7fff) != 0;
  }
  default:
    return false;
  }
}

/// Compares \p host, the host bytes of tensor \p name, with the bytes the
/// model knows of it, in place. The first difference names the byte.
std::optional<Difference>
contentsDifference(const std::string &name, const ModelTensor &t,
                   const ModelRecord &r, std::span<const std::byte> hostSpan,
                   std::string_view where = {}, std::string_view note = {}) {
  if (hostSpan.size() != t.bytes())
    return Difference{"host size of tensor '" + name + "'" + std::string(where),
                      std::to_string(t.bytes()) + " bytes",
                      std::to_string(hostSpan.size()) + " bytes"};
  if (r.data.size() != r.bytes)
    return std::nullopt;
  const auto *host = reinterpret_cast<const uint8_t *>(hostSpan.data());
  const uint8_t *model = r.data.data() + t.offsetBytes;
  size_t size = elemSize(t.kind);
  // The known ranges clipped to the tensor, read in place: a small tensor is
  // compared after every step, and a copy of its ranges would cost more than
  // its bytes.
  size_t begin = t.offsetBytes, end = t.offsetBytes + t.bytes();
  for (const auto &[knownFrom, knownTo] : r.known.ranges()) {
    if (knownTo <= begin)
      continue;
    if (knownFrom >= end)
      break;
    size_t from = std::max(knownFrom, begin) - begin;
    size_t to = std::min(knownTo, end) - begin;
    size_t i = from;
    while (i < to) {
      if (std::memcmp(host + i, model + i, to - i) == 0)
        break;
      while (i < to && host[i] == model[i])
        ++i;
      // A NaN that a float add, mul or scale computed matches any NaN (its
      // sign and payload are unspecified); every other NaN matches its own
      // bits only (transfers and copies move bits unchanged).
      size_t element = i - i % size;
      if (element + size <= t.bytes() &&
          r.openNaN.covers(t.offsetBytes + element,
                           t.offsetBytes + element + size) &&
          isNaNElement(t.kind, host + element) &&
          isNaNElement(t.kind, model + element)) {
        i = element + size;
        continue;
      }
      size_t shown = i - i % 4;
      auto knownAt = [&](size_t b) {
        return r.known.covers(t.offsetBytes + b, t.offsetBytes + b + 1);
      };
      return Difference{
          "host contents of tensor '" + name + "' at byte " +
              std::to_string(i) + std::string(where),
          hexBytes(model, t.bytes(), shown, 8, knownAt) + std::string(note),
          hexBytes(host, t.bytes(), shown, 8, [](size_t) { return true; })};
    }
  }
  return std::nullopt;
}

/// Counts the calls of one completion callback.
struct CallbackProbe {
  std::mutex mutex;
  std::condition_variable called;
  int calls = 0;
  Error first;
  /// The residency state the transferred tensor had inside the first call
  /// (the record must already be updated then).
  std::optional<ResidencyState> stateAtCallback;
  /// For a read-back: how the host bytes, read inside the first call,
  /// differed from the model (the data must already be in place then).
  std::optional<Difference> contentsAtCallback;
  /// Cleared once the step is over: a late call must not touch the tensor,
  /// which the scenario may have destroyed since.
  bool open = true;
  /// The device did not answer a question about its accounting while the
  /// callback ran (AccountingQuestion).
  bool unansweredAccounting = false;
  /// Counts, for the whole scenario, the calls beyond the first of any
  /// probe, so that a late second call of an earlier step's callback is seen
  /// without going through every probe.
  std::shared_ptr<std::atomic<int>> extraCalls;

  /// Counts a call; the first one made while the step is open also runs
  /// \p observe (under the probe's lock) to record what the tensor showed.
  template <typename Observe> void record(Error e, Observe observe) {
    std::lock_guard<std::mutex> lock(mutex);
    if (calls++ == 0) {
      first = std::move(e);
      if (open)
        observe(first);
    } else if (extraCalls) {
      ++*extraCalls;
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

/// What executing one command showed on a backend.
struct Observation {
  /// The command blocked past the callback timeout and was ended by
  /// shutting the devices down.
  bool blocked = false;
  Outcome outcome;
  std::string message;
  int callbacks = 0;
  /// For a command issued without waiting: its callback's probe, waited for
  /// after the next command that waits (null once it raised a violation,
  /// which comes before any work).
  std::shared_ptr<CallbackProbe> pending;
  /// What the runner could not set up for the command on this backend (a
  /// pinned storage request the device failed): reported at the step.
  std::optional<Difference> problem;
  /// For a create with pinned=D: what storage the tensor got, as a coverage
  /// label ("create-pinned" or "create-pinned-fell-back-to-pageable").
  const char *storageLabel = nullptr;
};

/// A command issued from inside the completion callback of the one before
/// it ('in-callback'): what its issue showed, handed from the backend's
/// thread to the thread running the scenario.
struct Continuation {
  std::mutex mutex;
  std::condition_variable issued;
  /// Set when the step's callback took it to issue (inside the probe's
  /// observation, so that once the probe is closed it is final), and once
  /// the call that issued it returned (under mutex).
  bool claimed = false;
  bool done = false;
  /// Its outcome so far (a violation, an error returned, an exception that
  /// escaped), and the probe of its callback (null for a release or a
  /// shutdown, and once a violation stopped it).
  Observation observation;
  std::shared_ptr<CallbackProbe> probe;
};

/// The type and message of the exception being handled ("std::out_of_range:
/// index 9"), for a report of one that escaped a backend.
std::string describeCurrentException() {
  try {
    throw;
  } catch (const std::exception &e) {
    int status = 0;
    char *name =
        abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    std::string what =
        std::string(status == 0 && name ? name : typeid(e).name()) + ": " +
        e.what();
    std::free(name);
    return what;
  } catch (...) {
    return "an exception of a type that is no std::exception";
  }
}

/// The outcome and callbacks of a step against what the model predicts.
std::optional<Difference> compareOutcome(const ModelStep &expected,
                                         const Observation &observed) {
  if (observed.blocked)
    return Difference{"the command's return", "before the callback timeout",
                      "it blocked; the devices were shut down to end it"};
  if (observed.problem)
    return observed.problem;
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
  return std::nullopt;
}

std::string describeState(bool empty, ResidencyState state,
                          const std::string &device) {
  if (empty)
    return "empty";
  return stateLabel(state) + (device.empty() ? "" : " on " + device);
}

/// \p bytes as bytes fillPattern can write.
std::span<uint8_t> writable(std::span<std::byte> bytes) {
  return {reinterpret_cast<uint8_t *>(bytes.data()), bytes.size()};
}

/// Adds to \p out the tensors a step names that it lacks: those the step
/// acts on, and for runs and ensure-outputs those bound in the network's
/// context (whose contents it may change).
void addTensorsNamedBy(const Command &c, const Model &model,
                       std::vector<std::string> &out) {
  auto add = [&](const std::string &name) {
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  };
  add(c.target);
  add(c.source);
  for (const auto &[ph, t] : c.bindings)
    add(t);
  if (c.kind == CommandKind::Run || c.kind == CommandKind::EnsureOutputs)
    if (auto it = model.contexts().find(c.target); it != model.contexts().end())
      for (const auto &[ph, t] : it->second.bindings)
        add(t);
}

/// Whether a command of kind \p kind does all its work inside the call:
/// neither a transfer nor a run (which complete through callbacks), nor a
/// network's compilation or eviction, a shutdown or a fault.
bool completesInCall(CommandKind kind) {
  switch (kind) {
  case CommandKind::ToDevice:
  case CommandKind::FromDevice:
  case CommandKind::Run:
  case CommandKind::EnsureOutputs:
  case CommandKind::AddNetwork:
  case CommandKind::EvictNetwork:
  case CommandKind::Shutdown:
  case CommandKind::InjectFault:
    return false;
  default:
    return true;
  }
}

/// A step checks every object when the scenario holds at most this many
/// tensors, and otherwise once every SweepPeriod steps (and after any step
/// that shuts a device down): long scenarios with many tensors stay linear.
constexpr size_t SweepTensors = 64;
constexpr size_t SweepPeriod = 64;

void selfMoveAssign(Tensor &target, Tensor &source) {
  target = std::move(source);
}

/// Asks a device for its accounting (usedMemory, physicalMemoryInUse,
/// liveAllocations, stats) from another thread while one of its completion
/// callbacks runs. A device that cannot answer then holds a lock of its own
/// across the callback, and a program that calls into it from the callback
/// (to issue its next transfer) deadlocks; asked from another thread, the
/// question waits only until the callback returns. One thread serves every
/// runner of the process.
class AccountingQuestion {
public:
  /// Asks \p device, without waiting for the answer.
  static std::shared_ptr<AccountingQuestion> ask(const DeviceManager &device) {
    auto q = std::shared_ptr<AccountingQuestion>(new AccountingQuestion);
    q->device_ = &device;
    Service &s = service();
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.questions.push_back(q);
    }
    s.asked.notify_one();
    return q;
  }
  /// True when the device answered within \p patience.
  bool answeredWithin(std::chrono::milliseconds patience) {
    std::unique_lock<std::mutex> lock(mutex_);
    return answered_.wait_for(lock, patience, [&] { return done_; });
  }
  /// Waits until the device answered (a device that held its lock across
  /// a callback answers once the callback returns).
  void waitUntilAnswered() {
    std::unique_lock<std::mutex> lock(mutex_);
    answered_.wait(lock, [&] { return done_; });
  }

private:
  struct Service {
    std::mutex mutex;
    std::condition_variable asked;
    std::deque<std::shared_ptr<AccountingQuestion>> questions;

    Service() {
      // It serves until the process ends.
      std::thread([this] {
        for (;;) {
          std::shared_ptr<AccountingQuestion> q;
          {
            std::unique_lock<std::mutex> lock(mutex);
            asked.wait(lock, [&] { return !questions.empty(); });
            q = std::move(questions.front());
            questions.pop_front();
          }
          const DeviceManager &d = *q->device_;
          (void)d.usedMemory();
          (void)d.physicalMemoryInUse();
          (void)d.liveAllocations();
          (void)d.stats();
          {
            std::lock_guard<std::mutex> lock(q->mutex_);
            q->done_ = true;
          }
          q->answered_.notify_all();
        }
      }).detach();
    }
  };
  static Service &service() {
    static Service *s = new Service;
    return *s;
  }

  const DeviceManager *device_ = nullptr;
  std::mutex mutex_;
  std::condition_variable answered_;
  bool done_ = false;
};

/// How long a callback waits for its device's answer (AccountingQuestion):
/// long enough for the question's thread to be scheduled on a loaded
/// machine.
constexpr std::chrono::milliseconds AccountingPatience{200};

/// Runs an action if a step outlasts its deadline: a command that blocks on
/// a completion the backend dropped (a run staging on an asynchronous
/// device, a synchronous helper) is ended by shutting the devices down, which
/// completes every pending operation with DeviceLost. One thread serves every
/// watchdog of the process and polls every PollMs: arming and disarming are
/// one atomic store each, so a step neither takes a lock nor reads the clock
/// for it, and neither a step nor a scenario starts or wakes a thread. The
/// deadline counts from the first poll that sees the watchdog armed, and is
/// checked at each poll after, so an action runs never early and at most
/// about two polls late.
class Watchdog {
public:
  explicit Watchdog(std::function<void()> onExpiry)
      : onExpiry_(std::move(onExpiry)) {
    Service &s = service();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.watchdogs.push_back(this);
  }
  ~Watchdog() {
    Service &s = service();
    std::unique_lock<std::mutex> lock(s.mutex);
    s.finished.wait(lock, [&] { return !running_; });
    std::erase(s.watchdogs, this);
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// Arms it for \p ms from now.
  void arm(unsigned ms) {
    timeoutMs_.store(ms, std::memory_order_relaxed);
    state_.store((++arms_ << 2) | Armed, std::memory_order_release);
  }
  /// Disarms it; true when it fired since arm().
  bool disarm() {
    return (state_.exchange(Disarmed, std::memory_order_acq_rel) & 3) == Fired;
  }

private:
  static constexpr unsigned PollMs = 20;
  /// The low two bits of state_; the others count the arms, so that the
  /// service tells a new arming from the one it saw before.
  static constexpr uint64_t Disarmed = 0, Armed = 1, Fired = 2;

  /// The thread and the watchdogs it serves.
  struct Service {
    std::mutex mutex;
    std::condition_variable finished;
    std::vector<Watchdog *> watchdogs;
    std::thread thread;

    Service() {
      thread = std::thread([this] {
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
          lock.unlock();
          std::this_thread::sleep_for(std::chrono::milliseconds(PollMs));
          lock.lock();
          auto now = std::chrono::steady_clock::now();
          for (size_t i = 0; i < watchdogs.size(); ++i) {
            Watchdog *w = watchdogs[i];
            uint64_t state = w->state_.load(std::memory_order_acquire);
            if ((state & 3) != Armed) {
              w->seenState_ = Disarmed;
              continue;
            }
            if (state != w->seenState_) {
              w->seenState_ = state;
              w->seenAt_ = now;
              continue;
            }
            auto timeout = std::chrono::milliseconds(
                w->timeoutMs_.load(std::memory_order_relaxed));
            // A disarm that comes first wins: the step ended in time.
            if (now - w->seenAt_ < timeout ||
                !w->state_.compare_exchange_strong(state,
                                                   (state & ~3ull) | Fired))
              continue;
            w->running_ = true;
            lock.unlock();
            w->onExpiry_();
            lock.lock();
            w->running_ = false;
            finished.notify_all();
            // The action took time: a watchdog armed meanwhile is first
            // seen now, not before it was armed.
            now = std::chrono::steady_clock::now();
          }
        }
      });
      // It lives as long as the process: nothing is left to serve at exit.
      thread.detach();
    }
  };

  static Service &service() {
    static Service *s = new Service;
    return *s;
  }

  std::function<void()> onExpiry_;
  /// Written by arm() and disarm() (the thread running the steps) and by
  /// the service when it fires.
  std::atomic<uint64_t> state_{Disarmed};
  std::atomic<unsigned> timeoutMs_{0};
  uint64_t arms_ = 0;
  /// The service's own, under its mutex: the armed state it last saw and
  /// when it first saw it, and whether the action is running.
  uint64_t seenState_ = Disarmed;
  std::chrono::steady_clock::time_point seenAt_;
  bool running_ = false;
};

/// Where a scenario is, for the report of one that stops making progress:
/// written by the threads that run it before each step and each phase (a
/// command pointer lives while its step runs), read by ProgressGuard.
struct Progress {
  std::atomic<uint64_t> count{0};
  std::atomic<size_t> step{0};
  std::atomic<const Command *> command{nullptr};
  /// What runs when no command does ("setup", "teardown", ...).
  std::atomic<const char *> phase{"setup"};
  std::atomic<const std::string *> backend{nullptr};

  /// Progress: at \p step, running \p c (or \p what when null) on
  /// \p on (unknown when null).
  void at(size_t stepNumber, const Command *c, const char *what,
          const std::string *on) {
    step.store(stepNumber, std::memory_order_relaxed);
    command.store(c, std::memory_order_relaxed);
    phase.store(what, std::memory_order_relaxed);
    backend.store(on, std::memory_order_relaxed);
    advance();
  }
  /// Progress within the same step.
  void advance() { count.fetch_add(1, std::memory_order_release); }
};

/// Ends the process with a report (AbortedStep) when a scenario's Progress
/// stays unchanged for longer than any step of a backend that returns from
/// its calls takes: the Watchdog ends waits for completions by shutting the
/// devices down, but a call that never returns holds the thread running
/// the scenario for good. One thread of its own serves every guard of the
/// process (not the Watchdog's: a shutdown that hangs must not stop it).
class ProgressGuard {
public:
  ProgressGuard(const Progress &progress, unsigned stuckMs,
                std::function<void(unsigned)> onStuck)
      : progress_(progress), stuckMs_(stuckMs), onStuck_(std::move(onStuck)) {
    Service &s = service();
    std::lock_guard<std::mutex> lock(s.mutex);
    seen_ = progress_.count.load(std::memory_order_acquire);
    seenAt_ = std::chrono::steady_clock::now();
    s.guards.push_back(this);
  }
  ~ProgressGuard() {
    Service &s = service();
    std::lock_guard<std::mutex> lock(s.mutex);
    std::erase(s.guards, this);
  }
  ProgressGuard(const ProgressGuard &) = delete;
  ProgressGuard &operator=(const ProgressGuard &) = delete;

private:
  static constexpr unsigned PollMs = 100;

  struct Service {
    std::mutex mutex;
    std::vector<ProgressGuard *> guards;

    Service() {
      std::thread([this] {
        for (;;) {
          std::this_thread::sleep_for(std::chrono::milliseconds(PollMs));
          std::unique_lock<std::mutex> lock(mutex);
          auto now = std::chrono::steady_clock::now();
          for (ProgressGuard *g : guards) {
            uint64_t count = g->progress_.count.load(std::memory_order_acquire);
            if (count != g->seen_) {
              g->seen_ = count;
              g->seenAt_ = now;
              continue;
            }
            auto still = std::chrono::duration_cast<std::chrono::milliseconds>(
                now - g->seenAt_);
            if (still.count() < g->stuckMs_)
              continue;
            // It ends the process. The lock stays held, so that a guard
            // whose scenario returns meanwhile (a step slower than the
            // threshold, not stuck) is not destroyed under the report.
            g->onStuck_(unsigned(still.count()));
            std::fflush(nullptr);
            std::_Exit(1);
          }
        }
      }).detach();
    }
  };

  static Service &service() {
    static Service *s = new Service;
    return *s;
  }

  const Progress &progress_;
  const unsigned stuckMs_;
  std::function<void(unsigned)> onStuck_;
  /// The service's own, under its mutex.
  uint64_t seen_ = 0;
  std::chrono::steady_clock::time_point seenAt_;
};

/// One backend's devices and objects while a scenario runs on it.
class Session {
public:
  Session(std::string backend, const Scenario &scenario, unsigned timeoutMs,
          bool askDevicesFromCallbacks)
      : backend_(std::move(backend)), scenario_(scenario),
        timeoutMs_(timeoutMs),
        askDevicesFromCallbacks_(askDevicesFromCallbacks) {}

  ~Session() {
    // A device asked from a callback answers once the callback returned,
    // before it goes.
    std::vector<std::shared_ptr<AccountingQuestion>> questions;
    {
      std::lock_guard<std::mutex> lock(questionsMutex_);
      questions = questions_;
    }
    for (auto &q : questions)
      q->waitUntilAnswered();
    // Devices stop first: work a broken backend left pending completes (with
    // DeviceLost) before the tensors it would write into are freed.
    for (const auto &[name, index] : deviceIndex_)
      host_.device(index).shutdown();
    // A call made from a callback may outlast its step (or a step that
    // diverged first) and still use the tensors: wait for it (a call that
    // never returns is reported stuck instead).
    for (const std::shared_ptr<Continuation> &k : continuations_) {
      std::unique_lock<std::mutex> lock(k->mutex);
      k->issued.wait(lock, [&] { return !k->claimed || k->done; });
    }
    contexts_.clear();
    tensors_.clear();
  }

  const std::string &backend() const { return backend_; }

  /// Where the scenario's Progress goes from the parallel block's threads.
  void setProgress(Progress *progress) { progress_ = progress; }

  /// True when any device may complete after a call returns (the devices of
  /// a scenario may differ: "device d1 async=1"). What a device declares is
  /// fixed when it is created, so setup() asks once.
  bool anyAsynchronous() const { return anyAsynchronous_; }

  std::string setup() {
    // Devices of one backend are numbered in the scenario's order: where a
    // backend finds several physical devices, two of a scenario are two.
    std::map<std::string, uint32_t> ordinals;
    for (const DeviceSpec &spec : scenario_.devices) {
      const std::string &backend = deviceBackend(spec, backend_);
      DeviceConfig config = deviceConfigOf(spec);
      config.ordinal = ordinals[backend]++;
      auto device = BackendRegistry::instance().create(backend, config);
      if (!device)
        return "cannot create device '" + spec.name + "' of backend '" +
               backend + "': " + device.takeError().toString();
      DeviceManager *raw = device->get();
      physicalBaseline_[spec.name] = raw->physicalMemoryInUse();
      anyAsynchronous_ =
          anyAsynchronous_ || raw->capabilities().asynchronousCompletion;
      deviceIndex_[spec.name] = host_.addDevice(std::move(*device));
      devices_.push_back(raw);
    }
    return "";
  }

  DeviceManager &device(const std::string &name) {
    return host_.device(deviceIndex_.at(name));
  }

  /// Adds the paths the devices report (DeviceManager::pathUses) to
  /// \p result: a label for each path any of them took and for each one
  /// any of them overlapped, once a scenario whatever the number of
  /// devices (the census counts cases), and the names of the shared ones.
  void reportPaths(RunResult &result) const {
    std::set<std::string> taken, overlapped;
    for (DeviceManager *device : devices_)
      for (const PathUse &path : device->pathUses()) {
        if (path.concurrent)
          result.concurrentPaths.insert(path.name);
        if (path.uses)
          taken.insert("path:" + path.name);
        if (path.overlaps)
          overlapped.insert("path-overlapped:" + path.name);
      }
    for (const std::set<std::string> *labels : {&taken, &overlapped})
      for (const std::string &label : *labels)
        ++result.labels[label];
  }

  /// Executes \p c, whose effect \p model already predicts; fills outcome,
  /// message and callbacks of \p obs.
  /// With \p recordPending (a transfer of the command's record issued
  /// without waiting has not been waited for), what the transferred tensor
  /// shows inside a failing callback is not checked: a command refused
  /// before any work (a partial view) calls back at once, while the pending
  /// transfer may still be on its way to the state the model already shows.
  /// A command that succeeds waited for it, and one on another record never
  /// meets it: both are checked.
  /// Not inlined: a contract violation the step expects is caught here,
  /// and the unwinder searches the call-site table of the frame that
  /// catches, which is short for this function and long for its callers.
  /// With \p continuation (the next command, written 'in-callback'), the
  /// step's callback issues it (issueContinuation) after it observed the
  /// step; finishContinuation then completes it as the next step.
  [[gnu::noinline]] void execute(const Command &c, const Model &model,
                                 Observation &obs, bool recordPending = false,
                                 const Command *continuation = nullptr) {
    std::shared_ptr<CallbackProbe> probe;
    std::shared_ptr<Continuation> next =
        continuation ? std::make_shared<Continuation>() : nullptr;
    if (next)
      continuations_.push_back(next);
    // A transfer issued without waiting completes while later steps change
    // the model and the tensors: its callback records the outcome only.
    Tensor *transferred = nullptr;
    if ((c.kind == CommandKind::ToDevice ||
         c.kind == CommandKind::FromDevice) &&
        !c.noWait)
      if (auto it = tensors_.find(c.target); it != tensors_.end())
        transferred = it->second.get();
    bool fetched = c.kind == CommandKind::FromDevice;
    // The runner waits for this step's callback before it touches the model
    // again, so the callback may read the model on the backend's thread. A
    // read-back's callback compares contents: only it needs them.
    const ModelTensor *expectedTensor =
        fetched && transferred ? model.tensor(c.target) : nullptr;
    const ModelRecord *expectedRecord =
        expectedTensor && !expectedTensor->empty()
            ? &model.records().at(expectedTensor->record)
            : nullptr;
    const std::string &name = c.target;
    // The first callback of each kind of operation on each device asks the
    // device for its accounting from another thread (AccountingQuestion).
    const DeviceManager *asked = nullptr;
    std::string askedName;
    if (askDevicesFromCallbacks_ && !c.noWait &&
        (c.kind == CommandKind::ToDevice || c.kind == CommandKind::FromDevice ||
         c.kind == CommandKind::Run)) {
      askedName =
          c.kind == CommandKind::Run
              ? (networkDevice_.count(c.target) ? networkDevice_.at(c.target)
                                                : std::string())
              : c.device;
      if (deviceIndex_.count(askedName) &&
          askedKinds_.insert({askedName, c.kind}).second)
        asked = &device(askedName);
    }
    auto callback = [&]() -> CompletionCallback {
      probe = std::make_shared<CallbackProbe>();
      probe->extraCalls = extraCalls_;
      return
          [this, p = probe, transferred, fetched, recordPending, expectedTensor,
           expectedRecord, &name, asked, next, continuation](Error e) {
            CallbackProbe *probe = p.get();
            // Only the first call of a step still open issues the continuation.
            bool observed = false;
            // Asked and registered under the probe's lock, so that a step that
            // closes the probe (and a session that ends after it) sees the
            // question and waits for its answer before the device goes.
            std::shared_ptr<AccountingQuestion> q;
            if (asked) {
              std::lock_guard<std::mutex> lock(p->mutex);
              if (p->open && p->calls == 0) {
                q = AccountingQuestion::ask(*asked);
                std::lock_guard<std::mutex> registered(questionsMutex_);
                questions_.push_back(q);
              }
            }
            if (q) {
              bool answered = q->answeredWithin(AccountingPatience);
              std::lock_guard<std::mutex> lock(p->mutex);
              p->unansweredAccounting = !answered;
            }
            p->record(std::move(e), [&](const Error &outcome) {
              observed = true;
              if (next) {
                std::lock_guard<std::mutex> claim(next->mutex);
                next->claimed = true;
              }
              if (!transferred || transferred->isEmpty() ||
                  (recordPending && !outcome.isSuccess()))
                return;
              ResidencyState state = transferred->residencySnapshot().state;
              probe->stateAtCallback = state;
              if (!fetched || !outcome.isSuccess() || !expectedRecord ||
                  (state != ResidencyState::Host &&
                   state != ResidencyState::Mirrored))
                return;
              // Never let a violation escape into the backend's thread.
              try {
                probe->contentsAtCallback = contentsDifference(
                    name, *expectedTensor, *expectedRecord,
                    transferred->hostBytes(), " inside its completion callback",
                    " (the data is in place before the call)");
              } catch (const ContractViolationError &) {
              }
            });
            if (next && observed)
              issueContinuation(*continuation, *next);
          };
    };
    hostManagerPlaces_ = c.kind == CommandKind::AddNetwork &&
                         hostManagerWouldChoose(c.device, model);
    Error result;
    // Longer than the callback wait, which ends non-blocking commands first.
    watchdog_.arm(timeoutMs_ + WatchdogMarginMs);
    try {
      result = dispatch(c, callback, probe);
      hostManagerPlaces_ = false;
      ViolationKind kind;
      if (takeCaughtViolation(kind, obs.message))
        obs.outcome = Outcome::violationOf(kind);
    } catch (const ContractViolationError &v) {
      hostManagerPlaces_ = false;
      obs.outcome = Outcome::violationOf(v.kind());
      obs.message = v.what();
    } catch (...) {
      // What escaped the backend ends the scenario (runInto).
      watchdog_.disarm();
      throw;
    }
    obs.blocked = watchdog_.disarm();
    obs.problem = std::exchange(storageProblem_, std::nullopt);
    obs.storageLabel = std::exchange(storageLabel_, nullptr);
    transferProbe_ = transferred ? probe : nullptr;
    missedCallback_ = false;
    if (probe && c.noWait && obs.outcome.kind != Outcome::Kind::Violation) {
      obs.pending = probe;
      return;
    }
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
      bool unanswered;
      {
        std::lock_guard<std::mutex> lock(probe->mutex);
        unanswered = probe->unansweredAccounting;
      }
      if (unanswered && !obs.problem)
        obs.problem = Difference{
            "the accounting of device '" + askedName +
                "', asked from another thread while the step's completion "
                "callback ran",
            "an answer: a device calls back without holding its own locks",
            "none within " + std::to_string(AccountingPatience.count()) +
                " ms: the device held a lock across the callback, so a "
                "program that calls into it from the callback (to issue its "
                "next transfer) deadlocks"};
      if (obs.callbacks > 0 && obs.outcome.kind != Outcome::Kind::Violation) {
        std::lock_guard<std::mutex> lock(probe->mutex);
        result = probe->first;
      }
    } else if (c.sync) {
      obs.callbacks = syncCallbacks(obs);
    }
    if (obs.outcome.kind != Outcome::Kind::Violation && result) {
      obs.outcome = Outcome::error(result.code());
      obs.message = result.message();
    }
    // Without a callback nothing issues the continuation: the next step
    // runs it as the program would go on.
    continuation_ = obs.callbacks > 0 ? std::move(next) : nullptr;
  }

  /// A callback that only counts its calls, on a new probe put in \p probe
  /// (for dispatch() of a branch's command or a continuation, which look at
  /// nothing inside the callback).
  CompletionCallback countingCallback(std::shared_ptr<CallbackProbe> &probe) {
    probe = std::make_shared<CallbackProbe>();
    probe->extraCalls = extraCalls_;
    return
        [p = probe](Error e) { p->record(std::move(e), [](const Error &) {}); };
  }

  /// Issues \p c from inside the completion callback of the step before it,
  /// on the thread the backend called back on, and hands what the issue
  /// showed to \p out. Runs while the thread running the scenario waits for
  /// it (finishContinuation), so it may look tensors and devices up as
  /// dispatch() does for a branch.
  void issueContinuation(const Command &c, Continuation &out) {
    Observation obs;
    std::shared_ptr<CallbackProbe> probe;
    auto callback = [&] { return countingCallback(probe); };
    try {
      Error result = dispatch(c, callback, probe);
      ViolationKind kind;
      if (takeCaughtViolation(kind, obs.message))
        obs.outcome = Outcome::violationOf(kind);
      else if (result) {
        obs.outcome = Outcome::error(result.code());
        obs.message = result.message();
      }
    } catch (const ContractViolationError &v) {
      obs.outcome = Outcome::violationOf(v.kind());
      obs.message = v.what();
    } catch (...) {
      obs.problem = Difference{
          "the calls of '" + printCommand(c) + "' into the backend",
          "returns (a backend reports a failure as an Error; a hook never "
          "throws)",
          "an exception escaped: " + describeCurrentException()};
    }
    {
      std::lock_guard<std::mutex> lock(out.mutex);
      out.observation = std::move(obs);
      out.probe = out.observation.outcome.kind == Outcome::Kind::Violation
                      ? nullptr
                      : std::move(probe);
      out.done = true;
    }
    out.issued.notify_all();
  }

  /// Runs \p c, written 'in-callback': waits until the callback of the step
  /// before it has issued it (issueContinuation), then for its own callback.
  /// Where that step had no callback (a violation stopped it before any
  /// work), \p c is executed here instead, as the program would go on.
  void finishContinuation(const Command &c, const Model &model,
                          Observation &obs, bool recordPending) {
    std::shared_ptr<Continuation> k = std::exchange(continuation_, nullptr);
    if (!k)
      return execute(c, model, obs, recordPending);
    std::unique_lock<std::mutex> lock(k->mutex);
    if (!k->issued.wait_for(lock, std::chrono::milliseconds(timeoutMs_),
                            [&] { return k->done; })) {
      obs.problem = Difference{
          "the call of '" + printCommand(c) +
              "', made from inside the completion callback of the step "
              "before it",
          "returns (a program may call into the device from its callbacks, "
          "docs/semantics.md section 4)",
          "still running after " + std::to_string(timeoutMs_) + " ms"};
      return;
    }
    obs = std::move(k->observation);
    std::shared_ptr<CallbackProbe> probe = std::move(k->probe);
    lock.unlock();
    // A synchronous backend called back before the call returned, and no
    // other thread runs a command in the sequence.
    if (probe)
      awaitPending(probe, obs, /*calledBack=*/!anyAsynchronous());
  }

  /// Tells the session, before a step, whether commands it issued without
  /// waiting have not been waited for yet.
  void noteUnwaitedCommands(bool unwaited) { unwaitedCommands_ = unwaited; }

  /// Makes the context of \p network, which a run makes on first use,
  /// so that a parallel branch that runs it only looks it up.
  void makeContext(const std::string &network) { context(network); }

  /// A watchdog for a branch's thread: like the session's, it ends a
  /// command that blocks by shutting the devices down.
  std::unique_ptr<Watchdog> branchWatchdog() {
    return std::make_unique<Watchdog>([this] { shutDownDevices(); });
  }

  /// Whether HostManager::addNetwork, left to choose a device (a negative
  /// index), would choose \p device: the one with the most memory left
  /// (the first of equals), while no device is shut down, no work is in
  /// flight and no command issued without waiting is still unwaited for
  /// (between the read-back and the upload of a move, nothing is in flight
  /// while the record's old device still holds its bytes), so that what
  /// each device has left is what the model says. The
  /// runner then lets the host manager choose, and the comparisons after
  /// the step (hasNetwork, deviceOf) check its choice.
  bool hostManagerWouldChoose(const std::string &device, const Model &model) {
    if (unwaitedCommands_ || inFlight() != 0)
      return false;
    const std::string *best = nullptr;
    uint64_t most = 0;
    for (const DeviceSpec &spec : scenario_.devices) {
      const ModelDevice &e = model.devices().at(spec.name);
      if (e.shutDown)
        return false;
      uint64_t left = e.available();
      if (!best || left > most) {
        best = &spec.name;
        most = left;
      }
    }
    return best && *best == device;
  }

  /// The callbacks of a command issued through the framework's blocking
  /// helper, which passed one of its own: the helper returns only once that
  /// was called, and the framework reports a second call from the backend
  /// as a background error (compared after the step). None where the step
  /// blocked or a violation stopped it before the operation began.
  static int syncCallbacks(const Observation &obs) {
    return obs.blocked || obs.outcome.kind == Outcome::Kind::Violation ? 0 : 1;
  }

  /// Executes a command of a parallel branch on the calling thread and waits
  /// for its outcome, under \p watchdog (the session's when null): a command
  /// that blocks past the callback timeout is ended and marked blocked. Safe
  /// beside other branches: for the commands a branch may run, dispatch()
  /// only looks tensors, the device and a run's context (made before the
  /// branches start) up, a run's context and tensors belong to its branch,
  /// a destroy empties its tensor's entry without removing it, and the
  /// callback probe is the call's own.
  void executeInBranch(const Command &c, Observation &obs,
                       Watchdog *watchdog = nullptr) {
    Watchdog &dog = watchdog ? *watchdog : watchdog_;
    std::shared_ptr<CallbackProbe> probe;
    auto callback = [&] { return countingCallback(probe); };
    if (progress_) {
      progress_->command.store(&c, std::memory_order_relaxed);
      progress_->advance();
    }
    Error result;
    dog.arm(timeoutMs_ + WatchdogMarginMs);
    try {
      result = dispatch(c, callback, probe);
      ViolationKind kind;
      if (takeCaughtViolation(kind, obs.message))
        obs.outcome = Outcome::violationOf(kind);
    } catch (const ContractViolationError &v) {
      obs.outcome = Outcome::violationOf(v.kind());
      obs.message = v.what();
    } catch (...) {
      // On a branch's thread: reported with the block.
      dog.disarm();
      obs.problem = Difference{
          "the calls of '" + printCommand(c) + "' into the backend",
          "returns (a backend reports a failure as an Error; a hook never "
          "throws)",
          "an exception escaped: " + describeCurrentException()};
      return;
    }
    obs.blocked = dog.disarm();
    if (obs.outcome.kind == Outcome::Kind::Violation)
      return;
    if (probe)
      return awaitPending(probe, obs);
    if (c.sync)
      obs.callbacks = syncCallbacks(obs);
    if (result) {
      obs.outcome = Outcome::error(result.code());
      obs.message = result.message();
    }
  }

  /// Ends what the destroys of a parallel block began, once its branches
  /// have joined: their names go, and their tensors from every context.
  void forgetTensorsDestroyedInBlock() {
    if (destroyedInBlock_.empty())
      return;
    for (const Tensor *t : destroyedInBlock_)
      unbindEverywhere(t);
    destroyedInBlock_.clear();
    std::erase_if(tensors_, [](const auto &entry) { return !entry.second; });
    ++tensorNamesChanges_;
  }

  /// A from-device keep of every record left in Device state on a running
  /// device, through a tensor that covers it whole (the first by name): what
  /// makes device contents comparable after a parallel block.
  std::vector<Command> readBackCommands() {
    std::vector<Command> out;
    std::set<const ResidencyRecord *> seen;
    for (const auto &[name, t] : tensors_) {
      if (t->isEmpty() || !t->coversStorage())
        continue;
      ResidencySnapshot s = t->residencySnapshot();
      if (s.state != ResidencyState::Device || !s.manager ||
          s.manager->isShutDown() || !seen.insert(&t->residency()).second)
        continue;
      Command c;
      c.kind = CommandKind::FromDevice;
      c.target = name;
      c.device = deviceName(s.manager);
      c.release = false;
      out.push_back(std::move(c));
    }
    return out;
  }

  /// The tensors \p names against \p model, contents included, and no
  /// device totals: what a step between sweeps compares, and how the
  /// linearizability search judges one record's history.
  std::optional<Difference>
  compareTensors(const Model &model, const std::vector<std::string> &names) {
    for (const std::string &name : names) {
      const ModelTensor *mt = model.tensor(name);
      auto it = tensors_.find(name);
      if (!mt && it == tensors_.end())
        continue;
      if (!mt || it == tensors_.end())
        return Difference{"tensor '" + name + "'",
                          mt ? "to exist" : "not to exist",
                          mt ? "missing" : "exists"};
      if (auto d = compareTensor(model, name, *mt, *it->second, true))
        return d;
    }
    return std::nullopt;
  }

  /// Background errors of every device, taken once: a check that is run
  /// again (the linearizability search compares the final state with many
  /// candidate models) must not find them gone.
  std::optional<Difference> takeBackgroundErrors() {
    for (size_t i = 0; i < scenario_.devices.size(); ++i) {
      std::vector<Error> errors = devices_[i]->takeBackgroundErrors();
      if (!errors.empty())
        return Difference{"takeBackgroundErrors() of device '" +
                              scenario_.devices[i].name + "'",
                          "none", errors.front().toString()};
    }
    return std::nullopt;
  }

  /// Waits for the callback of a command issued without waiting (or of a
  /// branch's command) and fills \p obs as execute() does for one that
  /// waits; with \p calledBack, the calls that came are all there are.
  void awaitPending(const std::shared_ptr<CallbackProbe> &probe,
                    Observation &obs, bool calledBack = false) {
    obs.callbacks = calledBack
                        ? probe->count()
                        : probe->wait(timeoutMs_, SettledGraceMs,
                                      [this] { return inFlight() == 0; });
    probe->close();
    if (obs.callbacks == 0)
      return;
    std::lock_guard<std::mutex> lock(probe->mutex);
    if (probe->first) {
      obs.outcome = Outcome::error(probe->first.code());
      obs.message = probe->first.message();
    }
  }

  /// Waits until nothing is in flight (unless the last step already missed
  /// its callback, which it reports). A synchronous backend has nothing
  /// legitimately in flight once a call returns.
  void settle() {
    if (!anyAsynchronous())
      return;
    for (int i = 0; i < 200 && !missedCallback_ && inFlight() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  /// Compares device \p spec's accounting (usedMemory, liveAllocations and,
  /// unless it is shut down, availableMemory) with \p e; \p when, appended
  /// to the name of what differs, says at what moment it was asked.
  std::optional<Difference> compareMemory(const DeviceSpec &spec,
                                          const ModelDevice &e,
                                          const std::string &when) {
    DeviceManager &d = device(spec.name);
    auto what = [&](const char *call) {
      return std::string(call) + " of device '" + spec.name + "'" + when;
    };
    if (uint64_t used = d.usedMemory(); used != e.used)
      return Difference{what("usedMemory()"), std::to_string(e.used) + " bytes",
                        std::to_string(used) + " bytes"};
    if (size_t live = d.liveAllocations(); live != e.live)
      return Difference{what("liveAllocations()"), std::to_string(e.live),
                        std::to_string(live)};
    if (e.shutDown)
      return std::nullopt;
    if (uint64_t a = d.availableMemory(); a != e.available())
      return Difference{what("availableMemory()"),
                        std::to_string(e.available()) + " bytes",
                        std::to_string(a) + " bytes"};
    return std::nullopt;
  }

  /// Compares every device's accounting with \p model without waiting for
  /// what is in flight: the caller knows that nothing in flight changes it
  /// when it completes. \p pending names what is.
  std::optional<Difference> compareMemoryInFlight(const Model &model,
                                                  const std::string &pending) {
    for (const DeviceSpec &spec : scenario_.devices)
      if (auto d = compareMemory(spec, model.devices().at(spec.name),
                                 " while " + pending))
        return d;
    return std::nullopt;
  }

  /// Compares everything observable after a step with \p model. On a
  /// sweep: every tensor's emptiness, residency state and device, which
  /// tensors share a record, and host contents where the model knows them
  /// (of small records, of \p named ones, of all when \p allContents);
  /// otherwise the same for the tensors \p named only. Then background
  /// errors and each device's memory. A sweep is linear in the live objects
  /// plus the bytes compared; a step between sweeps costs what it names.
  std::optional<Difference> compareState(const Model &model,
                                         const std::vector<std::string> &named,
                                         bool sweep, bool allContents) {
    settle();
    if (sweep) {
      if (auto d = sweepTensors(model, named, allContents))
        return d;
    } else if (auto d = compareTensors(model, named)) {
      return d;
    }
    for (size_t i = 0; i < scenario_.devices.size(); ++i) {
      const DeviceSpec &spec = scenario_.devices[i];
      DeviceManager &d = *devices_[i];
      std::vector<Error> errors = d.takeBackgroundErrors();
      if (!errors.empty())
        return Difference{"takeBackgroundErrors() of device '" + spec.name +
                              "'",
                          "none", errors.front().toString()};
      const ModelDevice &e = model.devices().at(spec.name);
      if (e.shutDown != d.isShutDown())
        return Difference{"device '" + spec.name + "' shut down",
                          e.shutDown ? "yes" : "no",
                          d.isShutDown() ? "yes" : "no"};
      if (auto d = compareMemory(spec, e, ""))
        return d;
    }
    // What the devices and the host manager say of each network ever added:
    // few names, so every step.
    for (const auto &[network, addedOn] : model.networkDevices()) {
      const ModelDevice &e = model.devices().at(addedOn);
      if (e.shutDown)
        continue;
      bool added = e.networks.count(network) != 0;
      if (device(addedOn).hasNetwork(network) != added)
        return Difference{"hasNetwork(\"" + network + "\") of device '" +
                              addedOn + "'",
                          added ? "true" : "false", added ? "false" : "true"};
      auto placed = model.placement().find(network);
      const DeviceManager *expected =
          placed == model.placement().end() ? nullptr : &device(placed->second);
      if (const DeviceManager *d = host_.deviceOf(network); d != expected)
        return Difference{"HostManager::deviceOf(\"" + network + "\")",
                          expected ? "device '" + placed->second + "'" : "none",
                          d ? "device '" + deviceName(d) + "'" : "none"};
    }
    return std::nullopt;
  }

  /// One tensor against the model: emptiness, state, device and (when
  /// \p contents and the model knows them) host contents. The residency the
  /// backend showed goes to \p seen when given (and when it was read).
  std::optional<Difference>
  compareTensor(const Model &model, const std::string &name,
                const ModelTensor &mt, const Tensor &t, bool contents,
                std::optional<ResidencySnapshot> *seen = nullptr) {
    return compareTensor(name, mt,
                         mt.empty() ? nullptr : &model.records().at(mt.record),
                         t, contents, seen);
  }

  /// The same, given the model's record \p r of \p mt (null when empty).
  std::optional<Difference>
  compareTensor(const std::string &name, const ModelTensor &mt,
                const ModelRecord *r, const Tensor &t, bool contents,
                std::optional<ResidencySnapshot> *seen) {
    if (t.isEmpty() || !r) {
      if (t.isEmpty() != !r)
        return Difference{"residency of tensor '" + name + "'",
                          describeState(!r, r ? r->state : ResidencyState::Host,
                                        r ? r->device : ""),
                          t.isEmpty() ? "empty" : describeBackend(t)};
      return std::nullopt;
    }
    ResidencySnapshot snap = t.residencySnapshot();
    if (seen)
      *seen = snap;
    if (snap.busy || snap.state != r->state ||
        !sameText(deviceName(snap.manager), r->device))
      return Difference{"residency of tensor '" + name + "'",
                        describeState(false, r->state, r->device),
                        describeBackend(t)};
    if (!contents || (r->state != ResidencyState::Host &&
                      r->state != ResidencyState::Mirrored))
      return std::nullopt;
    return contentsDifference(name, mt, *r, t.hostBytes());
  }

  /// Every tensor against the model, in name order, with which tensors
  /// share a record ("shared with the first tensor named on it").
  std::optional<Difference> sweepTensors(const Model &model,
                                         const std::vector<std::string> &named,
                                         bool allContents) {
    namedRecords_.clear();
    for (const std::string &name : named)
      if (const ModelTensor *t = model.tensor(name); t && !t->empty())
        namedRecords_.push_back(t->record);
    // A sweep of every content (the final check, or a parallel block's
    // judgement against candidate models) renews verified readings without
    // a baseline: the next sweep keeps a new baseline from scratch.
    if (allContents)
      quickBaseline_ = false;
    quickSwept_ = !allContents && quickSweep(model);
    if (quickSwept_)
      return std::nullopt;
    std::optional<Difference> unpaired = pairByName(model);
    findRecords(model);
    for (size_t i = 0; i < pairs_.size(); ++i) {
      TensorPair &p = *pairs_[i];
      const std::string &name = *p.name;
      const ModelTensor &mt = *p.expected;
      const ModelRecord *r = p.record;
      const Tensor &t = *p.observed;
      bool named = false;
      for (int record : namedRecords_)
        named = named || record == mt.record;
      bool contents =
          allContents || named || (r && r->bytes <= SmallRecordBytes);
      if (!named && p.observedRecord && r &&
          p.verified.holds(*p.observedRecord, mt.record, *r)) {
        p.snapshot = p.verified.reading();
        if (contents && (r->state == ResidencyState::Host ||
                         r->state == ResidencyState::Mirrored))
          if (auto d = contentsDifference(name, mt, *r, t.hostBytes()))
            return d;
      } else {
        if (auto d = compareTensor(name, mt, r, t, contents, &p.snapshot))
          return d;
        if (p.snapshot && r &&
            p.verified.versionKeptAcrossChange(*p.snapshot, mt.record, *r))
          return Difference{
              "version of the record of tensor '" + name + "'",
              "a new version since it was " +
                  std::string(residencyStateName(p.verified.reading().state)) +
                  " (now " + std::string(residencyStateName(r->state)) + ")",
              "version " + std::to_string(p.snapshot->version) + " kept"};
        if (p.snapshot && r)
          p.verified.remember(*p.snapshot, mt.record, *r);
      }
      if (mt.empty())
        continue;
      size_t modelLeader = modelLeader_[i], backendLeader = backendLeader_[i];
      if (modelLeader != backendLeader ||
          (backendLeader != i &&
           !t.sharesResidencyWith(*pairs_[backendLeader]->observed))) {
        auto with = [&](size_t leader) {
          return leader == i ? std::string("no tensor named before it")
                             : "tensor '" + *pairs_[leader]->name + "'";
        };
        return Difference{"residency record of tensor '" + name + "'",
                          "shared with " + with(modelLeader),
                          "shared with " + with(backendLeader)};
      }
    }
    return unpaired;
  }

  /// One line per tensor and device, for traces.
  std::string describe() {
    std::string s;
    for (const auto &[name, t] : tensors_)
      s += "\n    tensor " + name + ": " +
           (t->isEmpty() ? std::string("empty") : describeBackend(*t));
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceManager &d = device(spec.name);
      s += "\n    device " + spec.name + ": used " +
           std::to_string(d.usedMemory()) + " bytes, " +
           std::to_string(d.liveAllocations()) + " allocation(s)" +
           (d.isShutDown() ? ", shut down" : "");
    }
    return s;
  }

  /// What the transfer \p c showed inside its completion callback (its
  /// record's state, a read-back's contents) against \p model after it;
  /// the check is made once.
  std::optional<Difference> callbackChecks(const Model &model,
                                           const Command &c) {
    std::shared_ptr<CallbackProbe> probe = std::move(transferProbe_);
    if (!probe)
      return std::nullopt;
    std::lock_guard<std::mutex> lock(probe->mutex);
    const std::optional<ResidencyState> &seen = probe->stateAtCallback;
    const ModelRecord *r = model.recordOf(c.target);
    if (seen && r && *seen != r->state)
      return Difference{"residency of tensor '" + c.target +
                            "' inside its completion callback",
                        stateLabel(r->state) + " (updated before the call)",
                        stateLabel(*seen)};
    return probe->contentsAtCallback;
  }

  /// The checks only a backend has (no model counterpart): locations,
  /// stats, background errors, late callbacks, operations in flight. A
  /// \p sweep comes right after a compareState sweep that found no
  /// difference, whose pairing of the tensors it reuses.
  std::optional<Difference> backendChecks(const Model &model, const Command &c,
                                          const std::vector<std::string> &named,
                                          bool sweep) {
    if (auto d = callbackChecks(model, c))
      return d;
    if (int extra = extraCalls_->load())
      return Difference{"completion callbacks of the scenario's steps",
                        "exactly 1 call each",
                        std::to_string(extra) + " call(s) too many"};
    for (size_t i = 0; i < scenario_.devices.size(); ++i) {
      const DeviceSpec &spec = scenario_.devices[i];
      DeviceManager &d = *devices_[i];
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
    // Locations: of every resident record on a sweep (distinct ones for
    // distinct records), of the named tensors' records otherwise.
    auto check = [&](const std::string &name, const Tensor *t,
                     const ModelRecord *r,
                     const std::optional<ResidencySnapshot> &seen)
        -> std::optional<Difference> {
      if (!r || t->isEmpty())
        return std::nullopt;
      ResidencySnapshot s = seen ? *seen : t->residencySnapshot();
      if (s.state != ResidencyState::Device &&
          s.state != ResidencyState::Mirrored)
        return std::nullopt;
      if (s.location.isNull())
        return Difference{"location of tensor '" + name + "'",
                          "a live allocation", "the null location"};
      if (!r->location.empty() && s.location != locations_.at(r->location))
        return Difference{"location of tensor '" + name + "'",
                          "the taken-over location '" + r->location + "' (" +
                              locations_.at(r->location).toString() + ")",
                          s.location.toString()};
      if (sweep)
        located_.push_back(
            {t, &t->residency(), s.manager, s.location.value, &name});
      return std::nullopt;
    };
    if (!sweep) {
      for (const std::string &name : named)
        if (auto it = tensors_.find(name); it != tensors_.end())
          if (auto d = check(name, it->second.get(), model.recordOf(name),
                             std::nullopt))
            return d;
      return std::nullopt;
    }
    // A quick sweep made the location checks of what changed itself.
    if (quickSwept_)
      return std::nullopt;
    // A sweep follows this step's compareState sweep, which paired every
    // tensor of the model with the backend's of the same name and read the
    // residency of each: the locations are those of that reading.
    located_.clear();
    std::optional<Difference> first;
    for (auto &pair : pairs_) {
      TensorPair &p = *pair;
      size_t before = located_.size();
      if (auto d = check(*p.name, p.observed, p.record, p.snapshot)) {
        first = std::move(d);
        break;
      }
      p.seenLocated.reset();
      if (located_.size() > before)
        p.seenLocated = located_.back();
    }
    // Distinct records at distinct locations: the first tensor, in name
    // order, whose location an earlier tensor of another record holds. When
    // the same tensors of the same records are at the same locations as at
    // the last sweep that found no clash, there is none now either.
    if (!first && located_ == unclashed_) {
      keepAsBaseline();
      return std::nullopt;
    }
    unclashed_.clear();
    if (!first)
      unclashed_ = located_;
    std::sort(located_.begin(), located_.end());
    const Located *clash = nullptr, *holder = nullptr;
    for (size_t i = 1, groupStart = 0; i < located_.size(); ++i) {
      if (!located_[i].sameLocation(located_[groupStart])) {
        groupStart = i;
        continue;
      }
      const Located &l = located_[i];
      if (!l.tensor->sharesResidencyWith(*located_[groupStart].tensor) &&
          (!clash || *l.name < *clash->name)) {
        clash = &l;
        holder = &located_[groupStart];
      }
    }
    if (clash) {
      unclashed_.clear();
      return Difference{"location of tensor '" + *clash->name + "'",
                        "distinct from every other record's",
                        "the same as tensor '" + *holder->name + "' (" +
                            DeviceLocation{clash->location}.toString() + ")"};
    }
    if (!first)
      keepAsBaseline();
    return first;
  }

  /// Frees the remaining raw locations and destroys every tensor.
  void teardown(const Model &model) {
    transferProbe_ = nullptr;
    for (const auto &[name, l] : model.locations())
      if (l.state == ModelLocation::State::Live)
        (void)device(l.device).releaseDeviceMemory(locations_.at(name));
    contexts_.clear();
    tensors_.clear();
    ++tensorNamesChanges_;
  }

  /// Physical memory must be back at its baseline after teardown, and none
  /// in use on a device shut down (all its memory is freed, §6).
  std::optional<Difference> physicalChecks() {
    for (const DeviceSpec &spec : scenario_.devices) {
      DeviceManager &d = device(spec.name);
      if (d.isShutDown()) {
        if (uint64_t physical = d.physicalMemoryInUse())
          return Difference{"physicalMemoryInUse() of device '" + spec.name +
                                "', shut down, after teardown",
                            "0 bytes (a shutdown frees all device memory)",
                            std::to_string(physical) + " bytes"};
        continue;
      }
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
  /// A resident tensor's location, as a sweep's backend checks saw it.
  struct Located {
    const Tensor *tensor;
    /// Its residency record.
    const void *record;
    const DeviceManager *manager;
    uint64_t location;
    const std::string *name;
    bool sameLocation(const Located &o) const {
      return manager == o.manager && location == o.location;
    }
    bool operator==(const Located &o) const {
      return tensor == o.tensor && record == o.record && manager == o.manager &&
             location == o.location && name == o.name;
    }
    /// By location, then by name.
    bool operator<(const Located &o) const {
      if (manager != o.manager)
        return std::less<>()(manager, o.manager);
      if (location != o.location)
        return location < o.location;
      return *name < *o.name;
    }
  };
  /// A tensor of the model and the backend's tensor of the same name.
  struct TensorPair {
    const std::string *name = nullptr;
    const ModelTensor *expected = nullptr;
    const Tensor *observed = nullptr;
    /// The backend's entry of that name, which outlives the Tensor object
    /// it holds (a create or a move puts a new one there).
    const std::unique_ptr<Tensor> *slot = nullptr;
    /// The model's record of the tensor (findRecords) and its number.
    const ModelRecord *record = nullptr;
    int recordId = -1;
    /// Its residency as the sweep read it (a tensor the model holds a
    /// record for and the backend's is not empty).
    std::optional<ResidencySnapshot> snapshot;
    /// The backend's record of the tensor (null when either side is
    /// empty), found once per sweep.
    const ResidencyRecord *observedRecord = nullptr;
    /// The last reading of the record that matched the model, which a
    /// sweep reuses while it holds instead of reading the record.
    VerifiedReading verified;
    /// What the last sweep that found no difference saw of the pair, the
    /// baseline of a quick sweep: the backend's tensor object and record
    /// (null when empty), the model's record number (-1 when empty), the
    /// name of the raw location the model record took over, and the
    /// location the pair added to the distinct-locations check (none when
    /// not resident).
    const Tensor *seenTensor = nullptr;
    const ResidencyRecord *seenRecord = nullptr;
    int seenRecordId = -1;
    std::string seenTakenOver;
    std::optional<Located> seenLocated;
    /// The pair's name, kept for carrying the baseline over when the pairs
    /// are built again (name points into the model, which may have dropped
    /// it by then).
    std::string seenName;
    /// Set by a quick sweep: the backend's record now, and whether the
    /// tensor object, the backend record or the model record differ from
    /// the baseline's.
    const ResidencyRecord *current = nullptr;
    bool rekeyed = false;
  };
  /// A key of pairs_[position] (0: none) and the position.
  struct Keyed {
    uintptr_t key;
    size_t position;
    bool operator<(const Keyed &o) const {
      return key != o.key ? key < o.key : position < o.position;
    }
  };

  /// The backend's record of \p t, null when it is empty.
  static const ResidencyRecord *recordOf(const Tensor &t) {
    return t.isEmpty() ? nullptr : &t.residency();
  }

  /// Makes what every pair shows now, after a sweep that found no
  /// difference, the baseline of the next quick sweep.
  void keepAsBaseline() {
    for (auto &pair : pairs_) {
      TensorPair &p = *pair;
      const ModelTensor &mt = *p.expected;
      p.seenTensor = p.observed;
      p.seenRecord = recordOf(*p.observed);
      p.seenRecordId = mt.empty() ? -1 : mt.record;
      keepTakenOver(p);
    }
    quickBaseline_ = true;
  }

  /// Keeps the name of the raw location the model record of \p p took
  /// over in the baseline. The name alone: a scenario allocates a name
  /// once (validateScenario), so where it points never changes after.
  static void keepTakenOver(TensorPair &p) {
    static const std::string none;
    const std::string &takenOver = p.record ? p.record->location : none;
    if (!sameText(p.seenTakenOver, takenOver))
      p.seenTakenOver = takenOver;
  }

  /// A sweep at the cost of what changed since the baseline (the last sweep
  /// that found no difference). A pair whose tensor object, backend record
  /// and model record number are those of the baseline (not rekeyed), whose
  /// record kept its version and whose model record kept its state, device
  /// and taken-over location shows what it showed then: its contents are
  /// compared where a sweep compares them. The others (a tensor the step
  /// created, moved or named, a record it changed) are compared whole,
  /// their locations checked and each new location against every other
  /// record's, and a rekeyed pair shares a record with exactly the tensors
  /// the model says it shares one with (the others still share as they did
  /// at the baseline). True when that found no difference; false (having
  /// reported nothing) when anything differs, for the full sweep to find
  /// and name the first difference.
  bool quickSweep(const Model &model) {
    if (!quickBaseline_)
      return false;
    // Names added or removed: pair again, the baseline kept by name.
    if ((pairedModelStamp_ != model.tensorNamesStamp() ||
         pairedChanges_ != tensorNamesChanges_) &&
        pairByName(model))
      return false;
    // The model's records are found again after any was added or removed,
    // or when the model is another object (a stamp names one object): a
    // pair's record is then an entry of another map, or of none.
    bool recordsKept = recordsStamp_ == model.recordsStamp();
    for (auto &pair : pairs_) {
      TensorPair &p = *pair;
      const Tensor *t = p.slot->get();
      const ModelTensor &mt = *p.expected;
      int id = mt.empty() ? -1 : mt.record;
      if (id < 0) {
        p.record = nullptr;
      } else if (!recordsKept || id != p.recordId || !p.record) {
        p.record = &model.records().at(id);
        p.recordId = id;
      }
      p.observed = t;
      p.current = recordOf(*t);
      p.rekeyed = t != p.seenTensor || id != p.seenRecordId ||
                  p.current != p.seenRecord;
    }
    recordsStamp_ = model.recordsStamp();
    changed_.clear();
    for (size_t i = 0; i < pairs_.size(); ++i) {
      TensorPair &p = *pairs_[i];
      const ModelTensor &mt = *p.expected;
      const Tensor &t = *p.observed;
      if (mt.empty()) {
        if (p.rekeyed) {
          if (!t.isEmpty())
            return false;
          p.seenLocated.reset();
          changed_.push_back(i);
        }
        continue;
      }
      const ModelRecord &r = *p.record;
      bool named = std::find(namedRecords_.begin(), namedRecords_.end(),
                             mt.record) != namedRecords_.end();
      bool contents = named || r.bytes <= SmallRecordBytes;
      if (!p.rekeyed && !named && p.current &&
          p.verified.holds(*p.current, mt.record, r) &&
          sameText(p.seenTakenOver, r.location)) {
        if (contents &&
            (r.state == ResidencyState::Host ||
             r.state == ResidencyState::Mirrored) &&
            contentsDifference(*p.name, mt, r, t.hostBytes()))
          return false;
        continue;
      }
      std::optional<ResidencySnapshot> seen;
      if (compareTensor(*p.name, mt, &r, t, contents, &seen))
        return false;
      changed_.push_back(i);
      if (!seen) {
        p.seenLocated.reset();
        continue;
      }
      if (p.verified.versionKeptAcrossChange(*seen, mt.record, r))
        return false;
      p.verified.remember(*seen, mt.record, r);
      std::optional<Located> located;
      if (seen->state == ResidencyState::Device ||
          seen->state == ResidencyState::Mirrored) {
        if (seen->location.isNull() ||
            (!r.location.empty() &&
             seen->location != locations_.at(r.location)))
          return false;
        located =
            Located{&t, p.current, seen->manager, seen->location.value, p.name};
      }
      p.seenLocated = located;
    }
    for (size_t i : changed_) {
      const TensorPair &c = *pairs_[i];
      // Sharing: the same model record exactly where the same backend one.
      if (c.rekeyed)
        for (const auto &pair : pairs_) {
          const TensorPair &other = *pair;
          if (&other == &c)
            continue;
          bool modelShares = !c.expected->empty() &&
                             c.expected->record == other.expected->record;
          bool backendShares = c.current && c.current == other.current;
          if (modelShares != backendShares)
            return false;
        }
      // Pairs that kept their locations held distinct ones at the
      // baseline: a clash now involves one that changed.
      const std::optional<Located> &l = c.seenLocated;
      if (l)
        for (const auto &other : pairs_)
          if (other->seenLocated && other->seenLocated->sameLocation(*l) &&
              other->seenLocated->record != l->record)
            return false;
    }
    for (size_t i : changed_) {
      TensorPair &p = *pairs_[i];
      p.seenTensor = p.observed;
      p.seenRecord = p.current;
      p.seenRecordId = p.expected->empty() ? -1 : p.expected->record;
      keepTakenOver(p);
    }
    return true;
  }

  /// Pairs every tensor of \p model with the backend's of the same name, in
  /// name order, up to the first name only one side has (returned). The
  /// pairing is kept while neither side adds or removes a name (the model's
  /// stamp and this session's count of such changes), so that a sweep
  /// between such steps does not walk both maps and compare their names.
  std::optional<Difference> pairByName(const Model &model) {
    if (pairedModelStamp_ == model.tensorNamesStamp() &&
        pairedChanges_ == tensorNamesChanges_) {
      for (auto &pair : pairs_) {
        TensorPair &p = *pair;
        p.observed = p.slot->get();
        p.snapshot.reset();
      }
      return std::nullopt;
    }
    pairedModelStamp_ = 0;
    // The pair of a name both the old and the new pairs have moves over
    // whole (its verified reading and its baseline); the old pairs stay in
    // earlier_, where a new name finds the verified reading of a record
    // version it shows (a reading belongs to a version, not to a name).
    std::swap(pairs_, earlier_);
    pairs_.clear();
    newcomers_.clear();
    size_t before = 0;
    auto expected = model.tensors().begin();
    auto observed = tensors_.begin();
    for (; expected != model.tensors().end() || observed != tensors_.end();
         ++expected, ++observed) {
      // Equal names, the common case, take one comparison.
      if (expected != model.tensors().end() && observed != tensors_.end() &&
          sameText(expected->first, observed->first)) {
        while (before < earlier_.size() &&
               earlier_[before]->seenName < expected->first)
          ++before;
        if (before < earlier_.size() &&
            sameText(earlier_[before]->seenName, expected->first)) {
          pairs_.push_back(std::move(earlier_[before++]));
        } else {
          pairs_.push_back(std::make_unique<TensorPair>());
          pairs_.back()->seenName = expected->first;
          newcomers_.push_back(pairs_.size() - 1);
        }
        TensorPair &p = *pairs_.back();
        p.name = &expected->first;
        p.expected = &expected->second;
        p.observed = observed->second.get();
        p.slot = &observed->second;
        p.snapshot.reset();
        continue;
      }
      if (observed == tensors_.end() || (expected != model.tensors().end() &&
                                         expected->first < observed->first))
        return Difference{"tensor '" + expected->first + "'", "to exist",
                          "missing"};
      return Difference{"tensor '" + observed->first + "'", "not to exist",
                        "exists"};
    }
    if (!newcomers_.empty()) {
      carried_.clear();
      for (size_t i = 0; i < earlier_.size(); ++i)
        if (earlier_[i])
          if (uint64_t version = earlier_[i]->verified.version())
            carried_.push_back({version, i});
      std::sort(carried_.begin(), carried_.end());
      for (size_t i : newcomers_) {
        TensorPair &p = *pairs_[i];
        if (carried_.empty() || p.observed->isEmpty())
          continue;
        uint64_t version = p.observed->residency().version();
        auto it = std::lower_bound(carried_.begin(), carried_.end(), version,
                                   [](const std::pair<uint64_t, size_t> &v,
                                      uint64_t x) { return v.first < x; });
        if (it != carried_.end() && it->first == version)
          p.verified = earlier_[it->second]->verified;
      }
    }
    pairedModelStamp_ = model.tensorNamesStamp();
    pairedChanges_ = tensorNamesChanges_;
    return std::nullopt;
  }

  /// Sets, for every pair, the model's record (null for an empty tensor;
  /// looked up again only for a pair whose record number changed, or when
  /// the model added or removed a record since the last call), the
  /// backend's record (null when either side is empty), and the first
  /// position holding the same record on each side (the leaders), in one
  /// pass. The leaders are computed again only when a record changed.
  void findRecords(const Model &model) {
    bool kept = recordsStamp_ == model.recordsStamp();
    size_t n = pairs_.size();
    bool sameModelKeys = modelKeys_.size() == n && modelLeader_.size() == n;
    bool sameBackendKeys =
        backendKeys_.size() == n && backendLeader_.size() == n;
    modelKeys_.resize(n);
    backendKeys_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      TensorPair &p = *pairs_[i];
      const ModelTensor &mt = *p.expected;
      if (mt.empty()) {
        p.record = nullptr;
        p.observedRecord = nullptr;
      } else {
        if (!kept || !p.record || p.recordId != mt.record) {
          p.record = &model.records().at(mt.record);
          p.recordId = mt.record;
        }
        p.observedRecord =
            p.observed->isEmpty() ? nullptr : &p.observed->residency();
      }
      uintptr_t modelKey = mt.empty() ? 0 : uintptr_t(mt.record) + 1;
      uintptr_t backendKey = uintptr_t(p.observedRecord);
      sameModelKeys = sameModelKeys && modelKeys_[i] == modelKey;
      sameBackendKeys = sameBackendKeys && backendKeys_[i] == backendKey;
      modelKeys_[i] = modelKey;
      backendKeys_[i] = backendKey;
    }
    recordsStamp_ = model.recordsStamp();
    if (!sameModelKeys)
      leaders(modelLeader_, modelKeys_);
    if (!sameBackendKeys)
      leaders(backendLeader_, backendKeys_);
  }

  /// Sets \p leader[i], for every i whose \p keys[i] is not 0, to the first
  /// position with the same key (sorting, so that a sweep stays O(n log n)
  /// without a map built per step).
  void leaders(std::vector<size_t> &leader,
               const std::vector<uintptr_t> &keys) {
    leader.assign(keys.size(), SIZE_MAX);
    keyed_.clear();
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i])
        keyed_.push_back({keys[i], i});
    std::sort(keyed_.begin(), keyed_.end());
    for (size_t i = 0; i < keyed_.size(); ++i)
      leader[keyed_[i].position] = i > 0 && keyed_[i - 1].key == keyed_[i].key
                                       ? leader[keyed_[i - 1].position]
                                       : keyed_[i].position;
  }

  /// How long a callback may trail the end of its operation on another
  /// thread before it counts as missing.
  static constexpr unsigned SettledGraceMs = 250;
  /// How much longer than the callback timeout a command may block.
  static constexpr unsigned WatchdogMarginMs = 1000;

  /// Ends whatever blocks: shutting a device down completes each of its
  /// pending operations with DeviceLost.
  void shutDownDevices() {
    for (const auto &[name, index] : deviceIndex_)
      host_.device(index).shutdown();
  }

  size_t inFlight() {
    size_t n = 0;
    for (DeviceManager *d : devices_)
      n += d->operationsInFlight();
    return n;
  }

  Tensor &tensor(const std::string &name) { return *tensors_.at(name); }

  /// The entry of the tensor named \p name, added (null) when absent.
  std::unique_ptr<Tensor> &tensorSlot(const std::string &name) {
    auto [it, inserted] = tensors_.try_emplace(name);
    if (inserted)
      ++tensorNamesChanges_;
    return it->second;
  }

  /// The scenario's name of \p manager: a scenario has a few devices, so a
  /// scan of them costs less than a lookup in a map.
  const std::string &deviceName(const DeviceManager *manager) const {
    static const std::string none, unknown = "an unknown device";
    if (!manager)
      return none;
    for (size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i] == manager)
        return scenario_.devices[i].name;
    return unknown;
  }

  /// A non-empty tensor's residency as the backend shows it.
  std::string describeBackend(const Tensor &t) const {
    ResidencySnapshot s = t.residencySnapshot();
    // Host access would wait for an operation that never completed.
    if (s.busy)
      return stateLabel(s.state) +
             " (busy: an operation on it never completed)";
    return describeState(false, s.state, deviceName(s.manager));
  }

  /// Unbinds \p t from every run's context (a run binds its placeholders
  /// anew, so only the pointer is compared: \p t may be gone).
  void unbindEverywhere(const Tensor *t) {
    for (auto &[net, ctx] : contexts_) {
      std::vector<std::string> drop;
      for (const auto &[ph, bound] : ctx->bindings().all())
        if (bound == t)
          drop.push_back(ph);
      for (const std::string &ph : drop)
        ctx->bindings().unbind(ph);
    }
  }

  /// The tensor of create \p c with pinned=D: storage from D's pinned
  /// memory (the contract is the same for every kind of storage, so the
  /// model does not see it). Null, for pageable storage, where D has none
  /// (NotSupported) or is shut down (DeviceLost); any other refusal is the
  /// device's failure, kept in storageProblem_ for the step to report.
  std::unique_ptr<Tensor> pinnedTensor(const Command &c) {
    DeviceManager &d = device(c.device);
    auto refused = [&](const std::string &observed) {
      storageProblem_ = Difference{
          "pinned storage of tensor '" + c.target + "' from device '" +
              c.device + "'",
          "pinned memory, or none (NotSupported where the backend has none, "
          "DeviceLost once the device is shut down)",
          observed};
      return nullptr;
    };
    Expected<std::shared_ptr<HostMemory>> memory = d.pinnedHostMemory();
    if (!memory) {
      Error e = memory.takeError();
      if (e.code() != ErrorCode::NotSupported &&
          (e.code() != ErrorCode::DeviceLost || !d.isShutDown()))
        return refused("pinnedHostMemory(): " + e.toString());
      storageLabel_ = "create-pinned-fell-back-to-pageable";
      return nullptr;
    }
    Expected<Tensor> pinned =
        Tensor::create(Type{c.elemKind, c.dims}, c.target, *memory);
    if (!pinned) {
      // A type the contract refuses is InvalidArgument here; the step then
      // makes the tensor without pinned storage, whose violation the model
      // expects.
      Error e = pinned.takeError();
      if (e.code() == ErrorCode::InvalidArgument &&
          !validDims(c.dims, c.elemKind)) {
        storageLabel_ = "create-pinned-refused-type";
        return nullptr;
      }
      return refused("Tensor::create with its pinnedHostMemory(): " +
                     e.toString());
    }
    if (!pinned->isPinned())
      return refused("a tensor whose isPinned() is false");
    storageLabel_ = "create-pinned";
    return std::make_unique<Tensor>(std::move(*pinned));
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
      tensorSlot(c.target) = std::make_unique<Tensor>();
      std::unique_ptr<Tensor> t;
      if (!c.device.empty())
        t = pinnedTensor(c);
      if (t) {
        if (c.pattern)
          fillPattern(c.elemKind, c.pattern, 0,
                      writable(t->mutableHostBytes()));
      } else {
        // fillPattern writes every byte: storage that is not zeroed first.
        t = std::make_unique<Tensor>(
            Type{c.elemKind, c.dims}, c.target, [&](std::span<std::byte> b) {
              fillPattern(c.elemKind, c.pattern, 0, writable(b));
            });
      }
      tensorSlot(c.target) = std::move(t);
      return Error::success();
    }
    case CommandKind::View: {
      tensorSlot(c.target) = std::make_unique<Tensor>();
      Tensor v = tensor(c.source).getUnowned(c.dims, c.offset);
      v.setName(c.target);
      *tensorSlot(c.target) = std::move(v);
      return Error::success();
    }
    case CommandKind::Clone: {
      tensorSlot(c.target) = std::make_unique<Tensor>();
      Tensor copy = tensor(c.source).clone();
      copy.setName(c.target);
      *tensorSlot(c.target) = std::move(copy);
      return Error::success();
    }
    case CommandKind::MoveConstruct:
      tensorSlot(c.target) =
          std::make_unique<Tensor>(std::move(tensor(c.source)));
      return Error::success();
    case CommandKind::MoveAssign:
      selfMoveAssign(tensor(c.target), tensor(c.source));
      return Error::success();
    case CommandKind::SelfMove:
      selfMoveAssign(tensor(c.target), tensor(c.target));
      return Error::success();
    case CommandKind::Destroy:
      if (c.branch) {
        // Beside other branches, which look their names up: the entry stays,
        // empty, until the block ends (forgetTensorsDestroyedInBlock). The
        // tensor itself goes now, its host storage with it.
        std::unique_ptr<Tensor> gone = std::move(tensors_.at(c.target));
        {
          std::lock_guard<std::mutex> lock(destroyedInBlockMutex_);
          destroyedInBlock_.push_back(gone.get());
        }
        return Error::success();
      }
      unbindEverywhere(tensors_.at(c.target).get());
      if (tensors_.erase(c.target))
        ++tensorNamesChanges_;
      return Error::success();
    case CommandKind::ToDevice: {
      std::optional<DeviceLocation> location;
      if (!c.location.empty())
        location = locations_[c.location];
      DeviceManager &d = device(c.device);
      Tensor &t = tensor(c.target);
      if (c.sync) {
        Error e;
        callCatchingViolation(
            [&] { e = transferToDeviceSync(d, t, location); });
        return e;
      }
      CompletionCallback done = callback();
      callCatchingViolation(
          [&] { d.transferToDevice(t, location, std::move(done)); });
      return Error::success();
    }
    case CommandKind::FromDevice: {
      DeviceManager &d = device(c.device);
      Tensor &t = tensor(c.target);
      if (c.sync) {
        Error e;
        callCatchingViolation(
            [&] { e = transferFromDeviceSync(d, t, c.release); });
        return e;
      }
      CompletionCallback done = callback();
      callCatchingViolation(
          [&] { d.transferFromDevice(t, c.release, std::move(done)); });
      return Error::success();
    }
    case CommandKind::Release:
    case CommandKind::DoubleRelease: {
      DeviceManager &d = device(c.device);
      Tensor &t = tensor(c.target);
      Error e;
      int releases = c.kind == CommandKind::DoubleRelease ? 2 : 1;
      for (int i = 0; i < releases && !e; ++i)
        if (callCatchingViolation([&] { e = d.releaseDeviceTensor(t); }))
          break;
      return e;
    }
    case CommandKind::Read: {
      Tensor &t = tensor(c.target);
      callCatchingViolation([&] { (void)t.hostBytes(); });
      return Error::success();
    }
    case CommandKind::Write: {
      Tensor &t = tensor(c.target);
      std::span<std::byte> bytes;
      if (!callCatchingViolation([&] { bytes = t.mutableHostBytes(); }))
        fillPattern(t.elemKind(), c.pattern, 0, writable(bytes));
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
      return host_.addNetwork(
          networkFunction(c),
          hostManagerPlaces_ ? -1 : int(deviceIndex_.at(c.device)));
    case CommandKind::Run: {
      ExecutionContext &ctx = context(c.target);
      std::vector<std::string> bound;
      for (const auto &[ph, t] : ctx.bindings().all())
        bound.push_back(ph);
      for (const std::string &ph : bound)
        ctx.bindings().unbind(ph);
      for (const auto &[ph, t] : c.bindings)
        ctx.bindings().bind(ph, tensor(t));
      DeviceManager &d = device(networkDevice_.at(c.target));
      if (c.sync) {
        // Through the host manager where it places the network; a network
        // it forgot (evicted, or refused when added) is still run on the
        // device the scenario names, whose answer the model predicts.
        Error e;
        callCatchingViolation([&] {
          e = host_.deviceOf(c.target) == &d
                  ? host_.runNetwork(c.target, ctx)
                  : runFunctionSync(d, c.target, ctx);
        });
        return e;
      }
      d.runFunction(c.target, ctx, callback());
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
  NameMap<size_t> deviceIndex_;
  std::vector<Located> located_;
  /// located_ as the last sweep that found no clash built it (before
  /// sorting).
  std::vector<Located> unclashed_;
  /// Scratch space of the sweeps, kept between steps so that a step
  /// allocates nothing once they have grown.
  std::vector<int> namedRecords_;
  std::vector<std::unique_ptr<TensorPair>> pairs_;
  /// The pairs before the last rebuild, and the versions of their verified
  /// readings with their positions there, in version order.
  std::vector<std::unique_ptr<TensorPair>> earlier_;
  std::vector<std::pair<uint64_t, size_t>> carried_;
  std::vector<Keyed> keyed_;
  /// The positions of the pairs the last pairing found no old pair of the
  /// same name for.
  std::vector<size_t> newcomers_;
  /// The positions of the pairs a quick sweep found changed.
  std::vector<size_t> changed_;
  /// Every pair holds the baseline of a quick sweep (keepAsBaseline).
  bool quickBaseline_ = false;
  /// This step's sweep was a quick one, which made the location checks.
  bool quickSwept_ = false;
  std::vector<size_t> modelLeader_, backendLeader_;
  std::vector<uintptr_t> modelKeys_, backendKeys_;
  /// The records stamp of the model pairs_ found its records in
  /// (findRecords), and the names stamp of the one it was built from
  /// (pairByName; 0: none). A stamp names one model object.
  uint64_t recordsStamp_ = 0;
  uint64_t pairedModelStamp_ = 0;
  uint64_t pairedChanges_ = 0;
  /// Counts the names added to and removed from tensors_.
  uint64_t tensorNamesChanges_ = 0;
  /// The devices of scenario_.devices, in its order, once set up.
  std::vector<DeviceManager *> devices_;
  bool anyAsynchronous_ = false;
  std::map<std::string, uint64_t> physicalBaseline_;
  NameMap<std::unique_ptr<Tensor>> tensors_;
  /// The tensors the branches of the running parallel block destroyed.
  std::mutex destroyedInBlockMutex_;
  std::vector<const Tensor *> destroyedInBlock_;
  /// Raw locations by name, hashed: a sweep looks up the location of every
  /// resident record that took one over.
  std::unordered_map<std::string, DeviceLocation> locations_;
  std::map<std::string, std::unique_ptr<ExecutionContext>> contexts_;
  std::map<std::string, std::string> networkDevice_;
  std::shared_ptr<std::atomic<int>> extraCalls_ =
      std::make_shared<std::atomic<int>>(0);
  /// The probe of the last step's transfer, if it was one.
  std::shared_ptr<CallbackProbe> transferProbe_;
  /// The add-network being executed goes to the device the host manager
  /// chooses (hostManagerWouldChoose).
  bool hostManagerPlaces_ = false;
  /// Commands issued without waiting have not been waited for yet
  /// (noteUnwaitedCommands).
  bool unwaitedCommands_ = false;
  /// True when the last step's operation did not call back.
  bool missedCallback_ = false;
  /// What dispatch() could not set up for a create with pinned=D, and the
  /// storage it gave (Observation::problem, Observation::storageLabel).
  std::optional<Difference> storageProblem_;
  const char *storageLabel_ = nullptr;
  /// The devices and kinds of operation whose callback asked already, and
  /// the questions asked (AccountingQuestion).
  bool askDevicesFromCallbacks_;
  /// The command the last step's callback issues, or null.
  std::shared_ptr<Continuation> continuation_;
  /// Every continuation a step made: the session waits for the calls its
  /// callbacks claimed before its tensors go.
  std::vector<std::shared_ptr<Continuation>> continuations_;
  std::set<std::pair<std::string, CommandKind>> askedKinds_;
  std::mutex questionsMutex_;
  std::vector<std::shared_ptr<AccountingQuestion>> questions_;
  /// Declared last: it stops (and joins) before the devices go.
  Watchdog watchdog_{[this] { shutDownDevices(); }};
  Progress *progress_ = nullptr;
};

std::string traceLine(size_t step, const std::string &command,
                      const Observation &obs, Session &session) {
  std::string s = "step " + std::to_string(step) + ": " + command + "  => " +
                  obs.outcome.toString();
  if (!obs.message.empty())
    s += " (" + obs.message + ")";
  if (obs.callbacks)
    s += " [" + std::to_string(obs.callbacks) + " callback]";
  if (obs.pending)
    s += " [issued, not waited for]";
  return s + session.describe();
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
  Model model(
      scenario.devices,
      [&](const DeviceSpec &spec) { return probedDeviceTraits(backend, spec); },
      /*trackContents=*/false);
  // A parallel branch's outcome depends on the interleaving: not written.
  // Where the model fails, nothing after is known; running the scenario
  // reports that failure.
  try {
    for (Command &c : out.commands)
      c.expect = c.branch ? Outcome::ok() : model.apply(c).outcome;
  } catch (const ModelFailure &) {
  }
  return out;
}

Scenario wellFormedScenario(const Scenario &scenario,
                            const std::string &backend) {
  Scenario out;
  out.devices = scenario.devices;
  Model model(
      scenario.devices,
      [&](const DeviceSpec &spec) { return probedDeviceTraits(backend, spec); },
      /*trackContents=*/false);
  for (size_t i = 0; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    if (!commandFitsModel(c, model))
      continue;
    out.commands.push_back(c);
    // Issued from the callback of a command that is gone or changed: issued
    // as the next command instead.
    if (c.inCallback &&
        !inCallbackProblem(out.commands, out.commands.size() - 1).empty())
      out.commands.back().inCallback = false;
    // Branch commands create and destroy no name: the ones after them fit
    // whatever order they run in.
    try {
      out.commands.back().expect =
          c.branch ? Outcome::ok() : model.apply(c).outcome;
    } catch (const ModelFailure &) {
      // Nothing after is known: the rest stays as it is, for running the
      // scenario to report the model's failure.
      out.commands.insert(out.commands.end(),
                          scenario.commands.begin() + ptrdiff_t(i) + 1,
                          scenario.commands.end());
      break;
    }
  }
  return out;
}

namespace {

/// How often each residency transition happened: (state before, command,
/// state after or none when the record was freed). Kept as numbers while a
/// scenario runs; named once at its end (RunResult::transitions).
using TransitionCounts = std::map<
    std::tuple<ResidencyState, CommandKind, std::optional<ResidencyState>>,
    int>;

/// How often each coverage label was reached, counted by the identity of
/// its parts while a scenario runs (a step reaches several, and hashing a
/// label's text would cost more than the rest of counting it), and merged by
/// text once at its end (RunResult::labels).
struct LabelIdentityHash {
  size_t operator()(const CoverageLabel &l) const { return l.identityHash(); }
};
struct SameLabelParts {
  bool operator()(const CoverageLabel &a, const CoverageLabel &b) const {
    return a.sameParts(b);
  }
};
using LabelCounts =
    std::unordered_map<CoverageLabel, int, LabelIdentityHash, SameLabelParts>;

/// One command of a parallel branch as it ran: when it was invoked and when
/// it returned (on one clock for all branches), and what it did.
struct BranchEvent {
  const Command *command = nullptr;
  uint64_t invoked = 0, returned = 0;
  Observation observed;
};

/// The history of a parallel block side by side: a column per branch, a
/// line per command in order of invocation, each command in its branch's
/// column with its outcome, and the clock ticks at which it was invoked and
/// returned.
std::string describeHistory(const std::vector<std::vector<BranchEvent>> &h) {
  struct Line {
    const BranchEvent *event;
    size_t branch;
  };
  std::vector<Line> lines;
  std::vector<size_t> width(h.size(), 0);
  auto text = [](const BranchEvent &e) {
    std::string t = printCommand(*e.command);
    // The branch is the column: drop the "|N " the printer writes.
    if (t.size() > 3 && t[0] == '|')
      t = t.substr(3);
    return t + " => " + e.observed.outcome.toString();
  };
  for (size_t b = 0; b < h.size(); ++b)
    for (const BranchEvent &e : h[b]) {
      lines.push_back({&e, b});
      width[b] = std::max(width[b], text(e).size());
    }
  std::sort(lines.begin(), lines.end(), [](const Line &a, const Line &b) {
    return a.event->invoked < b.event->invoked;
  });
  auto pad = [](std::string t, size_t n) {
    t.resize(std::max(t.size(), n), ' ');
    return t;
  };
  std::string out = "\n    " + pad("ticks", 9);
  for (size_t b = 0; b < h.size(); ++b)
    out += "  " +
           pad("branch " +
                   std::to_string(h[b].empty()
                                      ? b + 1
                                      : size_t(h[b].front().command->branch)),
               width[b]);
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  for (const Line &l : lines) {
    std::string row = "\n    " + pad(std::to_string(l.event->invoked) + "-" +
                                         std::to_string(l.event->returned),
                                     9);
    for (size_t b = 0; b < h.size(); ++b)
      row += "  " + pad(b == l.branch ? text(*l.event) : "", width[b]);
    while (!row.empty() && row.back() == ' ')
      row.pop_back();
    out += row;
  }
  return out;
}

/// Searches for a linearization of a parallel block's history: an order of
/// its commands that keeps each branch's order and puts no command before
/// one that returned before it was invoked, under which the model gives
/// every observed outcome and callback count and ends in the state the
/// session shows. Depth-first over the commands that may come next, each on
/// a copy of the model; gives up (Unknown) at a deadline.
class Linearizer {
public:
  enum class Verdict { Linearizable, NotLinearizable, Unknown };

  Linearizer(const std::vector<std::vector<BranchEvent>> &history,
             const std::function<bool(Model &)> &finalStateMatches,
             std::chrono::steady_clock::time_point deadline)
      : history_(history), matches_(finalStateMatches), deadline_(deadline),
        next_(history.size(), 0) {
    for (const auto &branch : history)
      total_ += branch.size();
  }

  Verdict run(const Model &start) {
    Model m = start;
    if (search(m))
      return Verdict::Linearizable;
    return timedOut_ ? Verdict::Unknown : Verdict::NotLinearizable;
  }

  /// The model after the linearization found.
  const Model &model() const { return *found_; }
  /// The longest prefix of commands the search could order (in order).
  const std::vector<const BranchEvent *> &longestPrefix() const {
    return longest_;
  }
  size_t explored() const { return explored_; }

private:
  bool search(const Model &m) {
    if (order_.size() == total_) {
      // The check may take the model further (the read-back that makes
      // device contents comparable): the model found is the one it leaves.
      Model final = m;
      if (!matches_(final))
        return false;
      found_ = std::move(final);
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline_) {
      timedOut_ = true;
      return false;
    }
    // A command may come next unless another one returned before it was
    // invoked.
    uint64_t firstReturn = UINT64_MAX;
    for (size_t b = 0; b < history_.size(); ++b)
      if (next_[b] < history_[b].size())
        firstReturn = std::min(firstReturn, history_[b][next_[b]].returned);
    for (size_t b = 0; b < history_.size() && !timedOut_; ++b) {
      if (next_[b] >= history_[b].size())
        continue;
      const BranchEvent &e = history_[b][next_[b]];
      if (e.invoked > firstReturn)
        continue;
      ++explored_;
      Model copy = m;
      if (!explains(copy.apply(*e.command), e)) {
        if (!refusedBesideARun(m, e, b))
          continue;
        copy = m;
        if (!explains(applyRefused(copy, e), e))
          continue;
      }
      order_.push_back(&e);
      ++next_[b];
      if (order_.size() > longest_.size())
        longest_ = order_;
      bool ok = search(copy);
      --next_[b];
      order_.pop_back();
      if (ok)
        return true;
    }
    return false;
  }

  static bool explains(const ModelStep &predicted, const BranchEvent &e) {
    return predicted.outcome == e.observed.outcome &&
           predicted.callbacks == e.observed.callbacks;
  }

  /// The device on which \p c allocates, or "" for a command that does not.
  static std::string allocatingDevice(const Model &m, const Command &c) {
    switch (c.kind) {
    case CommandKind::ToDevice:
    case CommandKind::Alloc:
      return c.device;
    case CommandKind::Run: {
      auto it = m.placement().find(c.target);
      return it == m.placement().end() ? std::string() : it->second;
    }
    default:
      return {};
    }
  }

  /// The most \p c may allocate: a tensor's bytes, or a run's bindings'.
  static uint64_t mostAllocated(const Model &m, const Command &c) {
    auto bytesOf = [&](const std::string &name) -> uint64_t {
      const ModelTensor *t = m.tensor(name);
      return t && !t->empty() ? t->bytes() : 0;
    };
    if (c.kind == CommandKind::Alloc)
      return c.bytes;
    if (c.kind != CommandKind::Run)
      return bytesOf(c.target);
    uint64_t sum = 0;
    for (const auto &[placeholder, tensor] : c.bindings)
      sum += bytesOf(tensor);
    return sum;
  }

  /// Whether \p e, of branch \p branch, may have been refused OutOfMemory
  /// for memory another branch's run held while it ran (semantics §5: a run
  /// allocates its outputs and input copies one at a time, and frees the
  /// copies when it ends), though the model, which applies a run as one
  /// step, lets it through after \p m: a run on its device overlapped it
  /// in time, and what the device has left is less than what \p e needs
  /// and such runs could hold together.
  bool refusedBesideARun(const Model &m, const BranchEvent &e,
                         size_t branch) const {
    if (!(e.observed.outcome == Outcome::error(ErrorCode::OutOfMemory)))
      return false;
    std::string device = allocatingDevice(m, *e.command);
    if (device.empty() || !m.devices().count(device))
      return false;
    uint64_t held = 0;
    for (size_t b = 0; b < history_.size(); ++b)
      for (const BranchEvent &f : history_[b])
        if (b != branch && f.command->kind == CommandKind::Run &&
            f.invoked < e.returned && e.invoked < f.returned &&
            allocatingDevice(m, *f.command) == device)
          held += mostAllocated(m, *f.command);
    const ModelDevice &d = m.devices().at(device);
    return held && d.budget() &&
           d.available() < mostAllocated(m, *e.command) + held;
  }

  /// Applies \p e's command to \p m as refused OutOfMemory at its first
  /// allocation: with the device's budget at what it holds for the step.
  static ModelStep applyRefused(Model &m, const BranchEvent &e) {
    std::string device = allocatingDevice(m, *e.command);
    const ModelDevice &d = m.devices().at(device);
    uint64_t budget = d.spec.budget;
    m.setDeviceBudget(device, std::max<uint64_t>(d.used, 1));
    ModelStep step = m.apply(*e.command);
    m.setDeviceBudget(device, budget);
    return step;
  }

  const std::vector<std::vector<BranchEvent>> &history_;
  std::function<bool(Model &)> matches_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<size_t> next_;
  size_t total_ = 0;
  std::vector<const BranchEvent *> order_, longest_;
  std::optional<Model> found_;
  bool timedOut_ = false;
  size_t explored_ = 0;
};

/// Runs the parallel block (commands \p first to the end of \p scenario)
/// on \p session, each branch on a thread of its own, and checks the
/// history for linearizability against \p model, which becomes the model
/// of the order found. A difference when a branch command blocked, a
/// device reported a background error, or no order explains what was seen;
/// coverage labels say whether branches overlapped and what the search
/// concluded. An Unknown verdict (the search gave up after \p budget) is no
/// failure: \p model is then left where the block began, and \p unknown
/// says what the search tried, for the caller to compare nothing the block
/// may have changed.
template <typename Labels>
std::optional<Difference> runParallelBlock(
    const Scenario &scenario, size_t first, Session &session, Model &model,
    Labels &labels, const std::function<void(const std::string &)> &trace,
    std::chrono::milliseconds budget, std::optional<std::string> &unknown) {
  std::vector<std::vector<BranchEvent>> history(MaxBranches);
  for (size_t i = first; i < scenario.commands.size(); ++i) {
    const Command &c = scenario.commands[i];
    history[size_t(c.branch - 1)].push_back({&c, 0, 0, {}});
    if (c.kind == CommandKind::Run)
      session.makeContext(c.target);
  }
  std::erase_if(history, [](const auto &b) { return b.empty(); });
  std::atomic<uint64_t> clock{0};
  std::vector<std::thread> threads;
  // The branches start together: a thread's creation takes longer than a
  // command on a fast device, and branches that start one after another
  // seldom overlap. They spin until the last has arrived rather than sleep
  // on a latch, whose wakeups reach the sleepers tens of microseconds after
  // the last thread has started: on the fake device the branches of one
  // block in four then never overlapped, against one in sixteen spinning.
  std::atomic<size_t> arrived{0};
  const size_t branches = history.size();
  for (auto &branch : history)
    threads.emplace_back([&session, &clock, &branch, &arrived, branches,
                          watchdog = session.branchWatchdog()] {
      arrived.fetch_add(1);
      while (arrived.load() < branches)
        std::this_thread::yield();
      for (BranchEvent &e : branch) {
        e.invoked = clock.fetch_add(1);
        session.executeInBranch(*e.command, e.observed, watchdog.get());
        e.returned = clock.fetch_add(1);
      }
    });
  for (std::thread &t : threads)
    t.join();
  session.forgetTensorsDestroyedInBlock();
  if (trace)
    trace("[" + session.backend() +
          "] parallel block, by invocation:" + describeHistory(history));
  ++labels[CoverageLabel("parallel-block")];
  auto overlapped = [&] {
    for (size_t a = 0; a < history.size(); ++a)
      for (size_t b = a + 1; b < history.size(); ++b)
        for (const BranchEvent &x : history[a])
          for (const BranchEvent &y : history[b])
            if (x.invoked < y.returned && y.invoked < x.returned)
              return true;
    return false;
  };
  if (overlapped())
    ++labels[CoverageLabel("branches-overlapped")];
  // Two or more other branches invoked a command on a record while one
  // branch's transfer of it was in flight: they met it busy together, where
  // a wakeup of one waiter only would strand the others.
  auto recordOf = [&](const Command &c) {
    const ModelTensor *t = model.tensor(c.target);
    return t && !t->empty() ? t->record : -1;
  };
  auto waitersTogether = [&] {
    for (size_t a = 0; a < history.size(); ++a)
      for (const BranchEvent &h : history[a]) {
        int record = recordOf(*h.command);
        if (record < 0 || (h.command->kind != CommandKind::ToDevice &&
                           h.command->kind != CommandKind::FromDevice))
          continue;
        int waiters = 0;
        for (size_t b = 0; b < history.size(); ++b)
          if (b != a && std::any_of(history[b].begin(), history[b].end(),
                                    [&](const BranchEvent &x) {
                                      return recordOf(*x.command) == record &&
                                             h.invoked < x.invoked &&
                                             x.invoked < h.returned;
                                    }))
            ++waiters;
        if (waiters >= 2)
          return true;
      }
    return false;
  };
  if (waitersTogether())
    ++labels[CoverageLabel("waiters-on-busy-record")];
  // Runs of two branches that bind a record in common take it together;
  // binding two in common in other orders, each takes one while it holds
  // or waits for the other.
  auto boundRecords = [&](const Command &run) {
    std::vector<int> out;
    for (const auto &[placeholder, tensor] : run.bindings) {
      const ModelTensor *t = model.tensor(tensor);
      if (t && !t->empty())
        out.push_back(t->record);
    }
    return out;
  };
  bool runsShare = false, otherOrders = false;
  for (size_t a = 0; a < history.size(); ++a)
    for (size_t b = a + 1; b < history.size(); ++b)
      for (const BranchEvent &x : history[a])
        for (const BranchEvent &y : history[b]) {
          if (x.command->kind != CommandKind::Run ||
              y.command->kind != CommandKind::Run)
            continue;
          std::vector<int> rx = boundRecords(*x.command),
                           ry = boundRecords(*y.command);
          for (size_t i = 0; i < rx.size(); ++i) {
            auto at = std::find(ry.begin(), ry.end(), rx[i]);
            if (at == ry.end())
              continue;
            runsShare = true;
            for (size_t j = i + 1; j < rx.size(); ++j) {
              auto later = std::find(ry.begin(), ry.end(), rx[j]);
              otherOrders = otherOrders || (later != ry.end() && later < at);
            }
          }
        }
  if (runsShare)
    ++labels[CoverageLabel("runs-share-records")];
  if (otherOrders)
    ++labels[CoverageLabel("runs-bind-shared-records-in-other-orders")];
  for (const auto &branch : history)
    for (const BranchEvent &e : branch)
      if (e.command->kind == CommandKind::Shutdown)
        ++labels[CoverageLabel("shutdown-in-parallel-block")];
      else if (e.command->kind == CommandKind::InjectFault)
        ++labels[CoverageLabel("fault-in-parallel-block")];
      else if (e.observed.outcome == Outcome::error(ErrorCode::OutOfMemory))
        // A budget refused a branch's allocation: where two branches
        // contend for it, one of them must be (contendedBudgetPercent).
        ++labels[CoverageLabel("out-of-memory-in-parallel-block")];
  auto blocked = [](const Command &c) {
    return Difference{"the return of '" + printCommand(c) + "'",
                      "before the callback timeout",
                      "it blocked; the devices were shut down to end it"};
  };
  for (const auto &branch : history)
    for (const BranchEvent &e : branch) {
      if (e.observed.problem)
        return e.observed.problem;
      if (e.observed.blocked)
        return blocked(*e.command);
      if (e.observed.callbacks > 1)
        return Difference{"completion callbacks of '" +
                              printCommand(*e.command) + "'",
                          "at most 1 call",
                          std::to_string(e.observed.callbacks) + " call(s)"};
    }
  // Records the branches left on a device are read back (kept there) now,
  // on the session and, in the search, on each candidate model, so that
  // their contents are compared too: orders that differ only in what ended
  // up in device memory are told apart.
  std::vector<Command> readBack = session.readBackCommands();
  std::vector<Observation> readBackSeen(readBack.size());
  for (size_t i = 0; i < readBack.size(); ++i) {
    session.executeInBranch(readBack[i], readBackSeen[i]);
    if (readBackSeen[i].blocked)
      return blocked(readBack[i]);
  }
  // Background errors once the read-back is done and nothing is in flight:
  // one the read-back raised, or a late completion of a branch's command,
  // is reported as itself (and taken once, before the search compares the
  // final state with many candidate models).
  session.settle();
  if (std::optional<Difference> d = session.takeBackgroundErrors())
    return d;
  auto readBackMatches = [&](Model &m, const std::vector<std::string> *only) {
    for (size_t i = 0; i < readBack.size(); ++i) {
      if (only && std::find(only->begin(), only->end(), readBack[i].target) ==
                      only->end())
        continue;
      ModelStep st = m.apply(readBack[i]);
      if (!(st.outcome == readBackSeen[i].outcome))
        return false;
    }
    return true;
  };

  // The histories to check: one per record when the records are
  // independent (linearizability is local: a history is linearizable when
  // each object's is), else the whole. Records are independent when no
  // device has a fault planned and every device has room for all of them
  // at once, so that no outcome depends on another record's commands.
  auto deadline = std::chrono::steady_clock::now() + budget;
  std::map<int, std::vector<std::vector<BranchEvent>>> byRecord;
  uint64_t bytes = 0;
  for (size_t b = 0; b < history.size(); ++b)
    for (const BranchEvent &e : history[b]) {
      const ModelTensor *t = model.tensor(e.command->target);
      int record = t && !t->empty() ? t->record : -1;
      auto [it, fresh] = byRecord.try_emplace(
          record, std::vector<std::vector<BranchEvent>>(history.size()));
      if (fresh && record >= 0)
        bytes += model.records().at(record).bytes;
      it->second[b].push_back(e);
    }
  bool independent = !byRecord.count(-1) && byRecord.size() > 1;
  for (const auto &[name, d] : model.devices())
    independent = independent && d.faults.empty() &&
                  (d.budget() == 0 || d.used + bytes <= d.budget());
  std::vector<std::vector<std::vector<BranchEvent>>> parts;
  if (independent)
    for (auto &[record, part] : byRecord)
      parts.push_back(std::move(part));
  else
    parts.push_back(history);
  if (parts.size() > 1)
    ++labels[CoverageLabel("linearized-per-record")];

  Model current = model;
  // What the search cost, for traces: steps tried and time.
  size_t explored = 0;
  auto searchStarted = std::chrono::steady_clock::now();
  auto traceSearch = [&](const char *verdict) {
    if (!trace)
      return;
    size_t commands = 0;
    for (const auto &branch : history)
      commands += branch.size();
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - searchStarted)
                  .count();
    trace("[" + session.backend() + "] linearizability: " + verdict + ", " +
          std::to_string(commands) + " commands in " +
          std::to_string(history.size()) + " branches, " +
          std::to_string(parts.size()) + " record history(ies), " +
          std::to_string(explored) + " steps tried, " + std::to_string(us) +
          " us");
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    // A record's history is judged by its own tensors; the last one by
    // everything the session shows.
    std::vector<std::string> names;
    if (!last) {
      const BranchEvent *any = nullptr;
      for (const auto &branch : parts[i])
        if (!branch.empty())
          any = &branch.front();
      int record = current.tensor(any->command->target)->record;
      for (const auto &[name, t] : current.tensors())
        if (t.record == record)
          names.push_back(name);
    }
    Linearizer search(
        parts[i],
        [&](Model &m) {
          if (last)
            return readBackMatches(m, nullptr) &&
                   !session.compareState(m, {}, true, true).has_value();
          return readBackMatches(m, &names) &&
                 !session.compareTensors(m, names).has_value();
        },
        deadline);
    Linearizer::Verdict verdict = search.run(current);
    explored += search.explored();
    switch (verdict) {
    case Linearizer::Verdict::Linearizable:
      current = search.model();
      continue;
    case Linearizer::Verdict::Unknown:
      traceSearch("unknown");
      ++labels[CoverageLabel("linearizability-unknown")];
      unknown = "the state after the parallel block on backend '" +
                session.backend() + "': the linearizability search gave up (" +
                std::to_string(explored) + " steps tried in " +
                std::to_string(budget.count()) +
                " ms), so no model explains it; the final read-back and the "
                "final check were left out, teardown was checked";
      return std::nullopt;
    case Linearizer::Verdict::NotLinearizable:
      traceSearch("not linearizable");
      break;
    }
    std::string prefix;
    for (const BranchEvent *e : search.longestPrefix())
      prefix += "\n    " + printCommand(*e->command) + " => " +
                e->observed.outcome.toString();
    return Difference{
        "linearizability of the parallel branches",
        "an order of the branches' commands (each branch in its order, none "
        "before one that returned before it was invoked) under which the "
        "model gives every outcome seen and the final state",
        "none among " + std::to_string(search.explored()) + " tried" +
            (parts.size() > 1 ? " for one of " + std::to_string(parts.size()) +
                                    " independent records"
                              : std::string()) +
            "; the history, by invocation:" + describeHistory(history) +
            "\n  the longest prefix the model explains:" +
            (prefix.empty() ? std::string(" none") : prefix)};
  }
  traceSearch("linearizable");
  model = std::move(current);
  ++labels[CoverageLabel("linearized")];
  return std::nullopt;
}

/// The divergence of an exception that escaped a call into a backend while
/// \p scenario was where \p progress says (the current exception).
Divergence escapedDivergence(const Scenario &scenario,
                             const Progress &progress) {
  Divergence d;
  d.step = progress.step.load(std::memory_order_relaxed);
  const char *phase = progress.phase.load(std::memory_order_relaxed);
  if (phase)
    d.command = phase;
  else if (d.step >= 1 && d.step <= scenario.commands.size())
    d.command = printCommand(scenario.commands[d.step - 1]);
  else
    d.command = "final read-back of the records left on a device";
  if (const std::string *b = progress.backend.load(std::memory_order_relaxed))
    d.backend = *b;
  d.what = "the calls the step made into the backend";
  d.expected = "returns (a backend reports a failure as an Error; a hook "
               "never throws)";
  d.observed = "an exception escaped: " + describeCurrentException();
  return d;
}

/// The divergence of drt's own model failing (ModelFailure \p e) while
/// \p scenario was where \p progress says: reported as the suite's
/// defect, so that nobody looks for it in the backend.
Divergence modelFailureDivergence(const Scenario &scenario,
                                  const Progress &progress,
                                  const ModelFailure &e) {
  Divergence d = escapedDivergence(scenario, progress);
  d.backend.clear();
  d.what = "drt's reference model (a defect of the suite, not of the backend)";
  d.expected = "predicts every step";
  d.observed = e.what();
  return d;
}

void keepCrashReportsInFront();

/// Runs \p scenario as runScenario describes, into \p result, \p labels
/// and \p transitions, marking its \p progress.
void runInto(const Scenario &scenario, const RunOptions &options,
             RunResult &result, LabelCounts &labels,
             TransitionCounts &transitions, Progress &progress) {
  if (std::string problem = validateScenario(scenario); !problem.empty()) {
    result.setupFailure = RunResult::SetupFailure::MalformedScenario;
    result.setupError = "malformed scenario: " + problem;
    return;
  }
  std::vector<std::unique_ptr<Session>> sessions;
  sessions.push_back(std::make_unique<Session>(
      options.backend, scenario, options.callbackTimeoutMs,
      options.askDevicesFromCallbacks));
  if (!options.against.empty())
    sessions.push_back(std::make_unique<Session>(
        options.against, scenario, options.callbackTimeoutMs,
        options.askDevicesFromCallbacks));
  // Destroyed before the sessions: what runs after it is their shutdown.
  struct ShutdownMark {
    Progress &progress;
    ~ShutdownMark() {
      progress.at(progress.step.load(std::memory_order_relaxed), nullptr,
                  "shutting the devices down after the scenario", nullptr);
      keepCrashReportsInFront();
    }
  } shutdownMark{progress};
  for (auto &s : sessions) {
    progress.at(0, nullptr, "setup", &s->backend());
    s->setProgress(&progress);
  }
  // A hook must report a failure as an Error: one that throws instead ends
  // the scenario with a divergence at the step it threw in.
  try {
    for (auto &s : sessions)
      if (std::string e = s->setup(); !e.empty()) {
        result.setupFailure = RunResult::SetupFailure::Device;
        result.setupError = e;
        return;
      }
    keepCrashReportsInFront();
    // Each backend is held to what its own devices declare: sessions whose
    // devices declare the same traits share a model (a lane); a partner that
    // declares other capabilities (no resident tensors on one side) gets a
    // model of its own. The first lane is the backend under test's: the
    // scenario's written expectations, coverage and transitions are its.
    struct Lane {
      Model model;
      std::vector<Session *> sessions;
      std::vector<DeviceTraits> traits;
      /// False after a parallel block no order was found for in time: the
      /// model does not hold the state the block left.
      bool modelKnown = true;
    };
    std::vector<Lane> lanes;
    // A parallel block may end each session in another linearization: each
    // then keeps a model of its own.
    size_t sequential = sequentialLength(scenario);
    bool parallel = sequential < scenario.commands.size();
    for (auto &s : sessions) {
      std::vector<DeviceTraits> traits;
      for (const DeviceSpec &spec : scenario.devices) {
        DeviceManager &d = s->device(spec.name);
        traits.push_back(DeviceTraits{d.capabilities(), d.maximumMemory()});
      }
      auto same = std::find_if(lanes.begin(), lanes.end(), [&](const Lane &l) {
        return !parallel && l.traits == traits;
      });
      if (same != lanes.end()) {
        same->sessions.push_back(s.get());
        continue;
      }
      auto traitsOf = [&](const DeviceSpec &spec) {
        for (size_t i = 0; i < scenario.devices.size(); ++i)
          if (scenario.devices[i].name == spec.name)
            return traits[i];
        return DeviceTraits{};
      };
      lanes.push_back(
          Lane{Model(scenario.devices, traitsOf), {s.get()}, traits});
    }
    Model &model = lanes.front().model;
    auto diverge = [&](size_t step, const std::string &command,
                       const std::string &backend, const Difference &d) {
      result.divergence =
          Divergence{step, command, backend, d.what, d.expected, d.observed};
    };

    // Commands issued without waiting, per session, until the next command
    // that waits: the step, its text and what the model predicted.
    struct Pending {
      std::shared_ptr<CallbackProbe> probe;
      size_t step;
      std::string command;
      ModelStep predicted;
    };
    std::map<Session *, std::vector<Pending>> pending;
    // Waits for every pending command of \p session and checks its outcome
    // and callbacks; false after a divergence (reported at its own step).
    auto drain = [&](Session *session) {
      std::vector<Pending> waiting = std::move(pending[session]);
      pending[session].clear();
      for (Pending &p : waiting) {
        progress.advance();
        Observation observed;
        session->awaitPending(p.probe, observed);
        if (std::optional<Difference> d =
                compareOutcome(p.predicted, observed)) {
          diverge(p.step, p.command, session->backend(), *d);
          return false;
        }
      }
      return true;
    };

    // One step on each lane's model and sessions; false after a divergence.
    // \p written: a command of the scenario (not the runner's read-back);
    // \p only: the one lane a read-back step is for, or all lanes when null.
    std::vector<std::pair<int, ResidencyState>> before;
    std::vector<std::string> named;
    // The commands issued without waiting that \p waiting holds, as the
    // name of a moment ("step 3 and step 5, issued without waiting, are
    // pending").
    auto pendingMoment = [](const std::vector<Pending> &waiting) {
      std::string steps;
      for (const Pending &p : waiting)
        steps +=
            (steps.empty() ? "step " : " and step ") + std::to_string(p.step);
      return steps + ", issued without waiting, " +
             (waiting.size() == 1 ? "is" : "are") + " pending";
    };
    auto devicesDown = [](const Model &m) {
      size_t n = 0;
      for (const auto &[name, d] : m.devices())
        n += d.shutDown;
      return n;
    };
    auto lossMayStrike = [](const Model &m) {
      for (const auto &[name, d] : m.devices())
        if (d.lossPlanned && !d.shutDown)
          return true;
      return false;
    };
    auto runStep = [&](const Command &c, size_t step, bool written,
                       const Lane *only) {
      result.steps = std::max(result.steps, step);
      auto text = [&] {
        return (written ? "" : "final read-back: ") + printCommand(c);
      };
      // The next command when its own callback is to issue it.
      const Command *continued = written && step < scenario.commands.size() &&
                                         scenario.commands[step].inCallback
                                     ? &scenario.commands[step]
                                     : nullptr;
      for (Lane &lane : lanes) {
        if (only && only != &lane)
          continue;
        Model &m = lane.model;
        bool first = &lane == &lanes.front();
        // What the step may change: the records of the tensors it names, and
        // every record when it shuts a device down (which a sweep then
        // covers).
        named.clear();
        addTensorsNamedBy(c, m, named);
        bool sweep =
            m.tensors().size() <= SweepTensors || step % SweepPeriod == 0;
        size_t down = devicesDown(m);
        before.clear();
        // Every record (in record order, as records() has them) when the step
        // may shut a device down (a shutdown, or any step once a DeviceLost
        // fault is planned), else those of the named tensors, the only ones
        // any other step changes.
        bool everyRecord = c.kind == CommandKind::Shutdown || lossMayStrike(m);
        if (first && written) {
          if (everyRecord) {
            for (const auto &[id, r] : m.records())
              before.emplace_back(id, r.state);
          } else {
            for (const std::string &name : named)
              if (const ModelTensor *t = m.tensor(name); t && !t->empty())
                before.emplace_back(t->record, m.records().at(t->record).state);
          }
        }
        bool recordPending =
            m.transfersPending() && m.transferPendingOn(c.target);
        // Accounting follows program order while transfers and runs are in
        // flight too (a free counts when it returns, not when the device's
        // queued work lets it reclaim the memory): compared before they are
        // waited for after a command done inside its call, when none of
        // them changes accounting by completing and the command acts on
        // none of their records.
        bool accountingInFlight =
            !c.inCallback && completesInCall(c.kind) &&
            m.pendingAccountingFixed() &&
            std::none_of(named.begin(), named.end(),
                         [&](const std::string &name) {
                           return m.transferPendingOn(name);
                         });
        ModelStep predicted = m.apply(c);
        accountingInFlight = accountingInFlight && !lossMayStrike(m);
        sweep = sweep || devicesDown(m) != down;
        // A run's context as the step left it (the other commands name the
        // same tensors after the step as before it).
        if (c.kind == CommandKind::Run || c.kind == CommandKind::EnsureOutputs)
          addTensorsNamedBy(c, m, named);
        // The final read-back is the runner's, not the scenario's: it counts
        // towards no coverage.
        if (first && written) {
          for (const CoverageLabel &label : predicted.labels)
            ++labels[label];
          // Every record's state after the step in one walk of both (both in
          // record order), a few named ones' by lookup.
          auto after = m.records().begin();
          for (const auto &[id, state] : before) {
            if (everyRecord) {
              while (after != m.records().end() && after->first < id)
                ++after;
            } else {
              after = m.records().find(id);
            }
            bool kept = after != m.records().end() && after->first == id;
            if (kept && after->second.state == state)
              continue;
            if (!kept && state != ResidencyState::Device &&
                state != ResidencyState::Mirrored)
              continue;
            ++transitions[{state, c.kind,
                           kept ? std::optional(after->second.state)
                                : std::nullopt}];
          }
          if (options.checkWrittenExpectations &&
              !(c.expect == predicted.outcome)) {
            diverge(step, text(), "scenario",
                    {"the step's written expectation against the reference "
                     "model",
                     "the model's " + predicted.outcome.toString(),
                     "the scenario's " + c.expect.toString()});
            return false;
          }
        }
        for (Session *session : lane.sessions) {
          progress.at(step, &c, nullptr, &session->backend());
          Observation observed;
          session->noteUnwaitedCommands(!pending[session].empty());
          if (written && c.inCallback)
            session->finishContinuation(c, m, observed, recordPending);
          else
            session->execute(c, m, observed, recordPending, continued);
          if (first && written && session == lane.sessions.front() &&
              observed.storageLabel)
            ++labels[CoverageLabel(observed.storageLabel)];
          if (options.trace)
            options.trace((sessions.size() > 1 ? "[" + session->backend() + "] "
                                               : std::string()) +
                          traceLine(step, text(), observed, *session));
          // Issued without waiting: checked after the next command that waits.
          if (observed.pending) {
            pending[session].push_back(
                {std::move(observed.pending), step, text(), predicted});
            continue;
          }
          std::optional<Difference> d = compareOutcome(predicted, observed);
          if (!d && accountingInFlight && !pending[session].empty())
            d = session->compareMemoryInFlight(m,
                                               pendingMoment(pending[session]));
          if (!d && !drain(session))
            return false;
          // The next command is on its way from this one's callback: the
          // state is compared after it.
          if (!d && continued) {
            d = session->callbackChecks(m, c);
            if (!d)
              continue;
          }
          if (!d)
            d = session->compareState(m, named, sweep, false);
          if (!d)
            d = session->backendChecks(m, c, named, sweep);
          if (d) {
            diverge(step, text(), session->backend(), *d);
            return false;
          }
        }
      }
      return true;
    };

    for (size_t i = 0; i < sequential; ++i)
      if (!runStep(scenario.commands[i], i + 1, true, nullptr))
        return;
    for (auto &s : sessions)
      if (!drain(s.get()))
        return;
    if (parallel) {
      // The labels are the backend under test's, as for sequential steps: a
      // partner's lane reaches its own.
      LabelCounts partnerLabels;
      for (Lane &lane : lanes) {
        progress.at(sequential + 1, nullptr, "the parallel block",
                    &lane.sessions.front()->backend());
        std::optional<std::string> unknown;
        if (std::optional<Difference> d = runParallelBlock(
                scenario, sequential, *lane.sessions.front(), lane.model,
                &lane == &lanes.front() ? labels : partnerLabels, options.trace,
                std::chrono::milliseconds(options.linearizabilityBudgetMs),
                unknown)) {
          diverge(sequential + 1, "the parallel block",
                  lane.sessions.front()->backend(), *d);
          return;
        }
        if (unknown) {
          lane.modelKnown = false;
          result.notCompared.push_back(std::move(*unknown));
        }
      }
      result.steps = scenario.commands.size();
    }

    // Final read-back: every record still on a device is brought back (kept
    // there too), so results computed on the device are compared with the
    // model even when the scenario never reads them. Lanes may hold different
    // records on their devices: each reads back its own.
    size_t step = scenario.commands.size();
    size_t lastStep = step;
    for (const Lane &lane : lanes) {
      size_t laneStep = step;
      if (!lane.modelKnown)
        continue;
      for (const Command &c : finalReadBack(lane.model))
        if (!runStep(c, ++laneStep, false, &lane))
          return;
      lastStep = std::max(lastStep, laneStep);
    }
    step = lastStep;

    for (const auto &[name, d] : model.devices()) {
      result.allocations[name] = d.allocations;
      result.slotReuses[name] =
          d.allocations - std::min<uint64_t>(d.allocations, d.peakLive);
    }

    // Every readable tensor's contents, large ones included.
    ++step;
    for (const Lane &lane : lanes) {
      if (!lane.modelKnown)
        continue;
      for (Session *s : lane.sessions) {
        progress.at(step, nullptr,
                    "final check (host contents of every readable tensor)",
                    &s->backend());
        if (auto d = s->compareState(lane.model, {}, true, true)) {
          diverge(step, "final check (host contents of every readable tensor)",
                  s->backend(), *d);
          return;
        }
      }
    }

    // Teardown: every tensor goes, memory returns to the baseline.
    ++step;
    for (Lane &lane : lanes) {
      // Where the model does not hold the state a parallel block left, a
      // device that a planned DeviceLost may have shut down in the block is
      // shut down in the model too when the backend's is: what teardown
      // compares (no tensor, no memory in use, nothing in flight) is then the
      // same in every order of the block.
      std::vector<Command> lost;
      if (!lane.modelKnown)
        for (const auto &[name, d] : lane.model.devices())
          if (d.lossPlanned && !d.shutDown &&
              lane.sessions.front()->device(name).isShutDown()) {
            lost.emplace_back();
            lost.back().kind = CommandKind::Shutdown;
            lost.back().device = name;
          }
      for (const Command &c : lost)
        lane.model.apply(c);
      for (Session *s : lane.sessions) {
        progress.at(step, nullptr,
                    "teardown (destroy every tensor, free every location)",
                    &s->backend());
        s->teardown(lane.model);
      }
      lane.model.teardown();
      for (Session *s : lane.sessions) {
        std::optional<Difference> d =
            s->compareState(lane.model, {}, true, true);
        if (!d)
          d = s->backendChecks(lane.model, Command{}, {}, true);
        if (!d)
          d = s->physicalChecks();
        if (d) {
          diverge(step, "teardown (destroy every tensor, free every location)",
                  s->backend(), *d);
          return;
        }
      }
    }
    // The paths of the backend under test (a partner's are its own): what
    // its devices did in the whole scenario, teardown included.
    lanes.front().sessions.front()->reportPaths(result);
  } catch (const ModelFailure &e) {
    result.divergence = modelFailureDivergence(scenario, progress, e);
  } catch (...) {
    result.divergence = escapedDivergence(scenario, progress);
  }
}

/// Makes the report of a scenario stuck for \p ms (or struck by \p signal)
/// at what \p progress says, for options.reportAborted or standard error.
/// \p scenario may be an intact copy of \p ran, the scenario that ran (whose
/// commands progress points into).
void reportAbortedStep(const Scenario &scenario, const Progress &progress,
                       const RunOptions &options, unsigned ms, int signal,
                       const Scenario *ran = nullptr) {
  AbortedStep stuck;
  stuck.signal = signal;
  stuck.scenario = &scenario;
  stuck.step = progress.step.load(std::memory_order_relaxed);
  const Command *c = progress.command.load(std::memory_order_relaxed);
  if (ran && ran != &scenario && c >= ran->commands.data() &&
      c < ran->commands.data() + ran->commands.size() &&
      scenario.commands.size() == ran->commands.size())
    c = &scenario.commands[size_t(c - ran->commands.data())];
  stuck.command =
      c ? printCommand(*c) : progress.phase.load(std::memory_order_relaxed);
  if (const std::string *b = progress.backend.load(std::memory_order_relaxed))
    stuck.backend = *b;
  stuck.stuckMs = ms;
  if (options.reportAborted)
    return options.reportAborted(stuck);
  std::string text = "drt: a scenario " +
                     std::string(signal ? "crashed" : "is stuck") + " at " +
                     stuck.toString() + "the scenario up to that step:\n" +
                     printScenario(stuck.prefix());
  std::fputs(text.c_str(), stderr);
}

/// A scenario's text in pages of its own, between no-access pages. A
/// backend that corrupts the heap (a write past a buffer) may overwrite the
/// Scenario that the report of the crash would print, not this copy: an
/// overrun of a neighbouring mapping faults in a guard page first. (Taking
/// write access away while the scenario runs would cost each case two
/// mprotect calls, 7% of a run on the fake device, for writes that aim
/// into these very pages.)
class ProtectedText {
public:
  ProtectedText() = default;
  ProtectedText(const ProtectedText &) = delete;
  ProtectedText &operator=(const ProtectedText &) = delete;
  ~ProtectedText() {
    if (base_)
      munmap(base_, mapped_);
  }

  /// Holds \p text instead of what it held; false, holding nothing, when
  /// the pages cannot be mapped.
  bool hold(std::string_view text) {
    size_ = 0;
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    if (text.size() > capacity_) {
      if (base_)
        munmap(base_, mapped_);
      base_ = nullptr;
      capacity_ = std::max((text.size() + page - 1) / page * page, page);
      mapped_ = capacity_ + 2 * page;
      void *m = mmap(nullptr, mapped_, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED || mprotect(static_cast<char *>(m) + page, capacity_,
                                      PROT_READ | PROT_WRITE) != 0) {
        if (m != MAP_FAILED)
          munmap(m, mapped_);
        capacity_ = 0;
        return false;
      }
      base_ = static_cast<char *>(m);
      data_ = base_ + page;
    }
    std::memcpy(data_, text.data(), text.size());
    size_ = text.size();
    return true;
  }

  /// What hold() was last given.
  std::string_view text() const { return {data_, size_}; }

private:
  char *base_ = nullptr, *data_ = nullptr;
  size_t mapped_ = 0, capacity_ = 0, size_ = 0;
};

/// The text of the last outermost scenario that runScenario ran with crash
/// reports in force, for the report of a fatal signal that strikes outside
/// any (it lives until the process ends).
std::atomic<const ProtectedText *> lastScenarioText{nullptr};

/// The scenario that runScenario runs in this process, for the report of a
/// fatal signal (the innermost, when several run).
struct RunningScenario {
  const Scenario *scenario;
  const Progress *progress;
  const RunOptions *options;
  /// printScenario(*scenario) out of the heap's reach (ProtectedText), or
  /// empty.
  std::string_view text;
};
std::atomic<const RunningScenario *> runningScenario{nullptr};

constexpr std::array FatalSignals = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

std::atomic<void (*)()> beforeCrashReport{nullptr};

void onFatalSignal(int signal) {
  // The report allocates and prints: one that cannot finish (the signal
  // struck inside the allocator, holding its lock, and nothing made
  // allocations safe) is ended by the alarm.
  std::signal(SIGALRM, SIG_DFL);
  alarm(10);
  if (void (*prepare)() = beforeCrashReport.load())
    prepare();
  if (const RunningScenario *r = runningScenario.exchange(nullptr)) {
    // The heap may be corrupted (what crashed may have been the backend
    // noticing it): the report prints the copy that the heap cannot reach.
    ParseResult intact = ParseError{};
    if (!r->text.empty())
      intact = parseScenario(std::string(r->text));
    const Scenario *s = std::get_if<Scenario>(&intact);
    reportAbortedStep(s ? *s : *r->scenario, *r->progress, *r->options, 0,
                      signal, r->scenario);
  } else if (const ProtectedText *last = lastScenarioText.exchange(nullptr);
             last && !last->text().empty()) {
    // Between cases, or as the process ends (a backend's static state
    // released at exit): what the last scenario did may be the cause, as a
    // heap it corrupted that the C library noticed only later.
    std::string report =
        std::string("drt: a fatal signal (") + strsignal(signal) +
        ") struck outside any running scenario (between scenarios, or as "
        "the process ended); the last scenario that ran in this process "
        "may have caused it. Replay it alone (drt-replay FILE --backend "
        "NAME) to see whether it does:\n" +
        std::string(last->text());
    // After what the program printed before.
    std::fflush(nullptr);
    std::fputs(report.c_str(), stderr);
  }
  std::fflush(nullptr);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

/// Whether reportCrashesOfScenarios() is in force.
std::atomic<bool> crashReportsWanted{false};

void installCrashHandler(int signal) {
  struct sigaction action = {};
  action.sa_handler = onFatalSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigaction(signal, &action, nullptr);
}

/// Puts onFatalSignal back where a library the backend loaded has put its
/// own handler since (LLVM's, inside an OpenCL compiler, on its first
/// compilation). Such a handler restores the previous one and returns: a
/// fault then strikes again and reaches onFatalSignal, but abort() resets
/// SIGABRT to its default before raising it again, so that a backend's
/// abort (a failed assertion, a heap check of the C library, a driver's own
/// abort) would end the process with nothing reported. Called where
/// backends start and stop: a few system calls per case.
void keepCrashReportsInFront() {
  if (!crashReportsWanted.load(std::memory_order_relaxed))
    return;
  for (int signal : FatalSignals) {
    struct sigaction current = {};
    if (sigaction(signal, nullptr, &current) == 0 &&
        current.sa_handler != onFatalSignal)
      installCrashHandler(signal);
  }
}

} // namespace

void reportCrashesOfScenarios() {
  crashReportsWanted = true;
  for (int signal : FatalSignals)
    installCrashHandler(signal);
}

void setBeforeCrashReport(void (*prepare)()) { beforeCrashReport = prepare; }

RunResult runScenario(const Scenario &scenario, const RunOptions &options) {
  RunResult result;
  LabelCounts labels;
  TransitionCounts transitions;
  {
    ScopedThrowingViolationHandler violations;
    HostGuardScope guards;
    Progress progress;
    uint64_t stuckMs = options.stuckAfterMs
                           ? options.stuckAfterMs
                           : 2 * uint64_t(options.callbackTimeoutMs) +
                                 options.linearizabilityBudgetMs + 10000;
    ProgressGuard guard(progress,
                        unsigned(std::min<uint64_t>(stuckMs, UINT32_MAX)),
                        [&](unsigned ms) {
                          reportAbortedStep(scenario, progress, options, ms, 0);
                        });
    keepCrashReportsInFront();
    RunningScenario running{&scenario, &progress, &options, {}};
    // One copy a thread, of its outermost scenario: a few microseconds per
    // case, paid only where crashes are reported. Never freed: a crash at
    // the process's end may still print it.
    thread_local ProtectedText *copy = nullptr;
    thread_local unsigned depth = 0;
    struct Depth {
      unsigned &d;
      ~Depth() { --d; }
    } inner{++depth};
    if (depth == 1 && crashReportsWanted.load(std::memory_order_relaxed)) {
      if (!copy)
        copy = new ProtectedText;
      std::string text =
          "# on backend " + options.backend +
          (options.against.empty() ? std::string()
                                   : " against " + options.against) +
          "\n" + printScenario(scenario);
      if (copy->hold(text)) {
        running.text = copy->text();
        lastScenarioText.store(copy);
      }
    }
    struct Current {
      const RunningScenario *outer;
      ~Current() { runningScenario.store(outer); }
    } current{runningScenario.exchange(&running)};
    runInto(scenario, options, result, labels, transitions, progress);
  }
  for (const auto &[label, count] : labels)
    result.labels[label.text()] += count;
  for (const auto &[key, count] : transitions) {
    const auto &[from, kind, to] = key;
    result.transitions[stateLabel(from) + " -" +
                       std::string(commandKindName(kind)) + "-> " +
                       (to ? stateLabel(*to) : std::string("freed"))] += count;
  }
  return result;
}

} // namespace drt::conformance
