//===- Properties.cpp - Property families ---------------------------------===//
#include "drt/conformance/Properties.h"

#include "drt/conformance/ChoiceSource.h"

#include "drt/BackendRegistry.h"
#include "drt/conformance/Configuration.h"
#include "drt/conformance/Runner.h"
#include "drt/conformance/ScenarioText.h"
#include "drt/conformance/Shrink.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <set>
#include <unistd.h>

namespace drt::conformance {

std::string PropertyResult::statusText() const {
  switch (status) {
  case Status::Passed:
    return "passed";
  case Status::Incomplete:
    return "passed, coverage incomplete";
  case Status::Failed:
    return "FAILED";
  case Status::Skipped:
    return "skipped";
  }
  return "?";
}

uint64_t familySeed(uint64_t seed, const std::string &family, int shard) {
  // FNV-1a over the family name, mixed with the seed and the shard. The
  // offset basis is not FNV's own (a digit short), and stays: it decides
  // every property's cases for a given seed.
  uint64_t h = fnv1a(family, 1469598103934665603ull);
  h ^= seed * 0x9E3779B97F4A7C15ull;
  h ^= uint64_t(shard) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h;
}

namespace {

using K = CommandKind;

/// The backend whose devices sit beside the backend under test where a
/// family needs a device of another backend: the reference device.
constexpr const char *ReferenceBackend = "fake";

std::string needsResident(const Capabilities &c) {
  return c.residentTensors ? "" : "the backend declares no resident tensors";
}

DeviceSpec device(std::string name, uint64_t budget = 0) {
  DeviceSpec d;
  d.name = std::move(name);
  d.budget = budget;
  return d;
}

/// Weights shared by the lifecycle families, then adjusted per family.
std::map<CommandKind, int> baseWeights() {
  return {{K::Create, 6},     {K::View, 3},     {K::Clone, 1},
          {K::Destroy, 2},    {K::ToDevice, 6}, {K::FromDevice, 4},
          {K::Release, 2},    {K::Read, 4},     {K::Write, 2},
          {K::MoveAssign, 1}, {K::SelfMove, 1}, {K::MoveConstruct, 1}};
}

GeneratorProfile oneDevice(std::map<CommandKind, int> weights,
                           uint64_t budget = 0) {
  GeneratorProfile p;
  p.devices = {device("d0", budget)};
  p.weights = std::move(weights);
  return p;
}

/// The faults family's key states: a failed to-device and from-device, and
/// every pair of fault site and code it plans struck (fault-struck-SITE-
/// CODE), so that a code one site reports differently (an OutOfMemory at a
/// run reported as DeviceError) is met whatever the seed.
std::vector<std::string> faultsKeyLabels() {
  std::vector<std::string> keys = {"fault-failed-to-device",
                                   "fault-failed-from-device"};
  for (FaultSite site : {FaultSite::Allocation, FaultSite::TransferToDevice,
                         FaultSite::TransferFromDevice, FaultSite::Run})
    for (ErrorCode code : {ErrorCode::DeviceError, ErrorCode::OutOfMemory,
                           ErrorCode::DeviceLost})
      keys.push_back("fault-struck-" + std::string(faultSiteName(site)) + "-" +
                     std::string(errorCodeName(code)));
  return keys;
}

/// Device loss: shutdowns, refills, and runs on the device still up over
/// inputs the other one lost (DeviceLost) or left Host.
GeneratorProfile deviceLossProfile() {
  auto w = baseWeights();
  w[K::Shutdown] = 3;
  w[K::Refill] = 6;
  w[K::Release] = 3;
  w[K::ToDevice] = 8;
  w[K::AddNetwork] = 2;
  w[K::Run] = 6;
  w[K::EvictNetwork] = 1;
  w[K::EnsureOutputs] = 2;
  GeneratorProfile p = oneDevice(w);
  p.devices.push_back(device("d1"));
  // Two element kinds and two shapes a case: most tensors, lost ones among
  // them, fit a network.
  p.kindsPerScenario = 2;
  p.shapes = {{16}, {3, 5}};
  return p;
}

/// Why a backend of capabilities \p c cannot run the device-loss
/// properties, or "" when it can.
std::string needsDeviceLoss(const Capabilities &c) {
  if (!c.deviceLoss)
    return "the backend does not declare device loss";
  return needsResident(c);
}

std::vector<PropertyFamily> makeFamilies() {
  std::vector<PropertyFamily> f;
  f.push_back({"view-sharing",
               "views share storage and residency with their owner",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::View] = 8;
                 w[K::Read] = 8;
                 w[K::Write] = 4;
                 GeneratorProfile p = oneDevice(w);
                 // Twins, equal or differing only in the middle, on a
                 // device that may share the blocks of equal uploads.
                 p.contentTwinsPercent = 50;
                 return p;
               },
               {"view-observes-Device", "view@Device"}});
  f.push_back({"clone-independence",
               "a clone is independent of its source in data and residency",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::Clone] = 8;
                 w[K::Write] = 5;
                 w[K::FromDevice] = 6;
                 return oneDevice(w);
               },
               {"clone@Host", "clone@Device"}});
  f.push_back({"move-semantics",
               "moves empty their source, move-assign releases the target "
               "once, self-move is a no-op",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::MoveAssign] = 8;
                 w[K::MoveConstruct] = 5;
                 w[K::SelfMove] = 3;
                 return oneDevice(w);
               },
               {"move-assign-onto-resident", "self-move@",
                "outcome-violation use-of-moved-from"}});
  f.push_back({"double-release",
               "releasing twice is a success that frees once",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::DoubleRelease] = 8;
                 w[K::Release] = 5;
                 return oneDevice(w);
               },
               {"double-release-of-resident"}});
  f.push_back({"round-trips",
               "to-device / from-device keep and release, Mirrored reads and "
               "writes",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::FromDevice] = 8;
                 w[K::Write] = 4;
                 w[K::Refill] = 2;
                 return oneDevice(w);
               },
               {"host-write-drops-mirror", "to-device-already-Mirrored"}});
  // Transfers and runs call back to a program that may call the device
  // again from the callback: two families ask (RunOptions).
  f.back().asksDevicesFromCallbacks = true;
  f.push_back({"destruction-releases-once",
               "the last reference of a resident record frees it exactly "
               "once; views keep records alive",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::Destroy] = 8;
                 w[K::View] = 6;
                 return oneDevice(w);
               },
               {"destroy-while-shared-and-resident",
                "last-reference-releases-Device"}});
  f.push_back({"accounting",
               "used bytes and live allocations are exact after every step; "
               "budgets give OutOfMemory; raw locations are checked",
               [](const Capabilities &c) {
                 if (!c.memoryBudget)
                   return std::string(
                       "the backend does not enforce a memory budget");
                 return needsResident(c);
               },
               [] {
                 auto w = baseWeights();
                 w[K::Alloc] = 5;
                 w[K::Free] = 4;
                 w[K::ToDevice] = 8;
                 w[K::AddNetwork] = 2;
                 w[K::Run] = 4;
                 GeneratorProfile p = oneDevice(w);
                 p.drawBudgets = true;
                 // Uploads, read-backs and runs issued without waiting:
                 // frees, allocations and budgets meet work in flight, where
                 // a device that reclaims a free only once the work queued
                 // before it has run still counts it.
                 p.pipelinePercent = 30;
                 p.freeBehindPendingPercent = 50;
                 return p;
               },
               {"out-of-memory", "takes-over-location"}});
  f.push_back({"runs-and-outputs",
               "runs leave outputs resident; ensureOutputsAvailable brings "
               "them back, past one that fails; results are exact",
               needsResident,
               [] {
                 std::map<CommandKind, int> w = {
                     {K::Create, 8},        {K::ToDevice, 4},
                     {K::FromDevice, 2},    {K::Read, 5},
                     {K::AddNetwork, 3},    {K::Run, 10},
                     {K::EnsureOutputs, 5}, {K::EvictNetwork, 1},
                     {K::Destroy, 1},       {K::View, 1}};
                 GeneratorProfile p = oneDevice(w);
                 // On a device that can fail a read-back, ensure-outputs
                 // now and then meets one output that fails (semantics §7),
                 // and a run now and then the fault planned for it.
                 p.faultedEnsurePlanPercent = 20;
                 p.runFaultPercent = 8;
                 // A block freed right after its upload under a run's new
                 // output, in one case in two.
                 p.releasedBlockRunPercent = 50;
                 // A network of many placeholders, in one case in five.
                 p.wideRunPercent = 20;
                 // Every code a run or read-back may fail with, in turn.
                 p.faultCodes = {ErrorCode::DeviceError, ErrorCode::OutOfMemory,
                                 ErrorCode::DeviceLost};
                 // A network now and then a near twin of one placed: a
                 // backend's cache of compiled code must tell them apart.
                 p.nearTwinNetworkPercent = 25;
                 return p;
               },
               {"run-leaves-outputs-resident", "ensure-outputs-brings-back",
                "run-input-in-place"}});
  f.back().asksDevicesFromCallbacks = true;
  f.push_back({"runs-on-views",
               "views at an offset into resident tensors are run inputs in "
               "place; results are exact",
               needsResident,
               [] {
                 std::map<CommandKind, int> w = {
                     {K::Create, 6},     {K::View, 6},         {K::ToDevice, 6},
                     {K::AddNetwork, 3}, {K::Run, 10},         {K::Read, 2},
                     {K::FromDevice, 2}, {K::EnsureOutputs, 3}};
                 GeneratorProfile p = oneDevice(w);
                 // Two element kinds a case, so that most tensors fit a
                 // network while every kind (elements of one to eight
                 // bytes, so that offsets fall between words and are
                 // counted in elements of each size) comes up across cases,
                 // and larger tensors than elsewhere, so that views start
                 // past the offsets where a backend's arithmetic changes
                 // (64 KiB and more).
                 p.kindsPerScenario = 2;
                 p.sizeClassWeights = {8, 24, 20, 14, 22, 6, 3};
                 // Its key state takes several commands in a row: plan
                 // them for half the runs that lack it.
                 p.viewInputPlanPercent = 50;
                 return p;
               },
               {"run-input-view-at-offset-in-place"}});
  // Its key state takes several commands in a row (a network, a tensor of
  // its kind with room, a view at an offset, the transfer, the run), about
  // one case in seven: a slow or busy backend's time budget must still
  // buy enough cases to reach it.
  f.back().minCases = 40;
  // Its views start past 64 KiB, which a fuzzer's small bound on live
  // bytes would rule out.
  f.back().aboutLargeTensors = true;
  f.push_back({"numerics",
               "runs of every operation over every element kind compute "
               "exact results from specials, extremes, ties and random bits",
               [](const Capabilities &) { return std::string(); },
               [] {
                 std::map<CommandKind, int> w = {
                     {K::Create, 8}, {K::ToDevice, 3}, {K::AddNetwork, 3},
                     {K::Run, 12},   {K::Read, 3},     {K::FromDevice, 1}};
                 GeneratorProfile p = oneDevice(w);
                 // One kind a case and a few small shapes: nearly every
                 // tensor fits a network, and a case costs little, so that
                 // a slow backend's time budget still buys many pairs of
                 // operation, kind and values. A shape spans each value
                 // class's list several times, so that a node meets its
                 // neighbours' pairs (ties, inf - inf, denormal sums).
                 p.kindsPerScenario = 1;
                 p.shapes = {{1}, {7}, {16}, {33}, {2, 40}, {100}};
                 p.unusualValuesPercent = 80;
                 // Two to six nodes a network: more pairs of operation and
                 // values a run, for about the same cost a case.
                 p.minNetworkNodes = 2;
                 p.maxNetworkNodes = 6;
                 // Each pair of adjacent operations per kind on purpose: a
                 // backend that fuses or reorders nodes shows on one pair.
                 p.coverNodePairs = true;
                 // A network of many placeholders, in one case in five.
                 p.wideRunPercent = 20;
                 return p;
               },
               {"run-succeeded"}});
  f.push_back({"copy-outputs-to-host",
               "with copyDeviceTensorsToHost a run leaves its outputs on "
               "host",
               [](const Capabilities &) { return std::string(); },
               [] {
                 std::map<CommandKind, int> w = {
                     {K::Create, 8},     {K::ToDevice, 3}, {K::Read, 5},
                     {K::AddNetwork, 3}, {K::Run, 10},     {K::Destroy, 1}};
                 GeneratorProfile p = oneDevice(w);
                 p.devices[0].copyToHost = true;
                 return p;
               },
               {"run-copies-outputs-to-host"}});
  f.push_back({"cross-device",
               "tensors move between two devices of one backend; runs move "
               "their inputs; raw locations are taken over, or handed to the "
               "other device, which refuses them",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::ToDevice] = 10;
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 6;
                 w[K::Alloc] = 2;
                 w[K::Free] = 2;
                 GeneratorProfile p = oneDevice(w);
                 // One element kind, so that most tensors fit a network and
                 // a run finds an input resident on the other device often
                 // enough for the key states (its cases are spread over the
                 // configurations).
                 p.space.elemKinds = {ElemKind::Float32};
                 p.devices.push_back(device("d1"));
                 p.foreignLocationPercent = 30;
                 // Twins on one device or on both: devices of one backend
                 // may share what they store.
                 p.contentTwinsPercent = 50;
                 // The second device in another configuration of the
                 // backend now and then: state the process shares between
                 // devices (compiled code, pools) filled under one
                 // configuration must not serve the other.
                 p.otherConfigurationPercent = 30;
                 // Networks now and then twins of one placed, on either
                 // device (makeNearTwin).
                 p.nearTwinNetworkPercent = 25;
                 return p;
               },
               {"cross-device-move-from-Device", "run-input-moved"},
               /*aboutMovesBetweenDevices=*/true});
  f.push_back({"resident-elsewhere",
               "runs whose inputs are resident on a device of another "
               "backend (the fake reference device), and outputs going back",
               [](const Capabilities &) {
                 return BackendRegistry::instance().find(ReferenceBackend)
                            ? std::string()
                            : "the reference backend '" +
                                  std::string(ReferenceBackend) +
                                  "' is not registered";
               },
               [] {
                 auto w = baseWeights();
                 w[K::ToDevice] = 10;
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 8;
                 w[K::EnsureOutputs] = 2;
                 GeneratorProfile p = oneDevice(w);
                 // One element kind, so that most tensors fit a network.
                 p.space.elemKinds = {ElemKind::Float32};
                 DeviceSpec ref = device("ref");
                 ref.backend = ReferenceBackend;
                 p.devices.push_back(ref);
                 return p;
               },
               {"run-input-moved-across-backends", "run-succeeded"}});
  f.push_back(
      {"pipelined",
       "transfers issued without waiting; the commands after them "
       "meet the record busy and wait for it",
       needsResident,
       [] {
         auto w = baseWeights();
         w[K::ToDevice] = 10;
         w[K::FromDevice] = 8;
         w[K::Read] = 6;
         w[K::Write] = 4;
         w[K::Release] = 3;
         w[K::Refill] = 2;
         w[K::AddNetwork] = 2;
         w[K::Run] = 4;
         w[K::EnsureOutputs] = 2;
         // Devices shut down before transfers issued without waiting: a
         // command that meets a record busy with one waits for it before it
         // finds its device lost (never while one is in flight:
         // validateScenario). No faults: which of two records' operations
         // issued without waiting reaches the device first, and meets a
         // planned fault, is a matter of timing.
         w[K::Shutdown] = 1;
         w[K::Alloc] = 4;
         w[K::Free] = 2;
         GeneratorProfile p = oneDevice(w);
         p.devices.push_back(device("d1"));
         p.space.elemKinds = {ElemKind::Float32};
         p.pipelinePercent = 60;
         p.freeBehindPendingPercent = 30;
         return p;
       },
       {"issued-without-waiting", "read-meets-pending-transfer",
        "write-meets-pending-transfer", "from-device-meets-pending-transfer",
        "to-device-meets-pending-transfer",
        "transfer-beside-pending-transfer"}});
  f.push_back(
      {"run-chains",
       "runs issued without waiting, each on what the runs before it left "
       "on the device: a device that performs runs in order takes them "
       "back to back, and every result is the one of program order",
       needsResident,
       [] {
         // Evicting a network while its runs are in flight: they still
         // compute their results.
         std::map<CommandKind, int> w = {
             {K::Create, 5},      {K::ToDevice, 6},   {K::FromDevice, 2},
             {K::Read, 2},        {K::Write, 1},      {K::Release, 1},
             {K::Refill, 1},      {K::AddNetwork, 3}, {K::Run, 14},
             {K::EvictNetwork, 2}};
         GeneratorProfile p = oneDevice(w);
         // Few shapes and kinds, so that most tensors fit most networks.
         p.maxTensors = 8;
         p.maxNetworkNodes = 2;
         p.shapes = {{64}, {3, 100}};
         p.space.elemKinds = {ElemKind::Float32, ElemKind::Int32};
         p.pipelinePercent = 70;
         // A run reading, through a view, part of what the run before it
         // writes, in one case in three.
         p.viewOfPendingOutputPercent = 35;
         // Three runs, the third overwriting what the second reads, in one
         // case in four.
         p.writeAfterReadPercent = 25;
         p.freeBehindPendingPercent = 30;
         p.nearTwinNetworkPercent = 25;
         return p;
       },
       {"run-issued-without-waiting", "run-joins-pending-run",
        "evict-while-run-pending"}});
  {
    PropertyFamily parallel{
        "parallel",
        "a sequential prefix, then 2-3 branches on threads of their own "
        "moving, reading, writing and running networks over shared records "
        "and records of their own; the history is checked for "
        "linearizability against the model",
        needsResident,
        [] {
          std::map<CommandKind, int> w = {{K::Create, 6},     {K::ToDevice, 5},
                                          {K::FromDevice, 3}, {K::Read, 2},
                                          {K::Write, 2},      {K::View, 1},
                                          {K::Release, 1}};
          GeneratorProfile p = oneDevice(w);
          p.devices.push_back(device("d1"));
          p.maxTensors = 5;
          p.parallelBranches = MaxBranches;
          p.branchLength = 4;
          p.branchShutdownPercent = 25;
          p.branchFaultPercent = 20;
          p.contendedBudgetPercent = 20;
          // A release beside another branch's upload, then an upload into
          // the freed room.
          p.freeBesideUploadPercent = 15;
          // Runs over the shared records, taking them together on several
          // threads, beside transfers, reads and writes of them.
          p.sharedRunsPercent = 50;
          // Two waiters on one busy record need a shape of their own; on
          // the fake device (async=1) its read-back then takes up to 3 ms
          // instead of 0.2, long enough for the other branches to arrive,
          // and on OpenCL each command waits 1.5-3 ms before it may start,
          // however fast the device.
          p.fanInPercent = 50;
          p.fanInDeviceParameters = {{"fake:max-delay-us", "3000"},
                                     {"opencl:driver-delay-us", "3000"}};
          // Resident twins that the branches drop together: a device that
          // deduplicates equal uploads counts one block's holders down on
          // several threads at once.
          p.branchTwinsPercent = 60;
          // Half the cases with the backend's race windows widened
          // (BackendParameter::widensRacesWith).
          p.raceWideningPercent = 50;
          return p;
        },
        // Whether branches overlap in time is the machine's doing, not the
        // generator's: counted (branches-overlapped), not required. Two
        // branches meeting one record busy together is what fan-in blocks
        // are for: required, as are runs on two threads that bind a record
        // in common.
        {"parallel-block", "linearized", "waiters-on-busy-record",
         "runs-share-records"}};
    parallel.steps = 20;
    // Twice the budget: runs over shared records deadlock, where they
    // would, only when both threads take their first record at once.
    parallel.timeShare = 2;
    f.push_back(std::move(parallel));
  }
  {
    PropertyFamily concurrent{
        "concurrent-records",
        "a sequential prefix that puts records on two devices, then 2-3 "
        "branches on threads of their own, each moving, reading and running "
        "networks over records no other branch touches: what links them is "
        "the backend's own state (staging buffers, allocators, queues, "
        "kernels)",
        needsResident,
        [] {
          std::map<CommandKind, int> w = {{K::Create, 6},     {K::ToDevice, 6},
                                          {K::FromDevice, 2}, {K::Write, 1},
                                          {K::AddNetwork, 4}, {K::Run, 2}};
          GeneratorProfile p = oneDevice(w);
          p.devices.push_back(device("d1"));
          p.maxTensors = 8;
          // Few shapes and kinds, so that a branch often owns tensors of a
          // network's type and can run it.
          p.maxNetworkNodes = 2;
          p.shapes = {{16}, {3, 100}, {4096}};
          p.space.elemKinds = {ElemKind::Float32, ElemKind::Int32};
          p.parallelBranches = MaxBranches;
          p.branchLength = 6;
          p.sharedRecords = 0;
          // A shutdown while the other branches' transfers use the
          // backend's queue and staging buffers.
          p.branchShutdownPercent = 15;
          // One in ten of those shutdowns takes down a device while another
          // branch copies a record of 33 to 48 MiB to it or back from it, a
          // copy of milliseconds, and then destroys the record: a device
          // that frees its memory without waiting for its copies, or whose
          // copy still reads the source or writes the destination after
          // the shutdown returned, then crashes in the copy (blocks past
          // 32 MiB are unmapped when freed, MappedAllocationBytes), where
          // beside the few MiB of other records it touched freed memory
          // that was still mapped and intact (a probe backend: 0 crashes
          // in 1,500 such blocks with 8 MiB). The live bytes allow that
          // record beside the input space's 24 MiB.
          p.longCopyBesideShutdownPercent = 10;
          p.space.maxLiveBytes += p.longCopyBytes.second;
          p.branchFaultPercent = 15;
          // Two uploads at once that a device's budget fits one of: its
          // allocator's check and its accounting must be one step.
          p.contendedBudgetPercent = 25;
          p.freeBesideUploadPercent = 20;
          p.branchTwinsPercent = 30;
          p.raceWideningPercent = 50;
          return p;
        },
        {"parallel-block", "linearized"}};
    concurrent.steps = 28;
    // Its branches share no record, so that what they meet in is the
    // backend's own machinery: steered towards their meeting in each
    // shared path (the parallel family's branches mostly meet on the
    // records they share, where the framework makes them wait; its blocks
    // took the backend's shared paths in about one case in two on POCL,
    // and overlapped none in 148 cases, so more rounds there buy nothing).
    concurrent.overlapsSharedPaths = true;
    concurrent.aboutMovesBetweenDevices = true;
    // Four times the budget: its bugs (a kernel's arguments set outside
    // the lock, a staging buffer given back early, a fault struck at the
    // wrong completion) show only in the cases whose threads meet inside a
    // few microseconds, and its time is spread over every configuration.
    // Two more for its shutdowns beside long copies, which took a third
    // of its time.
    concurrent.timeShare = 6;
    f.push_back(std::move(concurrent));
  }
  f.push_back({"faults",
               "injected out-of-memory, failing transfers and runs, lost "
               "devices leave records consistent",
               [](const Capabilities &c) {
                 if (!c.faultInjection)
                   return std::string(
                       "the backend does not declare fault injection");
                 return needsResident(c);
               },
               [] {
                 auto w = baseWeights();
                 // A failed read-back needs a planned from-device fault and
                 // a Device tensor to read back before a DeviceLost ends the
                 // case: plan and transfer often, lose the device less.
                 w[K::InjectFault] = 8;
                 w[K::FromDevice] = 12;
                 w[K::ToDevice] = 12;
                 w[K::Read] = 2;
                 w[K::AddNetwork] = 2;
                 w[K::Run] = 6;
                 w[K::Refill] = 2;
                 // Raw locations, so that a failing upload may be one to a
                 // given location (which stays the caller's); outputs
                 // brought back while a read-back fault is planned.
                 w[K::Alloc] = 2;
                 w[K::Free] = 1;
                 w[K::EnsureOutputs] = 3;
                 GeneratorProfile p = oneDevice(w);
                 p.faultCodes = {ErrorCode::DeviceError, ErrorCode::DeviceError,
                                 ErrorCode::OutOfMemory, ErrorCode::DeviceLost};
                 // Budgets, so that allocations the budget refuses come
                 // between planned faults and count towards them.
                 p.drawBudgets = true;
                 // Networks of two or more outputs over tensors of two
                 // kinds: a read-back fault may strike one output of
                 // several that ensure-outputs brings back.
                 p.kindsPerScenario = 2;
                 p.minNetworkNodes = 2;
                 p.faultedEnsurePlanPercent = 10;
                 p.runFaultPercent = 70;
                 // Faults planned while a read-back is still in flight,
                 // which must not meet them: where a backend counts an
                 // operation (when it is issued, when a worker performs it,
                 // when its completion is delivered) shows.
                 p.faultBehindReadBackPercent = 30;
                 // In a case in four the device's operations stay in flight
                 // a while (the fake device's async=1 delays, OpenCL's
                 // commands held before they start, up to half a
                 // millisecond), so that the command after a read-back
                 // issued without waiting meets it in flight
                 // (BackendParameter::holdsOperationsWith).
                 p.slowDevicePercent = 25;
                 return p;
               },
               faultsKeyLabels()});
  f.push_back({"device-loss",
               "shutdown makes Device records Lost and Mirrored ones Host; "
               "refill recovers",
               needsDeviceLoss,
               deviceLossProfile,
               {"device-lost-makes-Lost", "refill-of-Lost"}});
  f.push_back({"async-completion",
               "completions on another thread after random delays: every "
               "callback exactly once, after the record update",
               [](const Capabilities &c) {
                 if (!c.asynchronousCompletion)
                   return std::string("the backend does not declare "
                                      "asynchronous completion");
                 return needsResident(c);
               },
               [] {
                 auto w = baseWeights();
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 8;
                 w[K::EnsureOutputs] = 3;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 return p;
               },
               {"from-device@Device", "run-succeeded"}});
  f.push_back(
      {"sizes",
       "tensors from one element to several MiB, at and around the "
       "sizes where a backend changes path, keep their contents "
       "through every transfer",
       needsResident,
       [] {
         auto w = baseWeights();
         w[K::Write] = 4;
         w[K::FromDevice] = 6;
         w[K::AddNetwork] = 2;
         w[K::Run] = 3;
         GeneratorProfile p = oneDevice(w);
         p.devices.push_back(device("d1"));
         p.sizeClassWeights = {4, 8, 10, 14, 20, 22, 22};
         p.maxTensors = 8;
         // Networks of 1 to 6 MiB, mostly of one- and two-byte
         // kinds, whose runs cover millions of elements.
         p.largeNetworkPercent = 50;
         return p;
       },
       {"to-device@Host", "from-device@Device", "run-of-elements-over-4Mi"}});
  f.back().aboutLargeTensors = true;
  {
    PropertyFamily longLived{
        "long-lived",
        "one device serves thousands of allocations in a case: freed memory "
        "is reused hundreds of times and accounting stays exact",
        needsResident,
        [] {
          std::map<CommandKind, int> w = {
              {K::Create, 8},  {K::Destroy, 6},    {K::ToDevice, 14},
              {K::Release, 8}, {K::FromDevice, 4}, {K::Alloc, 6},
              {K::Free, 6},    {K::Read, 2},       {K::Write, 2},
              {K::View, 2},    {K::MoveAssign, 1}, {K::DoubleRelease, 1}};
          GeneratorProfile p = oneDevice(w);
          p.sizeClassWeights = {20, 50, 30, 2};
          // Three anchors, uploaded first, read back at the end (and the
          // last one every 500 commands): the device's oldest allocations
          // hold contents someone reads while thousands turn over.
          p.anchorTensors = 3;
          p.anchorReadPeriod = 500;
          // A slot reused hundreds of times with a stale location named
          // every cycle, and hundreds of allocations live at once.
          p.allocationBursts = true;
          // Hundreds of records of one content live at once, in half the
          // cases.
          p.contentBurstPercent = 50;
          // Dozens of networks placed at once, in half the cases.
          p.networkBurstPercent = 50;
          p.maxTensors = 16 + 3;
          // Host records are the ones a transfer allocates for.
          p.stateWeights = {8, 2, 2, 1, 1};
          return p;
        },
        {"last-reference-releases-Device", "release-of-Device"}};
    longLived.steps = 8000;
    longLived.minCases = 3;
    longLived.minAllocationsOnOneDevice = 1000;
    f.push_back(std::move(longLived));
  }
  f.push_back({"mixed",
               "every command, weighted towards deep residency states",
               needsResident,
               [] {
                 auto w = baseWeights();
                 w[K::DoubleRelease] = 1;
                 w[K::Refill] = 1;
                 w[K::AddNetwork] = 3;
                 w[K::Run] = 5;
                 w[K::EnsureOutputs] = 2;
                 w[K::EvictNetwork] = 1;
                 w[K::Alloc] = 1;
                 w[K::Free] = 1;
                 // A Mirrored record (from-device keep) is short-lived:
                 // transfer both ways often enough to move one again.
                 w[K::FromDevice] = 8;
                 w[K::ToDevice] = 8;
                 GeneratorProfile p = oneDevice(w);
                 p.devices.push_back(device("d1"));
                 p.drawBudgets = true;
                 p.contentTwinsPercent = 30;
                 return p;
               },
               {"to-device@Mirrored", "cross-device-move-"}});
  // The newest properties come last, so that the ones before them keep
  // their cases and their order in a --fail-fast run.
  f.push_back(
      {"shutdown-beside-transfers",
       "a device shut down on one thread while another moves records on "
       "it: every operation completes exactly once, with DeviceLost or "
       "before the shutdown; the history is checked for linearizability",
       needsDeviceLoss,
       [] {
         GeneratorProfile p = deviceLossProfile();
         // Every case ends with two branches, one of which shuts a device
         // down among its commands while the other moves records on it,
         // in half the cases on devices that hold their operations in
         // flight. A sequence cannot have it: a shutdown there follows the
         // work before it. The framework completes the operations it holds
         // in flight itself; what only such a block shows is an operation
         // that reaches the backend while the shutdown runs, which the
         // backend must still complete.
         p.parallelBranches = 2;
         p.branchLength = 3;
         p.branchShutdownPercent = 100;
         p.slowDevicePercent = 50;
         return p;
       },
       {"parallel-block", "linearized"}});
  f.push_back(
      {"calls-from-callbacks",
       "transfers, releases and shutdowns issued from inside the completion "
       "callback of the transfer or run before them, on the thread the "
       "backend calls back on: each has the outcome of program order",
       needsDeviceLoss,
       [] {
         std::map<CommandKind, int> w = {
             {K::Create, 6},     {K::View, 2},       {K::Destroy, 1},
             {K::ToDevice, 8},   {K::FromDevice, 8}, {K::Release, 3},
             {K::Read, 3},       {K::Write, 2},      {K::Refill, 3},
             {K::AddNetwork, 2}, {K::Run, 5},        {K::EnsureOutputs, 1},
             {K::Shutdown, 1}};
         GeneratorProfile p = oneDevice(w);
         p.devices.push_back(device("d1"));
         p.inCallbackPercent = 50;
         // Callbacks that come late, on a thread of the device's own.
         p.slowDevicePercent = 25;
         return p;
       },
       {"issued-in-callback", "shutdown-in-callback"}});
  f.back().asksDevicesFromCallbacks = true;
  return f;
}

