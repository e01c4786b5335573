//===- drt/fuzz/FuzzInput.h - Fuzzer inputs as scenarios --------*- C++ -*-===//
//
// What a fuzzer's input means. An input is either
//  - choices (the first byte is not '#'): the bytes drive the conformance
//    suite's own scenario generator (ScenarioGenerator with a
//    ByteChoiceSource). The first choice, a slot below 65536, picks a
//    property family and one of the configurations the backend declares
//    worth testing (as a conformance run sweeps them: only pairs the
//    configuration's capabilities allow; each slot belongs to the pair whose
//    names hash highest with it, so that a new family takes slots without
//    moving the others), whose profile gives the devices and the commands
//    that exist; every later choice is one the generator makes (a command kind,
//    which live tensor, a size, a kind, a value, an offset, a fault plan).
//    Operands are therefore indices into the live objects, every input is a
//    valid scenario, and the fuzzer and the generators agree on the input
//    space; or
//  - a scenario text (the first byte is '#', as every stored scenario in
//    conformance/scenarios/ begins): parsed with the suite's parser, its
//    expectations set from the reference model, and kept to the input
//    space's bounds. Stored scenarios are seeds as they are, and the fuzzer
//    mutates scenarios in text form too.
// Either way the scenario runs through the one runner against the one model;
// a divergence, a setup error of a generated scenario, or a crash is a
// finding. drt-fuzz-to-scenario turns a finding into a shrunk .scn file.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FUZZ_FUZZINPUT_H
#define DRT_FUZZ_FUZZINPUT_H

#include "drt/BackendRegistry.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/Scenario.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace drt::fuzz {

/// The fuzz targets.
enum class Target {
  /// Scenarios on one backend (the fake device by default), checked against
  /// the reference model after every step.
  Residency,
  /// The same scenarios on two backends in lockstep (OpenCL against the fake
  /// device by default).
  Differential,
  /// The scenario text parser and printer.
  ScenarioText,
};

/// "residency", "differential", "scenario-text".
std::string_view targetName(Target target);
/// The target named \p name, or nullopt.
std::optional<Target> parseTarget(std::string_view name);

/// What a residency or differential input runs on.
struct FuzzSetup {
  /// The backend under test (any registered one, "mutant:NAME" included).
  std::string backend = "fake";
  /// The backend run in lockstep with it ("" for none).
  std::string against;
  /// Most commands an input decodes to (a longer text input is rejected).
  size_t maxCommands = 64;
  /// Most bytes a scenario keeps live at once (the input space's
  /// maxLiveBytes, lowered): it bounds the size classes drawn, and so the
  /// cost of one input.
  uint64_t maxLiveBytes = 64 * 1024;
  /// The same bound for the families about large tensors
  /// (PropertyFamily::aboutLargeTensors): their inputs reach the sizes where
  /// a backend changes path (past 64 KiB, past 1 MiB, past 4 MiB).
  uint64_t maxLargeLiveBytes = 16 * 1024 * 1024;
  /// Parameters set on every device of every input after decoding, keyed
  /// "backend:key" (a device of another backend ignores them) or "key".
  /// By default the fake device's simulated completion delays are 0: an
  /// asynchronous fake device still completes on its worker thread, but an
  /// input does not sleep (coverage does not depend on how long a delay
  /// is, and a fuzzer that waits executes fewer inputs).
  ParameterMap deviceParameters = {{"fake:max-delay-us", "0"}};
  /// One choices input in this many (0: none; DRT_FUZZ_DEVICE_PARAMS, which
  /// says what every device gets, makes it 0) gets simulated delays of up
  /// to 50 us where deviceParameters turn them off: runs and copies then
  /// queue behind each other as in a property run, where bugs of work in
  /// flight show. Chosen by the input's family slot, so that the commands
  /// every input decodes to stay the same.
  unsigned delayedInputsOneIn = 8;
  /// What the environment said that could not be read ("" when all could).
  std::string environmentProblem;
};

