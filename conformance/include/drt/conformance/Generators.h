//===- drt/conformance/Generators.h - Scenario generators -------*- C++ -*-===//
//
// rapidcheck state-machine generators over the scenario commands. The
// generator state is the reference model, so every generated command names
// live objects and the model knows its outcome; command choice is weighted
// per property family (uniform choice misses deep bugs), and rapidcheck's
// size bounds the number of steps.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_CONFORMANCE_GENERATORS_H
#define DRT_CONFORMANCE_GENERATORS_H

#include "drt/conformance/Model.h"
#include "drt/conformance/Scenario.h"

#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <map>
#include <memory>
#include <vector>

namespace drt::conformance {

/// What a generator produces: devices, command weights and value ranges.
struct GeneratorProfile {
  /// The devices every scenario declares.
  std::vector<DeviceSpec> devices;
  /// Relative weight of each command kind; a kind not listed is never chosen.
  std::map<CommandKind, int> weights;
  /// Element kinds tensors are created with.
  std::vector<ElemKind> elemKinds = {ElemKind::Float32, ElemKind::Int32};
  /// Shapes tensors are created with.
  std::vector<std::vector<size_t>> shapes = {{4}, {4}, {4}, {8}, {2, 4}};
  /// Element counts of partial views (capped at the source's size); not
  /// empty, none zero.
  std::vector<size_t> viewLengths = {1, 2, 4};
  /// Most tensors alive at once (create stops being chosen beyond it).
  size_t maxTensors = 12;
  /// Sizes (in bytes) of raw allocations to choose from, besides the
  /// exact size of a live tensor.
  std::vector<uint64_t> allocationSizes = {16, 32, 64};
  /// Fault codes inject-fault chooses from.
  std::vector<ErrorCode> faultCodes = {ErrorCode::DeviceError,
                                       ErrorCode::DeviceLost};
};

/// The scenario builder the rapidcheck commands run against: it only
/// collects the commands; the runner executes them afterwards.
struct ScenarioBuilder {
  std::vector<Command> commands;
};

/// One generated step as a rapidcheck command.
class GeneratedCommand final
    : public rc::state::Command<Model, ScenarioBuilder> {
public:
  explicit GeneratedCommand(conformance::Command command)
      : command_(std::move(command)) {}

  /// The command is still well formed in \p model (names exist or are
  /// fresh as needed); rapidcheck rechecks this while shrinking.
  void checkPreconditions(const Model &model) const override;
  void apply(Model &model) const override;
  void run(const Model &model, ScenarioBuilder &builder) const override;
  void show(std::ostream &os) const override;

  const conformance::Command &command() const { return command_; }

private:
  conformance::Command command_;
};

/// True when \p command names only objects that \p model can act on.
bool commandFitsModel(const Command &command, const Model &model);

/// The generator of whole scenarios for \p profile on a backend declaring
/// \p capabilities.
rc::Gen<Scenario> genScenario(const GeneratorProfile &profile,
                              const Capabilities &capabilities);

} // namespace drt::conformance

#endif // DRT_CONFORMANCE_GENERATORS_H