bool reached(const std::map<std::string, int> &labels,
             const std::string &prefix) {
  auto it = labels.lower_bound(prefix);
  return it != labels.end() && it->first.rfind(prefix, 0) == 0;
}

/// Further rounds (of the time budget, or of the cases) a property runs while
/// a key state is missing.
constexpr int CoverageRounds = 3;

/// The seed of case \p index of a row whose seed is \p seed.
uint64_t caseSeed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// One configuration while a family runs in it.
struct Row {
  PropertyResult result;
  Capabilities capabilities;
  std::optional<ScenarioGenerator> generator;
  /// Cases per round when the run has a case count.
  int cases = 0;
  /// The next case's number (a shard runs every shardCount-th one).
  uint64_t index = 0;
  std::optional<Scenario> failing;
  /// The suite itself failed on a case it generated (ModelFailure): the
  /// row is failed with the reason, and runs no more cases.
  bool broken = false;
  std::string failure;
  uint64_t failingSeed = 0;
  /// The paths the row's devices reported as shared between threads
  /// (RunResult::concurrentPaths).
  std::set<std::string> concurrentPaths;
};

/// The parameters a row's devices get: the configuration's and, for each
/// declared parameter that seeds the backend's own randomness and that the
/// configuration leaves alone, one derived from the row's seed.
ParameterMap rowParameters(const BackendInfo &info,
                           const ParameterMap &configuration, uint64_t seed) {
  ParameterMap out = configuration;
  for (const BackendParameter &p : info.parameters)
    if (p.seedsRandomness && !out.count(p.name))
      out[p.name] = std::to_string(seed % 1000 + 1);
  return out;
}