/// The setup of \p target: backend "fake" for residency, "opencl" against
/// "fake" for differential, 64 commands, 64 KiB live (16 MiB in the
/// families about large tensors), overridden by the environment variables
/// DRT_FUZZ_BACKEND, DRT_FUZZ_AGAINST, DRT_FUZZ_MAX_COMMANDS,
/// DRT_FUZZ_MAX_LIVE_BYTES, DRT_FUZZ_MAX_LARGE_LIVE_BYTES and
/// DRT_FUZZ_DEVICE_PARAMS ("backend:key=value,...", replacing the default
/// device parameters and leaving no input delayed; empty for none). Without
/// that variable, the default sets max-delay-us=0 on every backend the inputs
/// may use (the one under test, a mutant:NAME included, its partner, the fake
/// device) that declares it.
FuzzSetup setupFromEnvironment(Target target);

/// Why \p setup cannot run: an unregistered backend, a command limit of 0,
/// or malformed device parameters; "" when it can.
std::string setupProblem(const FuzzSetup &setup);

/// A scenario an input decodes to.
struct DecodedInput {
  enum class Form { Choices, Text };
  Form form = Form::Choices;
  /// The property family whose generator profile drew a choices input ("" for
  /// a text input).
  std::string family;
  /// The configuration of the backend under test it was drawn in
  /// ("default", "async=1"; "" for a text input, whose devices say it).
  std::string configuration;
  /// Well formed, with every expectation set from the reference model.
  conformance::Scenario scenario;

  /// "choices (family 'mixed', configuration default)" or "scenario text".
  std::string describe() const;
};

/// The number of slots the first choice of a choices input picks from.
constexpr uint64_t GeneratorSlots = 65536;

/// A hash of a (family, configuration) pair's names, as slotOwner takes it.
uint64_t generatorNameHash(std::string_view family,
                           std::string_view configuration);

/// Which of the pairs whose name hashes are \p nameHashes owns \p slot: the
/// one that hashes highest with it (rendezvous hashing). A pair added to the
/// list takes only slots it then owns; every other slot keeps its owner, so
/// a committed corpus keeps its meaning when families are added.
size_t slotOwner(std::span<const uint64_t> nameHashes, uint64_t slot);

/// An input that decodes to no scenario (a text input that does not parse,
/// names what does not exist, or leaves the input space's bounds), and why.
struct Rejection {
  std::string reason;
};

/// Decodes \p input for \p setup. Choices inputs always decode (an empty
/// input is a scenario without commands); text inputs may be rejected.
std::variant<DecodedInput, Rejection>
decodeInput(std::span<const uint8_t> input, const FuzzSetup &setup);

/// A scenario as a seed input of the text form: its text, after a first
/// comment line naming \p origin, so that it begins with '#'.
std::string encodeSeed(const conformance::Scenario &scenario,
                       std::string_view origin);

/// An input that makes the backend under test diverge from the model (or
/// from its partner), or fail to set up a generated scenario.
struct Finding {
  DecodedInput input;
  conformance::RunResult result;

  /// What diverged, how the input decoded, and the scenario in text form.
  std::string report() const;
};

/// The result of running one residency or differential input.
struct InputCheck {
  /// Set when the input decodes to no scenario.
  std::optional<Rejection> rejected;
  /// Set when it decodes to a scenario that fails.
  std::optional<Finding> finding;
};

/// Decodes \p input and runs it with the one runner on \p setup's backends.
/// A setup error of a text input (a device parameter the backend refuses)
/// is a rejection; of a choices input, a finding.
InputCheck checkScenarioInput(std::span<const uint8_t> input,
                              const FuzzSetup &setup);

/// Checks the scenario text parser and printer on \p text: an input that
/// parses prints to a text that parses back to the same scenario. Returns
/// what went wrong, or "" (a parse error is no problem: it is an answer).
std::string checkScenarioText(std::string_view text);

} // namespace drt::fuzz

#endif // DRT_FUZZ_FUZZINPUT_H