/// A parameter \p configuration sets, beyond the \p fixed ones, whose
/// scope is moves between devices; "" when there is none.
std::string betweenDevicesParameter(const BackendInfo &info,
                                    const ParameterMap &configuration,
                                    const ParameterMap &fixed) {
  for (const BackendParameter &p : info.parameters)
    if (p.scope == BackendParameter::Scope::BetweenDevices &&
        configuration.count(p.name) && !fixed.count(p.name))
      return p.name;
  return "";
}

/// Where a failing scenario of \p family found in \p result's
/// configuration is written: the failures directory, the family, the
/// backend, the configuration and the seed, then \p suffix.
std::string scenarioFileName(const PropertyFamily &family,
                             const PropertyOptions &options,
                             const PropertyResult &result,
                             const std::string &suffix) {
  std::string dir =
      options.failureDirectory.empty() ? "." : options.failureDirectory;
  std::string configuration =
      result.configuration == "default" ? "" : "-" + result.configuration;
  std::string file = dir + "/" + family.name + "-" + options.backend +
                     configuration + "-" + std::to_string(options.seed) +
                     suffix + ".scn";
  for (size_t i = dir.size() + 1; i < file.size(); ++i)
    if (file[i] == ':' || file[i] == ' ')
      file[i] = file[i] == ':' ? '_' : '-';
  return file;
}

/// The command that replays scenario \p file as \p options and \p run ran
/// it, with \p parameters (" --param KEY=VALUE ...") after the backends.
std::string replayCommand(const std::string &file,
                          const PropertyOptions &options, const RunOptions &run,
                          const std::string &parameters) {
  return options.replayProgram + " " + file + " --backend " + options.backend +
         (options.against.empty() ? "" : " --against " + options.against) +
         parameters +
         (run.askDevicesFromCallbacks ? " --ask-devices-from-callbacks" : "");
}

/// Replaces the process with \p argv (execv). Called from a signal handler
/// or with a thread stuck in the backend: the new program starts with no
/// alarm and no blocked signal, as a fresh process would. Returns only when
/// the program cannot be started, having said why.
void replaceProcess(const std::vector<std::string> &argv) {
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  alarm(0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(args[0], args.data());
  std::fprintf(stderr, "cannot start %s to shrink the case: %s\n", args[0],
               std::strerror(errno));
}

/// Writes \p text to the file at \p path with system calls alone: after a
/// crash inside the C library's allocator, the malloc of an fopen would
/// never return. Says on standard error when the file cannot be written.
void writeWithoutTheHeap(const std::string &path, const std::string &text) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t written = 0;
  while (fd >= 0 && written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    written += size_t(n);
  }
  if (fd < 0 || written < text.size())
    std::fputs(
        ("cannot write " + path + ": " + std::strerror(errno) + "\n").c_str(),
        stderr);
  if (fd >= 0)
    close(fd);
}

/// Reports a case of \p family whose step the process cannot come back from
/// (AbortedStep: stuck, or crashed): the scenario up to that step, as it ran
/// (configured), goes to a file with its replay command, and the report to
/// standard error. It cannot be shrunk here: the process then turns into
/// the program that shrinks it in child processes (shrinkInPlace), or, when
/// there is none, prints the command that does.
void reportAbortedCase(const AbortedStep &step, const PropertyFamily &family,
                       const PropertyOptions &options,
                       const PropertyResult &result, const RunOptions &run,
                       uint64_t caseSeed) {
  std::string file = scenarioFileName(family, options, result,
                                      step.signal ? "-crashed" : "-stuck");
  std::string replay = replayCommand(file, options, run, "");
  std::string report = step.toString();
  writeWithoutTheHeap(
      file, "# a scenario of property '" + family.name + "' on backend '" +
                options.backend + "' in configuration " + result.configuration +
                ", seed " + std::to_string(options.seed) + " (case seed " +
                std::to_string(caseSeed) + "), up to the step that " +
                (step.signal ? "crashed" : "never returned") +
                " (not shrunk)\n# replay: " + replay + "\n" +
                commentLines(report) + printScenario(step.prefix()));
  // What the shrinker is given after its own command.
  std::vector<std::string> arguments = {file, "--backend", options.backend};
  if (!options.against.empty())
    arguments.insert(arguments.end(), {"--against", options.against});
  // Its first run need not wait longer than this run did to call it stuck.
  if (options.stuckAfterMs)
    arguments.insert(arguments.end(), {"--stuck-after-ms",
                                       std::to_string(options.stuckAfterMs)});
  std::string text = "\n" + family.name + " on " + options.backend + " [" +
                     result.configuration + "]: " + step.verdict() +
                     " (case seed " + std::to_string(caseSeed) + ")\n" +
                     report + "  scenario: " + file +
                     " (up to that step)\nreplay: " + replay + "\n";
  if (options.shrinkInPlace.empty() && !options.shrinkProgram.empty()) {
    text += "shrink: " + options.shrinkProgram;
    for (const std::string &a : arguments)
      text += " " + a;
    text += " (each candidate in a process of its own)\n";
  }
  if (!options.shrinkInPlace.empty())
    text += "shrinking it, each candidate in a process of its own\n";
  std::fputs(text.c_str(), stderr);
  if (options.shrinkInPlace.empty())
    return;
  std::vector<std::string> argv = options.shrinkInPlace;
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  replaceProcess(argv);
}

/// Runs \p row's cases until \p done() says the round is over or a case
/// fails, adding what they reached to the row.
template <typename Done>
void runCases(Row &row, const PropertyFamily &family,
              const PropertyOptions &options, const RunOptions &run,
              Done done) {
  PropertyResult &result = row.result;
  auto started = std::chrono::steady_clock::now();
  size_t maxSteps =
      family.steps ? family.steps : size_t(std::max(options.maxSteps, 1));
  size_t minSteps = std::max<size_t>(maxSteps / 2, 1);
  // A case's expectations would be the outcomes the runner's own model
  // predicts: they are written only into a failing case, which is shrunk
  // and replayed with them.
  RunOptions caseRun = run;
  caseRun.checkWrittenExpectations = false;
  uint64_t seed = 0;
  caseRun.reportAborted = [&](const AbortedStep &stuck) {
    reportAbortedCase(stuck, family, options, result, run, seed);
  };
  for (; !row.failing && !row.broken && !done(); ++row.index) {
    if (int64_t(row.index % uint64_t(options.shardCount)) != options.shardIndex)
      continue;
    seed = caseSeed(result.seed, row.index);
    RandomSource lengths(seed ^ 0x5bd1e995u);
    Scenario s;
    try {
      s = row.generator->generate(
          seed, size_t(lengths.between(minSteps, maxSteps)), &result.labels);
    } catch (const ModelFailure &e) {
      // The generator runs the model: a defect of drt, reported as such,
      // with what reproduces it (no scenario exists to shrink).
      result.status = PropertyResult::Status::Failed;
      result.reason = std::string(e.what()) + ", generating case seed " +
                      std::to_string(seed) + " (a defect of the suite; " +
                      "reproduce with --filter " + family.name + " --seed " +
                      std::to_string(options.seed) + ")";
      row.broken = true;
      ++row.index;
      break;
    }
    Scenario configured =
        configureScenario(s, options.backend, result.parameters);
    RunResult r = runScenario(configured, caseRun);
    ++result.cases;
    result.steps += r.steps;
    result.census.addScenario(configured, row.generator->profile().space);
    result.census.addRun(r);
    for (const auto &[label, n] : r.labels)
      result.labels[label] += n;
    for (const auto &[t, n] : r.transitions)
      result.transitions[t] += n;
    row.concurrentPaths.insert(r.concurrentPaths.begin(),
                               r.concurrentPaths.end());
    if (!r.passed()) {
      // What is printed is the scenario itself; its configuration goes on
      // the replay command line.
      s.commands = annotateExpectations(configured, options.backend).commands;
      row.failing = std::move(s);
      row.failure =
          r.setupError.empty() ? r.divergence->toString() : r.setupError;
      row.failingSeed = seed;
      ++row.index;
      break;
    }
  }
  result.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
}

/// Shrinks a row's failing case and writes the minimal scenario to a file.
void finishFailure(Row &row, const PropertyFamily &family,
                   const PropertyOptions &options, const RunOptions &run) {
  PropertyResult &result = row.result;
  auto started = std::chrono::steady_clock::now();
  auto configure = [&](const Scenario &s) {
    return configureScenario(s, options.backend, result.parameters);
  };
  RunOptions candidateRun = run;
  candidateRun.reportAborted = [&](const AbortedStep &stuck) {
    reportAbortedCase(stuck, family, options, result, run, row.failingSeed);
  };
  auto normalize = [&](const Scenario &s) {
    // Well formed and annotated as configured; printed as it is.
    Scenario w = wellFormedScenario(configure(s), options.backend);
    w.devices = s.devices;
    return w;
  };
  // A case that passes when run again, though nothing in it marks it timing
  // dependent, hangs on an interleaving all the same (an asynchronous
  // device completes on threads of its own): every candidate gets the runs
  // of a timing-dependent one, and the replay command asks for them too.
  bool flaky =
      !timingDependent(*row.failing) &&
      runScenario(configure(normalize(*row.failing)), candidateRun).passed();
  // How many runs the failure takes to come again, when it depends on an
  // interleaving: candidates get three times as many, the replay command
  // ten times as many, so that one that comes once in hundreds of runs is
  // neither shrunk away nor replayed as a pass.
  auto runsToFail = [&](const Scenario &s) {
    return runsUntilItFails(
        [&] { return !runScenario(configure(s), candidateRun).passed(); });
  };
  bool timing = flaky || timingDependent(*row.failing);
  unsigned candidateRuns =
      timing ? candidateRunsFor(runsToFail(normalize(*row.failing))) : 1;
  ShrinkResult shrunk = shrinkScenario(
      *row.failing, normalize,
      [&](const Scenario &s) {
        // An interleaving that fails may not come again: a candidate whose
        // outcome may hang on timing gets several runs.
        unsigned runs = flaky || timingDependent(s) ? candidateRuns : 1;
        for (unsigned i = 0; i < runs; ++i) {
          RunResult r = runScenario(configure(s), candidateRun);
          if (r.passed())
            continue;
          // A candidate the harness refuses is no smaller failure.
          if (r.setupFailure == RunResult::SetupFailure::MalformedScenario)
            return false;
          // The last candidate that fails is the minimal scenario.
          row.failure =
              r.setupError.empty() ? r.divergence->toString() : r.setupError;
          return true;
        }
        return false;
      },
      shrinkLimitsFor(candidateRuns));
  result.shrinksTried = int(shrunk.attempts);
  result.shrinksAccepted = int(shrunk.accepted);
  const Scenario &minimal = shrunk.scenario;
  result.status = PropertyResult::Status::Failed;
  result.reason = row.failure;
  result.minimalScenario = printScenario(minimal);
  result.minimalLength = minimal.commands.size();
  result.scenarioFile = scenarioFileName(family, options, result, "");
  unsigned replayRuns = flaky || timingDependent(minimal)
                            ? replayRunsFor(runsToFail(minimal))
                            : 1;
  result.replayRuns = replayRuns;
  result.replayCommand =
      replayCommand(result.scenarioFile, options, run,
                    parameterOptions(result.parameters)) +
      (replayRuns > 1 ? " --repeat " + std::to_string(replayRuns) : "");
  std::ofstream out(result.scenarioFile);
  out << "# minimal failing scenario of property '" << family.name
      << "' on backend '" << options.backend << "' in configuration "
      << result.configuration << ", seed " << options.seed << " (case seed "
      << row.failingSeed << ")\n# replay: " << result.replayCommand << "\n";
  out << commentLines(row.failure) << result.minimalScenario;
  result.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
}

} // namespace

const std::vector<PropertyFamily> &propertyFamilies() {
  static const std::vector<PropertyFamily> families = makeFamilies();
  return families;
}

uint64_t configurationSeed(uint64_t seed, const std::string &family,
                           const ParameterMap &configuration, int shard) {
  if (configuration.empty())
    return familySeed(seed, family, shard);
  return familySeed(seed, family + " " + configurationName(configuration),
                    shard);
}

PropertyResult runProperty(const PropertyFamily &family,
                           const PropertyOptions &options) {
  return runPropertyInConfigurations(family, options, {options.parameters})
      .front();
}

std::vector<PropertyResult>
runPropertyInConfigurations(const PropertyFamily &family,
                            const PropertyOptions &options,
                            const std::vector<ParameterMap> &configurations) {
  using Clock = std::chrono::steady_clock;
  auto started = Clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - started).count();
  };
  BackendRegistry &registry = BackendRegistry::instance();
  std::vector<Row> rows(configurations.size());
  auto results = [&] {
    std::vector<PropertyResult> out;
    for (Row &row : rows)
      out.push_back(std::move(row.result));
    return out;
  };

  // The partner runs in its default configuration whatever this one is,
  // held to its own capabilities (runScenario gives it a model of its own).
  std::string partnerProblem;
  if (!options.against.empty())
    if (auto caps = registry.capabilitiesFor(options.against, {}); !caps)
      partnerProblem = caps.takeError().message();
  const BackendInfo *info = registry.find(options.backend);
  GeneratorProfile profile = family.profile();
  ParameterMap fixed =
      BackendRegistry::parametersFor(options.backend, options.parameters);
  std::vector<Row *> active;
  for (size_t i = 0; i < configurations.size(); ++i) {
    Row &row = rows[i];
    PropertyResult &r = row.result;
    r.name = family.name;
    r.backend = options.backend;
    r.configuration = configurationName(configurations[i]);
    // Every shard uses the same seed: the shards split the case numbers.
    r.seed = configurationSeed(options.seed, family.name, configurations[i], 0);
    auto caps = registry.capabilitiesFor(options.backend, configurations[i]);
    if (!caps || !partnerProblem.empty()) {
      r.status = PropertyResult::Status::Failed;
      r.reason = caps ? partnerProblem : caps.takeError().message();
      continue;
    }
    // capabilitiesFor found the backend, so info is set.
    r.parameters = rowParameters(*info, configurations[i], r.seed);
    row.capabilities = *caps;
    if (std::string why = family.skipReason(*caps); !why.empty()) {
      r.status = PropertyResult::Status::Skipped;
      r.reason = why;
      continue;
    }
    if (std::string name =
            betweenDevicesParameter(*info, configurations[i], fixed);
        !name.empty() && !family.aboutMovesBetweenDevices) {
      r.status = PropertyResult::Status::Skipped;
      r.reason = "parameter '" + name +
                 "' matters only where tensors move between devices, "
                 "which this family is not about";
      continue;
    }
    if (std::string why =
            unsupportedConfiguration(options.backend, configurations[i]);
        !why.empty()) {
      r.status = PropertyResult::Status::Skipped;
      r.reason = "this configuration is not supported here: " + why;
      continue;
    }
    // The families a row runs, and what its generator draws, follow what
    // the registry declares for the configuration; the device it creates
    // must declare the same, or the suite would skip (or run) the wrong
    // families for it.
    DeviceSpec probe;
    probe.parameters = configurations[i];
    DeviceTraits traits = probedDeviceTraits(options.backend, probe);
    if (!(traits.capabilities == *caps)) {
      r.status = PropertyResult::Status::Failed;
      r.reason = "backend '" + options.backend + "' declares capabilities " +
                 caps->toString() +
                 " for this configuration, but the device it creates "
                 "declares " +
                 traits.capabilities.toString();
      continue;
    }
    GeneratorProfile configured = profile;
    // A parameter of fan-in blocks or slow devices that this device cannot
    // honour is left out: their operations then take as long as the device
    // does.
    auto cannotHonour = [&](const auto &p) {
      std::string prefix = options.backend + ":";
      if (!p.first.starts_with(prefix))
        return false;
      ParameterMap with = configurations[i];
      with[p.first.substr(prefix.size())] = p.second;
      return !unsupportedConfiguration(options.backend, with).empty();
    };
    std::erase_if(configured.fanInDeviceParameters, cannotHonour);
    // The backend's own ways of holding its operations in flight, in the
    // configurations that leave them unset (and can have them). Fan-in
    // blocks take them too, unless the profile names the backend's own
    // (longer) holds: a backend the suite does not know would otherwise
    // complete its holding operation before the waiters arrive.
    bool fanInNamesBackend = std::any_of(
        configured.fanInDeviceParameters.begin(),
        configured.fanInDeviceParameters.end(), [&](const auto &entry) {
          return entry.first.starts_with(options.backend + ":");
        });
    for (const BackendParameter &p : info->parameters) {
      if (p.holdsOperationsWith.empty() || configurations[i].count(p.name) ||
          cannotHonour(
              std::pair(options.backend + ":" + p.name, p.holdsOperationsWith)))
        continue;
      std::string key = options.backend + ":" + p.name;
      if (configured.slowDevicePercent || configured.freeBesideUploadPercent)
        configured.slowDeviceParameters[key] = p.holdsOperationsWith;
      if (configured.fanInPercent && !fanInNamesBackend)
        configured.fanInDeviceParameters[key] = p.holdsOperationsWith;
    }
    // The backend's own ways of widening race windows, in the
    // configurations that leave them unset (and can have them).
    if (configured.raceWideningPercent)
      for (const BackendParameter &p : info->parameters) {
        if (p.widensRacesWith.empty() || configurations[i].count(p.name))
          continue;
        ParameterMap with = configurations[i];
        with[p.name] = p.widensRacesWith;
        if (unsupportedConfiguration(options.backend, with).empty())
          configured.raceWideningParameters[options.backend + ":" + p.name] =
              p.widensRacesWith;
      }
    // The backend's other configurations of these capabilities, for a
    // device beside this configuration's (otherConfigurationPercent).
    if (configured.otherConfigurationPercent)
      for (size_t j = 0; j < configurations.size(); ++j) {
        if (j == i)
          continue;
        auto other =
            registry.capabilitiesFor(options.backend, configurations[j]);
        if (!other) {
          (void)other.takeError();
          continue;
        }
        if (!(*other == *caps) ||
            !unsupportedConfiguration(options.backend, configurations[j])
                 .empty())
          continue;
        std::map<std::string, std::string> parameters;
        for (const auto &[key, value] : configurations[j])
          if (!configurations[i].count(key))
            parameters[options.backend + ":" + key] = value;
        if (!parameters.empty())
          configured.otherConfigurations.push_back(std::move(parameters));
      }
    configured.defaultMaximumMemory = traits.maximumMemory;
    row.generator.emplace(configured, *caps);
    active.push_back(&row);
  }

  // With a case count, the cases are spread evenly over the configurations
  // that run (a sweep costs about what one configuration does); with a time
  // budget, the budget is.
  bool byTime = options.cases <= 0;
  if (!byTime) {
    std::vector<Row *> running;
    for (size_t k = 0; k < active.size(); ++k) {
      Row &row = *active[k];
      int n = int(active.size());
      row.cases = options.cases / n + (int(k) < options.cases % n ? 1 : 0);
      if (row.cases > 0) {
        running.push_back(&row);
        continue;
      }
      row.result.status = PropertyResult::Status::Skipped;
      row.result.reason = std::to_string(options.cases) + " case(s) over " +
                          std::to_string(n) +
                          " configurations leave none for this one";
    }
    active = std::move(running);
  }
  if (active.empty())
    return results();

  auto allLabels = [&] {
    std::map<std::string, int> all;
    for (const Row *row : active)
      for (const auto &[label, n] : row->result.labels)
        all[label] += n;
    return all;
  };
  auto missingKeyState = [&]() -> std::optional<std::string> {
    std::map<std::string, int> all = allLabels();
    for (const std::string &key : family.keyLabels)
      if (!reached(all, key))
        return key;
    return std::nullopt;
  };
  // The shared paths that the family's cases took, in any configuration,
  // and that no configuration saw two threads meet in yet (for a family
  // that overlapsSharedPaths). A path its cases never take, no round of
  // them can overlap.
  auto notOverlapped = [&] {
    std::set<std::string> paths;
    if (!family.overlapsSharedPaths)
      return paths;
    std::map<std::string, int> all = allLabels();
    for (const Row *row : active)
      for (const std::string &path : row->concurrentPaths)
        if (all.count("path:" + path) && !all.count("path-overlapped:" + path))
          paths.insert(path);
    return paths;
  };
  int minCases = family.minCases ? family.minCases : options.minCases;
  RunOptions run;
  run.backend = options.backend;
  run.against = options.against;
  run.askDevicesFromCallbacks = family.asksDevicesFromCallbacks;
  run.stuckAfterMs = options.stuckAfterMs;
  // A round that passes without reaching every key state is followed by
  // more rounds, so that coverage does not hinge on a few cases; a single
  // shard sees only part of the cases and runs one.
  int rounds = options.shardCount > 1 ? 1 : 1 + CoverageRounds;
  bool failed = false;
  for (int round = 0; round < rounds && !failed; ++round) {
    for (size_t k = 0; k < active.size(); ++k) {
      Row &row = *active[k];
      if (byTime) {
        // Each configuration gets its share of the round's time.
        double until = options.timeBudget * family.timeShare *
                       (round + double(k + 1) / double(active.size()));
        int casesBefore = row.result.cases;
        // A coverage round (one that follows a round that missed a key
        // state) runs the cases coverage needs whatever the time: on a slow
        // or busy machine a time share may buy only a few, and too few
        // cases must not turn into a vacuous-pass failure.
        int least = std::max(1, (round == 0 ? minCases : CasesForCoverage) /
                                    int(active.size()));
        runCases(row, family, options, run, [&] {
          return row.result.cases - casesBefore >= least && elapsed() >= until;
        });
      } else {
        // Case numbers, not cases run: the shards split the numbers.
        uint64_t end = uint64_t(row.cases) * uint64_t(round + 1);
        runCases(row, family, options, run, [&] { return row.index >= end; });
      }
      if (row.broken) {
        failed = true;
        break;
      }
      if (!row.failing)
        continue;
      failed = true;
      finishFailure(row, family, options, run);
      if (!options.failFast)
        continue;
      for (size_t rest = k + 1; rest < active.size(); ++rest)
        if (active[rest]->result.cases == 0) {
          active[rest]->result.status = PropertyResult::Status::Skipped;
          active[rest]->result.reason =
              "not run: --fail-fast stopped at the failure in configuration " +
              row.result.configuration;
        }
      break;
    }
    // A family that must make many allocations on one device runs on until
    // one case has, like one that misses a key state: on a slow or busy
    // machine its first cases may be all the time budget allows.
    uint64_t most = 0;
    for (const Row *row : active)
      most = std::max(most, row->result.census.mostAllocationsOnOneDevice);
    bool fewAllocations = most < family.minAllocationsOnOneDevice;
    if (failed || options.shardCount > 1 ||
        (!missingKeyState() && !fewAllocations && notOverlapped().empty()))
      break;
  }
  if (failed)
    return results();

  int ran = 0;
  for (const Row *row : active)
    ran += row->result.cases;
  std::string over =
      active.size() > 1
          ? " in " + std::to_string(active.size()) + " configurations"
          : "";
  std::map<std::string, int> all = allLabels();
  for (const std::string &key : family.keyLabels) {
    if (reached(all, key))
      continue;
    for (Row *row : active) {
      PropertyResult &r = row->result;
      if (options.shardCount > 1) {
        // One shard sees a part of the cases: coverage is judged over all.
        r.reason += (r.reason.empty() ? "" : ", ") +
                    std::string("key state '") + key +
                    "' not reached in this shard";
      } else if (!byTime && options.cases < CasesForCoverage) {
        r.status = PropertyResult::Status::Incomplete;
        r.reason = "key state '" + key + "' not reached in " +
                   std::to_string(ran) + " case(s)" + over +
                   "; fewer cases were asked for than the " +
                   std::to_string(CasesForCoverage) + " coverage needs";
      } else {
        r.status = PropertyResult::Status::Failed;
        r.reason = "its " + std::to_string(ran) + " cases" + over +
                   " never reached the key state '" + key +
                   "' (a vacuous pass is a failure)";
      }
    }
    if (options.shardCount == 1)
      return results();
  }
  // Whether two threads meet inside a path is the machine's timing, as
  // whether branches overlap at all is: a shared path no case overlapped
  // after the coverage rounds is noted, not failed.
  for (const std::string &path : notOverlapped())
    for (Row *row : active)
      if (row->concurrentPaths.count(path)) {
        PropertyResult &r = row->result;
        r.reason += (r.reason.empty() ? "" : ", ") +
                    std::string("no two threads met in backend path '") + path +
                    "' in " + std::to_string(ran) + " cases" + over;
      }
  if (family.minAllocationsOnOneDevice && options.shardCount == 1) {
    uint64_t most = 0;
    for (const Row *row : active)
      most = std::max(most, row->result.census.mostAllocationsOnOneDevice);
    if (most < family.minAllocationsOnOneDevice)
      for (Row *row : active) {
        row->result.status = PropertyResult::Status::Failed;
        row->result.reason =
            "its " + std::to_string(ran) + " cases" + over + " never made " +
            std::to_string(family.minAllocationsOnOneDevice) +
            " allocations on one device (at most " + std::to_string(most) + ")";
      }
  }
  return results();
}

} // namespace drt::conformance
