//===- Model.cpp - The reference model ------------------------------------===//
//
// Each operation follows docs/semantics.md step by step, in the order the
// contract gives for its checks, counting planned faults the way a backend's
// hooks meet them (one allocation, one copy, one execution at a time).
//
//===----------------------------------------------------------------------===//
#include "drt/conformance/Model.h"

#include "ElementArithmetic.h"
#include "drt/HostMemory.h"
#include "drt/conformance/ScenarioText.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace drt::conformance {

std::string_view stateName(ResidencyState state) {
  switch (state) {
  case ResidencyState::Host:
    return "Host";
  case ResidencyState::Device:
    return "Device";
  case ResidencyState::Mirrored:
    return "Mirrored";
  case ResidencyState::Lost:
    return "Lost";
  }
  return "?";
}

std::string stateLabel(ResidencyState state) {
  return std::string(stateName(state));
}

std::string CoverageLabel::text() const {
  std::string s;
  for (std::string_view part : parts_)
    s += part;
  return s;
}

bool CoverageLabel::sameParts(const CoverageLabel &o) const {
  for (size_t i = 0; i < parts_.size(); ++i)
    if (parts_[i].data() != o.parts_[i].data() ||
        parts_[i].size() != o.parts_[i].size())
      return false;
  return true;
}

size_t CoverageLabel::identityHash() const {
  size_t h = 0;
  for (std::string_view part : parts_)
    h = h * 31 + std::hash<const void *>()(part.data()) + part.size();
  return h;
}

size_t ModelTensor::numElements() const {
  size_t n = 1;
  for (size_t d : dims)
    n *= d;
  return n;
}

size_t ModelTensor::bytes() const { return numElements() * elemSize(kind); }

namespace {
/// \p size bytes, on huge pages where they come from a mapping of their own.
std::shared_ptr<uint8_t[]> freshBytes(size_t size) {
  std::shared_ptr<uint8_t[]> bytes =
      std::make_shared_for_overwrite<uint8_t[]>(size);
  if (size >= MappedAllocationBytes)
    adviseHugePages(bytes.get(), size);
  return bytes;
}
} // namespace

std::span<uint8_t> RecordBytes::mutableBytes() {
  if (data_.use_count() > 1) {
    std::shared_ptr<uint8_t[]> own = freshBytes(size_);
    std::memcpy(own.get(), data_.get(), size_);
    data_ = std::move(own);
  }
  return {data_.get(), size_};
}

std::span<uint8_t> RecordBytes::makeForOverwrite(size_t size) {
  data_ = freshBytes(size);
  size_ = size;
  return {data_.get(), size_};
}

void RecordBytes::assign(std::span<const uint8_t> from) {
  std::memcpy(makeForOverwrite(from.size()).data(), from.data(), from.size());
}

void KnownBytes::mark(size_t begin, size_t end) {
  if (begin >= end)
    return;
  // Merge every range that overlaps or touches [begin, end).
  auto first =
      std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                       [](const Range &r, size_t at) { return r.second < at; });
  auto last = first;
  while (last != ranges_.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, {begin, end});
}

void KnownBytes::forget(size_t begin, size_t end) {
  if (begin >= end)
    return;
  std::vector<Range> kept;
  kept.reserve(ranges_.size() + 1);
  for (const Range &r : ranges_) {
    if (r.second <= begin || r.first >= end) {
      kept.push_back(r);
      continue;
    }
    if (r.first < begin)
      kept.push_back({r.first, begin});
    if (r.second > end)
      kept.push_back({end, r.second});
  }
  ranges_ = std::move(kept);
}

bool KnownBytes::covers(size_t begin, size_t end) const {
  if (begin >= end)
    return true;
  auto it = std::lower_bound(
      ranges_.begin(), ranges_.end(), begin,
      [](const Range &r, size_t at) { return r.second <= at; });
  return it != ranges_.end() && it->first <= begin && it->second >= end;
}

std::vector<KnownBytes::Range> KnownBytes::within(size_t begin,
                                                  size_t end) const {
  std::vector<Range> out;
  for (const Range &r : ranges_) {
    size_t from = std::max(r.first, begin), to = std::min(r.second, end);
    if (from < to)
      out.push_back({from - begin, to - begin});
  }
  return out;
}

namespace {

/// Whether \p v holds a known element of \p kind, among \p elements, whose
/// sums and products round: for a float kind a finite one that is not a
/// small integer (up to 2^12 in magnitude, whose products are exact), for
/// an integer kind any (integers do not round; they wrap the same way in
/// any order). Operands like these tell a backend that fuses or reorders
/// nodes (a contracted multiply-add, a wider intermediate) from one that
/// rounds each node as semantics section 7 says.
bool roundsSomewhere(const Values &v, ElemKind kind, size_t elements) {
  if (!isFloatingPoint(kind))
    return std::any_of(v.known.begin(), v.known.end(),
                       [](uint8_t k) { return k != Unknown; });
  size_t size = elemSize(kind);
  for (size_t i = 0; i < elements; ++i) {
    const uint8_t *p = v.data.data() + i * size;
    if (v.known[i * size] == Unknown)
      continue;
    float x = kind == ElemKind::Float32   ? load<float>(p)
              : kind == ElemKind::Float16 ? halfToFloat(load<uint16_t>(p))
                                          : bfloat16ToFloat(load<uint16_t>(p));
    if (std::isfinite(x) && (x != std::nearbyint(x) || std::fabs(x) > 4096))
      return true;
  }
  return false;
}

/// The end of the run of bytes equal to \p bytes[from] that starts there.
/// Compared eight bytes at a time: a run is usually a whole output.
size_t runEnd(const std::vector<uint8_t> &bytes, size_t from) {
  const uint8_t *p = bytes.data();
  size_t n = bytes.size(), e = from + 1;
  uint64_t repeated = 0x0101010101010101u * p[from];
  for (; e + 8 <= n; e += 8) {
    uint64_t word;
    std::memcpy(&word, p + e, 8);
    if (word != repeated)
      break;
  }
  while (e < n && p[e] == p[from])
    ++e;
  return e;
}

bool isResident(const ModelRecord &r) {
  return r.state == ResidencyState::Device ||
         r.state == ResidencyState::Mirrored;
}

} // namespace

CoverageLabel nodePairLabel(ElemKind kind, OpKind producer, OpKind consumer) {
  // Parts are viewed, not copied: the operations' names after a dash.
  static constexpr std::string_view Dashed[] = {"-add", "-mul", "-relu",
                                                "-scale", "-copy"};
  return {"node-pair-", elemKindName(kind), Dashed[size_t(producer)],
          Dashed[size_t(consumer)]};
}

bool validDims(const std::vector<size_t> &dims, ElemKind kind) {
  // A type needs at least one dimension (semantics.md §1).
  if (dims.empty())
    return false;
  size_t n = elemSize(kind);
  for (size_t d : dims) {
    if (d == 0 || __builtin_mul_overflow(n, d, &n))
      return false;
  }
  return n <= MaxTensorBytes;
}

namespace {

/// Whether addNetwork refuses \p add (InvalidArgument), by the rules of
/// semantics §7 rather than by Function::verify: the model is the oracle
/// for the framework's checks too. Placeholders come from the nodes
/// (networkPlaceholders), all of the network's type, so none is unknown or
/// of another type.
bool networkRefused(const Command &add) {
  if (add.target.empty() || add.nodes.empty() || add.dims.empty() ||
      std::find(add.dims.begin(), add.dims.end(), size_t(0)) != add.dims.end())
    return true;
  std::vector<std::string> written;
  for (const NetworkNode &n : add.nodes) {
    bool binary = n.op == OpKind::Add || n.op == OpKind::Mul;
    if (n.inputs.size() != (binary ? 2u : 1u))
      return true;
    for (const std::string &in : n.inputs)
      if (in == n.output ||
          (networkWrites(add.nodes, in) &&
           std::find(written.begin(), written.end(), in) == written.end()))
        return true;
    if (std::find(written.begin(), written.end(), n.output) != written.end())
      return true;
    written.push_back(n.output);
    if (n.op != OpKind::Scale)
      continue;
    if (!std::isfinite(n.factor))
      return true;
    // Integer kinds: an integer the kind holds (i64 up to the largest
    // double below 2^63).
    double lowest, highest;
    switch (add.elemKind) {
    case ElemKind::Int32:
      lowest = -0x1p31, highest = 0x1p31 - 1;
      break;
    case ElemKind::Int64:
      lowest = -0x1p63, highest = std::nextafter(0x1p63, 0.0);
      break;
    case ElemKind::UInt8:
      lowest = 0, highest = 255;
      break;
    default:
      continue;
    }
    if (n.factor != std::trunc(n.factor) || n.factor < lowest ||
        n.factor > highest)
      return true;
  }
  return false;
}

} // namespace

Model::Model(std::vector<DeviceSpec> devices, Capabilities capabilities,
             bool trackContents)
    : Model(
          std::move(devices),
          [&](const DeviceSpec &) {
            return DeviceTraits{capabilities, 0};
          },
          trackContents) {}

Model::Model(std::vector<DeviceSpec> devices,
             const std::function<DeviceTraits(const DeviceSpec &)> &traitsOf,
             bool trackContents)
    : trackContents_(trackContents) {
  for (DeviceSpec &d : devices) {
    ModelDevice md;
    md.spec = d;
    md.traits = traitsOf(d);
    devices_.emplace(d.name, std::move(md));
  }
}

const ModelTensor *Model::tensor(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const ModelRecord *Model::recordOf(const std::string &name) const {
  const ModelTensor *t = tensor(name);
  if (!t || t->empty())
    return nullptr;
  return &records_.at(t->record);
}

size_t Model::pendingFaults(const std::string &name) const {
  auto it = devices_.find(name);
  return it == devices_.end() ? 0 : it->second.faults.size();
}

int Model::newRecord(size_t bytes) {
  ModelRecord r;
  r.bytes = bytes;
  r.known.mark(0, bytes);
  records_[nextRecord_] = std::move(r);
  recordsStamp_.renew();
  return nextRecord_++;
}

void Model::markDead(const std::string &location) {
  locations_.at(location).state = ModelLocation::State::Dead;
  activeLocations_.erase(location);
}

void Model::freeOnDevice(const std::string &name, uint64_t bytes) {
  ModelDevice &d = device(name);
  if (d.shutDown)
    return;
  d.used -= bytes;
  --d.live;
}

void Model::releaseRecord(ModelRecord &r) {
  freeOnDevice(r.device, r.bytes);
  if (!r.location.empty())
    markDead(r.location);
  r.state = ResidencyState::Host;
  r.device.clear();
  r.location.clear();
}

void Model::dropReference(int record, Step &step) {
  ModelRecord &r = records_.at(record);
  if (--r.references > 0)
    return;
  if (isResident(r)) {
    step.labels.push_back({"last-reference-releases-", stateName(r.state)});
    releaseRecord(r);
  }
  records_.erase(record);
  recordsStamp_.renew();
}

void Model::shutdownDevice(const std::string &name, Step &step) {
  ModelDevice &d = device(name);
  if (d.shutDown)
    return;
  for (auto &[id, r] : records_) {
    if (!isResident(r) || r.device != name)
      continue;
    if (r.state == ResidencyState::Device) {
      step.labels.emplace_back("device-lost-makes-Lost");
      r.state = ResidencyState::Lost;
      r.forgetContents();
    } else {
      step.labels.emplace_back("device-lost-keeps-Mirrored-host-copy");
      r.state = ResidencyState::Host;
    }
    r.device.clear();
    if (!r.location.empty())
      markDead(r.location);
    r.location.clear();
  }
  for (auto it = activeLocations_.begin(); it != activeLocations_.end();) {
    ModelLocation &l = locations_.at(*it);
    if (l.device != name) {
      ++it;
      continue;
    }
    l.state = ModelLocation::State::Dead;
    it = activeLocations_.erase(it);
  }
  d.shutDown = true;
  d.used = 0;
  d.live = 0;
  d.networks.clear();
}

std::optional<ErrorCode> Model::strike(const std::string &name, FaultSite site,
                                       Step &step) {
  ModelDevice &d = device(name);
  std::optional<ErrorCode> hit;
  for (auto it = d.faults.begin(); it != d.faults.end();) {
    if (it->site == site && --it->remaining == 0) {
      if (!hit)
        hit = it->code;
      it = d.faults.erase(it);
    } else {
      ++it;
    }
  }
  if (hit) {
    step.labels.push_back(
        {"fault-struck-", faultSiteName(site), "-", errorCodeName(*hit)});
    // The operation fails and the device lives on.
    if (*hit != ErrorCode::DeviceLost)
      step.labels.push_back({"fault-failed-", faultSiteName(site)});
  }
  return hit;
}

Outcome Model::failWith(const std::string &name, ErrorCode code, Step &step) {
  if (code == ErrorCode::DeviceLost)
    shutdownDevice(name, step);
  return Outcome::error(code);
}

void Model::setDeviceBudget(const std::string &name, uint64_t bytes) {
  ModelDevice &d = device(name);
  d.spec.budget = bytes;
}

Outcome Model::allocate(const std::string &name, uint64_t bytes, Step &step) {
  if (auto code = strike(name, FaultSite::Allocation, step))
    return failWith(name, *code, step);
  ModelDevice &d = device(name);
  if (d.budget() && bytes > d.budget() - d.used) {
    step.labels.emplace_back("out-of-memory");
    return Outcome::error(ErrorCode::OutOfMemory);
  }
  d.used += bytes;
  d.peakUsed = std::max(d.peakUsed, d.used);
  ++d.live;
  ++d.allocations;
  d.peakLive = std::max(d.peakLive, d.live);
  return Outcome::ok();
}

Outcome Model::upload(int record, const std::string &name,
                      const std::string &location, Step &step) {
  ModelRecord &r = records_.at(record);
  // A move to a device shut down reads the record back first (semantics,
  // section 3).
  if (device(name).shutDown) {
    step.labels.emplace_back("move-to-a-shut-down-device");
    return Outcome::error(ErrorCode::DeviceLost);
  }
  if (!location.empty()) {
    auto it = locations_.find(location);
    if (it != locations_.end() && it->second.device != name)
      step.labels.emplace_back("location-of-another-device");
    if (it == locations_.end() ||
        it->second.state != ModelLocation::State::Live ||
        it->second.device != name || it->second.bytes != r.bytes)
      return Outcome::error(ErrorCode::InvalidArgument);
  } else if (Outcome o = allocate(name, r.bytes, step);
             o.kind != Outcome::Kind::Ok) {
    return o;
  }
  if (auto code = strike(name, FaultSite::TransferToDevice, step)) {
    if (location.empty())
      freeOnDevice(name, r.bytes);
    return failWith(name, *code, step);
  }
  r.state = ResidencyState::Device;
  r.device = name;
  r.location = location;
  if (!location.empty()) {
    locations_[location].state = ModelLocation::State::Owned;
    step.labels.emplace_back("takes-over-location");
  }
  return Outcome::ok();
}

Outcome Model::fetchToHost(int record, bool release, Step &step) {
  ModelRecord &r = records_.at(record);
  std::string from = r.device;
  if (auto code = strike(from, FaultSite::TransferFromDevice, step)) {
    if (*code == ErrorCode::DeviceLost) {
      shutdownDevice(from, step);
      return Outcome::error(*code);
    }
    return Outcome::error(*code);
  }
  if (!release) {
    r.state = ResidencyState::Mirrored;
    return Outcome::ok();
  }
  releaseRecord(r);
  return Outcome::ok();
}

bool Model::residentElsewhere(int record, const std::string &name) const {
  const ModelRecord &r = records_.at(record);
  return isResident(r) && r.device != name;
}

Outcome Model::moveHere(int record, const std::string &name,
                        const std::string &location, Step &step) {
  ModelRecord &r = records_.at(record);
  switch (r.state) {
  case ResidencyState::Lost:
    return Outcome::error(ErrorCode::DeviceLost);
  case ResidencyState::Device:
  case ResidencyState::Mirrored:
    if (r.device == name) {
      if (!location.empty() && location != r.location)
        return Outcome::error(ErrorCode::InvalidArgument);
      step.labels.push_back({"to-device-already-", stateName(r.state)});
      return Outcome::ok();
    }
    step.labels.push_back({"cross-device-move-from-", stateName(r.state)});
    if (device(r.device).spec.backend != device(name).spec.backend)
      step.labels.emplace_back("cross-device-move-across-backends");
    if (r.state == ResidencyState::Mirrored) {
      releaseRecord(r);
    } else if (Outcome o = fetchToHost(record, true, step);
               o.kind != Outcome::Kind::Ok) {
      return o;
    }
    return upload(record, name, location, step);
  case ResidencyState::Host:
    return upload(record, name, location, step);
  }
  return Outcome::ok();
}

Outcome Model::writeHost(ModelTensor &t, uint64_t pattern, bool refill,
                         Step &step) {
  if (t.empty())
    return Outcome::violationOf(ViolationKind::UseOfMovedFrom);
  ModelRecord &r = records_.at(t.record);
  if (r.state == ResidencyState::Device)
    return Outcome::violationOf(ViolationKind::HostAccessWhileOnDevice);
  if (r.state == ResidencyState::Lost) {
    if (!refill)
      return Outcome::violationOf(ViolationKind::HostAccessWhileLost);
    if (t.offsetBytes != 0 || t.bytes() != r.bytes)
      return Outcome::error(ErrorCode::InvalidArgument);
    step.labels.emplace_back("refill-of-Lost");
    r.state = ResidencyState::Host;
  }
  if (r.state == ResidencyState::Mirrored) {
    step.labels.emplace_back("host-write-drops-mirror");
    releaseRecord(r);
  }
  if (trackContents_)
    fillPattern(t.kind, pattern, 0,
                r.data.mutableBytes().subspan(t.offsetBytes, t.bytes()));
  r.known.mark(t.offsetBytes, t.offsetBytes + t.bytes());
  r.openNaN.forget(t.offsetBytes, t.offsetBytes + t.bytes());
  return Outcome::ok();
}

Outcome Model::releaseTensor(const ModelTensor &t, const std::string &name,
                             Step &step) {
  if (t.empty())
    return Outcome::violationOf(ViolationKind::UseOfMovedFrom);
  ModelRecord &r = records_.at(t.record);
  if (t.offsetBytes != 0 || t.bytes() != r.bytes)
    return Outcome::error(ErrorCode::InvalidArgument);
  switch (r.state) {
  case ResidencyState::Host:
    return Outcome::ok();
  case ResidencyState::Lost:
    step.labels.emplace_back("release-of-Lost");
    r.state = ResidencyState::Host;
    return Outcome::ok();
  case ResidencyState::Device:
  case ResidencyState::Mirrored:
    break;
  }
  if (r.device != name)
    return Outcome::error(ErrorCode::InvalidArgument);
  step.labels.push_back({"release-of-", stateName(r.state)});
  releaseRecord(r);
  r.forgetContents();
  return Outcome::ok();
}

void Model::unbindEverywhere(const std::string &tensor) {
  for (auto &[net, ctx] : contexts_)
    std::erase_if(ctx.bindings,
                  [&](const auto &b) { return b.second == tensor; });
}

ModelTensor &Model::tensorSlot(const std::string &name) {
  auto [it, inserted] = tensors_.try_emplace(name);
  if (inserted)
    namesStamp_.renew();
  return it->second;
}

uint64_t Model::UniqueStamp::next() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

void Model::forgetTensor(const std::string &name, Step &step) {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return;
  if (!it->second.empty()) {
    const ModelRecord &r = records_.at(it->second.record);
    if (isResident(r) && r.references > 1)
      step.labels.emplace_back("destroy-while-shared-and-resident");
    dropReference(it->second.record, step);
  }
  tensors_.erase(it);
  namesStamp_.renew();
  unbindEverywhere(name);
}

Outcome Model::run(const Command &c, Step &step) {
  const std::string &dev = networkDevice_.at(c.target);
  ModelContext &ctx = contexts_[c.target];
  ctx.bindings = c.bindings;
  if (device(dev).shutDown)
    return Outcome::error(ErrorCode::DeviceLost);
  auto net = device(dev).networks.find(c.target);
  if (net == device(dev).networks.end())
    return Outcome::error(ErrorCode::InvalidArgument);
  ctx.lastNetwork = c.target;
  const Command add = net->second;
  Type type{add.elemKind, add.dims};
  // In the order the function declares them: the framework binds, stages
  // and counts faults in that order.
  Function fn = networkFunction(add);
  const std::vector<Placeholder> &placeholders = fn.placeholders();
  auto boundName = [&](const std::string &ph) -> const std::string * {
    const std::string *found = nullptr;
    for (const auto &[p, t] : ctx.bindings)
      if (p == ph)
        found = &t;
    return found;
  };
  std::vector<const ModelTensor *> bound;
  for (const Placeholder &p : placeholders) {
    const std::string *name = boundName(p.name);
    const ModelTensor *t = name ? tensor(*name) : nullptr;
    if (!t)
      return Outcome::error(ErrorCode::InvalidArgument);
    if (t->empty())
      return Outcome::violationOf(ViolationKind::UseOfMovedFrom);
    if (t->kind != p.type.kind || t->dims != p.type.dims) {
      step.labels.emplace_back("run-binding-of-another-type");
      return Outcome::error(ErrorCode::InvalidArgument);
    }
    bound.push_back(t);
  }
  for (size_t i = 0; i < placeholders.size(); ++i) {
    if (!fn.isOutput(placeholders[i].name))
      continue;
    const ModelRecord &r = records_.at(bound[i]->record);
    if (bound[i]->offsetBytes != 0 || bound[i]->bytes() != r.bytes) {
      step.labels.emplace_back("run-output-on-partial-view");
      return Outcome::error(ErrorCode::InvalidArgument);
    }
    for (size_t j = 0; j < placeholders.size(); ++j)
      if (j != i && bound[j]->record == bound[i]->record) {
        step.labels.emplace_back("run-output-shares-a-record");
        return Outcome::error(ErrorCode::InvalidArgument);
      }
  }

  struct Output {
    int record;
    bool allocatedForRun;
  };
  std::vector<Output> outputs;
  std::vector<uint64_t> temporaries;
  Outcome failure = Outcome::ok();
  bool executed = false;
  for (size_t i = 0; i < placeholders.size() && failure == Outcome::ok(); ++i) {
    int id = bound[i]->record;
    ModelRecord &r = records_.at(id);
    if (fn.isOutput(placeholders[i].name)) {
      if (isResident(r) && r.device == dev) {
        outputs.push_back({id, false});
        step.labels.emplace_back("run-output-in-place");
        continue;
      }
      if (isResident(r)) {
        releaseRecord(r);
        r.forgetContents();
      }
      failure = allocate(dev, r.bytes, step);
      if (failure == Outcome::ok())
        outputs.push_back({id, true});
      continue;
    }
    if (r.state == ResidencyState::Lost) {
      step.labels.emplace_back("run-input-lost");
      failure = Outcome::error(ErrorCode::DeviceLost);
      continue;
    }
    if (r.state == ResidencyState::Device && r.device != dev) {
      step.labels.emplace_back("run-input-moved");
      if (device(r.device).spec.backend != device(dev).spec.backend)
        step.labels.emplace_back("run-input-moved-across-backends");
      failure = device(dev).traits.capabilities.residentTensors
                    ? moveHere(id, dev, "", step)
                    : fetchToHost(id, true, step);
      if (failure != Outcome::ok())
        continue;
    }
    if (isResident(r) && r.device == dev) {
      step.labels.emplace_back("run-input-in-place");
      if (bound[i]->offsetBytes != 0)
        step.labels.emplace_back("run-input-view-at-offset-in-place");
      continue;
    }
    uint64_t bytes = bound[i]->bytes();
    failure = allocate(dev, bytes, step);
    if (failure != Outcome::ok())
      continue;
    temporaries.push_back(bytes);
    if (auto code = strike(dev, FaultSite::TransferToDevice, step))
      failure = failWith(dev, *code, step);
  }
  if (failure == Outcome::ok()) {
    executed = true;
    if (auto code = strike(dev, FaultSite::Run, step)) {
      // The run is in flight: losing the device completes it first (its
      // in-place Mirrored outputs become Device, as for any failed run) and
      // then loses what is resident, those outputs included.
      if (*code == ErrorCode::DeviceLost)
        for (const Output &o : outputs) {
          ModelRecord &r = records_.at(o.record);
          if (!o.allocatedForRun && r.state == ResidencyState::Mirrored &&
              r.device == dev)
            r.state = ResidencyState::Device;
        }
      failure = failWith(dev, *code, step);
    }
  }
  for (uint64_t bytes : temporaries)
    freeOnDevice(dev, bytes);
  if (failure != Outcome::ok()) {
    for (const Output &o : outputs) {
      ModelRecord &r = records_.at(o.record);
      if (!o.allocatedForRun) {
        if (r.state == ResidencyState::Mirrored && r.device == dev)
          r.state = ResidencyState::Device;
        if (executed && isResident(r))
          r.forgetContents();
        continue;
      }
      if (r.state != ResidencyState::Device)
        freeOnDevice(dev, r.bytes);
    }
    step.labels.emplace_back("run-failed");
    return failure;
  }

  // Compute the outputs from the inputs' values.
  std::map<std::string, Values> values;
  if (trackContents_) {
    for (size_t i = 0; i < placeholders.size(); ++i) {
      const ModelTensor &t = *bound[i];
      const ModelRecord &r = records_.at(t.record);
      Values v;
      std::span<const uint8_t> input =
          r.data.bytes().subspan(t.offsetBytes, t.bytes());
      v.data.assign(input.begin(), input.end());
      v.known.assign(t.bytes(), Unknown);
      for (const auto &[from, to] :
           r.known.within(t.offsetBytes, t.offsetBytes + t.bytes()))
        std::fill(v.known.begin() + from, v.known.begin() + to, uint8_t(Exact));
      for (const auto &[from, to] :
           r.openNaN.within(t.offsetBytes, t.offsetBytes + t.bytes()))
        std::fill(v.known.begin() + from, v.known.begin() + to,
                  uint8_t(ExactUnlessNaN));
      values[placeholders[i].name] = std::move(v);
    }
    for (const NetworkNode &n : add.nodes) {
      std::vector<const Values *> in;
      for (const std::string &name : n.inputs)
        in.push_back(&values.at(name));
      Values out;
      computeNode(n, add.elemKind, in, out, type.numElements());
      values[n.output] = std::move(out);
    }
    // Adjacent nodes of which the second reads the first's output, over
    // operands that round: the pairs numerics covers one by one.
    for (size_t i = 1; i < add.nodes.size(); ++i) {
      const NetworkNode &p = add.nodes[i - 1], &n = add.nodes[i];
      if (std::find(n.inputs.begin(), n.inputs.end(), p.output) ==
              n.inputs.end() ||
          std::none_of(p.inputs.begin(), p.inputs.end(),
                       [&](const std::string &name) {
                         return roundsSomewhere(values.at(name), add.elemKind,
                                                type.numElements());
                       }))
        continue;
      step.labels.push_back(nodePairLabel(add.elemKind, p.op, n.op));
    }
  }
  for (const Output &o : outputs) {
    ModelRecord &r = records_.at(o.record);
    if (trackContents_) {
      size_t i = 0;
      while (bound[i]->record != o.record)
        ++i;
      const Values &v = values.at(placeholders[i].name);
      r.data.assign(v.data);
      r.forgetContents();
      for (size_t b = 0; b < v.known.size();) {
        size_t e = runEnd(v.known, b);
        if (v.known[b] != Unknown)
          r.known.mark(b, e);
        if (v.known[b] == ExactUnlessNaN)
          r.openNaN.mark(b, e);
        b = e;
      }
    }
    r.state = ResidencyState::Device;
    r.device = dev;
    if (o.allocatedForRun)
      r.location.clear();
  }
  step.labels.emplace_back("run-succeeded");
  // Past the eight and sixteen values a backend's register file or argument
  // array may hold.
  if (size_t n = placeholders.size(); n > 8)
    step.labels.emplace_back(n > 16 ? "run-of-over-16-placeholders"
                                    : "run-of-over-8-placeholders");
  // How many elements the run covered, in classes where launch grids run
  // out (2^16 blocks, 65535 groups of 64 and the like).
  {
    uint64_t n = type.numElements();
    step.labels.emplace_back("run-of-elements-",
                             n <= (uint64_t(1) << 16)   ? "up-to-64Ki"
                             : n <= (uint64_t(1) << 20) ? "64Ki-to-1Mi"
                             : n <= (uint64_t(1) << 22) ? "1Mi-to-4Mi"
                                                        : "over-4Mi");
  }
  if (!device(dev).spec.copyToHost &&
      device(dev).traits.capabilities.residentTensors) {
    step.labels.emplace_back("run-leaves-outputs-resident");
    return Outcome::ok();
  }
  // An output that a lost device took with it (a DeviceLost fault on an
  // earlier output's read-back shut the device down) is DeviceLost without
  // a read-back of its own.
  Outcome first = Outcome::ok();
  for (const Output &o : outputs) {
    Outcome e = records_.at(o.record).state == ResidencyState::Lost
                    ? Outcome::error(ErrorCode::DeviceLost)
                    : fetchToHost(o.record, true, step);
    if (first == Outcome::ok())
      first = e;
  }
  step.labels.emplace_back("run-copies-outputs-to-host");
  return first;
}

std::vector<const std::string *>
Model::boundOutputs(const std::string &network) const {
  std::vector<const std::string *> names;
  auto ctx = contexts_.find(network);
  if (ctx == contexts_.end() || ctx->second.lastNetwork.empty())
    return names;
  auto placed = placement_.find(ctx->second.lastNetwork);
  if (placed == placement_.end())
    return names;
  const ModelDevice &d = devices_.at(placed->second);
  auto net = d.networks.find(ctx->second.lastNetwork);
  if (net == d.networks.end())
    return names;
  for (const std::string &out : networkFunction(net->second).outputNames()) {
    const std::string *name = nullptr;
    for (const auto &[p, t] : ctx->second.bindings)
      if (p == out)
        name = &t;
    names.push_back(name);
  }
  return names;
}

Outcome Model::ensureOutputs(const Command &c, Step &step) {
  auto ctx = contexts_.find(c.target);
  if (ctx == contexts_.end() || ctx->second.lastNetwork.empty())
    return Outcome::error(ErrorCode::InvalidArgument);
  auto placed = placement_.find(ctx->second.lastNetwork);
  if (placed == placement_.end())
    return Outcome::error(ErrorCode::InvalidArgument);
  Outcome first = Outcome::ok();
  for (const std::string *name : boundOutputs(c.target)) {
    const ModelTensor *t = name ? tensor(*name) : nullptr;
    if (!t || t->empty())
      continue;
    ModelRecord &r = records_.at(t->record);
    Outcome e = Outcome::ok();
    if (r.state == ResidencyState::Lost) {
      e = Outcome::error(ErrorCode::DeviceLost);
    } else if (isResident(r) &&
               (t->offsetBytes != 0 || t->bytes() != r.bytes)) {
      // Bringing it home is a from-device of the bound tensor: a partial
      // view cannot move residency, Mirrored or not (§3).
      e = Outcome::error(ErrorCode::InvalidArgument);
    } else if (r.state == ResidencyState::Mirrored) {
      releaseRecord(r);
      if (first != Outcome::ok())
        step.labels.emplace_back("ensure-outputs-goes-on-after-an-error");
    } else if (r.state == ResidencyState::Device) {
      e = fetchToHost(t->record, true, step);
      if (e == Outcome::ok())
        step.labels.emplace_back("ensure-outputs-brings-back");
      if (e == Outcome::ok() && first != Outcome::ok())
        step.labels.emplace_back("ensure-outputs-goes-on-after-an-error");
    }
    if (first == Outcome::ok())
      first = e;
  }
  return first;
}

ModelStep Model::apply(const Command &c) {
  try {
    bool fixed = c.noWait && accountingFixedByCompletion(c) &&
                 (!issuedWithoutWaiting_ || pendingAccountingFixed_);
    ModelStep step = applyStep(c);
    pendingAccountingFixed_ = fixed && step.outcome == Outcome::ok();
    return step;
  } catch (const ModelFailure &) {
    throw;
  } catch (const std::exception &e) {
    throw ModelFailure("drt's reference model failed on '" + printCommand(c) +
                       "': " + e.what());
  }
}

ModelStep Model::applyStep(const Command &c) {
  Step step;
  // A step has a few labels: one allocation for them, not one per growth.
  step.labels.reserve(6);
  step.labels.push_back({commandKindName(c.kind)});
  // A command on a record whose transfer was issued without waiting meets
  // it busy: the framework makes it wait, so its outcome is the one it has
  // in program order, which is what the model computes.
  // A run that meets records of runs pending on its own device, resident
  // there, joins them on a device that performs runs in order.
  if (!pendingRecords_.empty()) {
    auto meets = [&](const std::string &name) {
      const ModelTensor *t = tensor(name);
      return t && !t->empty() && pendingRecords_.count(t->record);
    };
    bool busy = meets(c.target) || meets(c.source);
    for (const auto &[ph, name] : c.bindings)
      busy = busy || meets(name);
    // ensure-outputs waits for the records of the outputs it brings home.
    if (c.kind == CommandKind::EnsureOutputs && !busy)
      for (const std::string *name : boundOutputs(c.target))
        busy = busy || (name && meets(*name));
    if (busy) {
      step.labels.emplace_back("meets-pending-transfer");
      step.labels.push_back(
          {commandKindName(c.kind), "-meets-pending-transfer"});
    } else if (c.noWait && (c.kind == CommandKind::ToDevice ||
                            c.kind == CommandKind::FromDevice)) {
      // Two records' transfers in flight together.
      step.labels.emplace_back("transfer-beside-pending-transfer");
    }
    if (c.kind == CommandKind::Run && networkDevice_.count(c.target)) {
      const std::string &dev = networkDevice_.at(c.target);
      bool joins = false, throughView = false;
      for (const auto &[ph, name] : c.bindings) {
        const ModelTensor *t = tensor(name);
        auto pending = t && !t->empty() ? pendingRunRecords_.find(t->record)
                                        : pendingRunRecords_.end();
        if (pending == pendingRunRecords_.end() || pending->second != dev)
          continue;
        const ModelRecord &r = records_.at(t->record);
        bool joined = isResident(r) && r.device == dev;
        joins = joins || joined;
        throughView = throughView || (joined && t->bytes() < r.bytes);
      }
      if (joins)
        step.labels.emplace_back("run-joins-pending-run");
      // An output in place over what a pending run reads: a backend that
      // reorders or fuses runs must leave that read first.
      if (auto net = device(dev).networks.find(c.target);
          net != device(dev).networks.end())
        for (const auto &[ph, name] : c.bindings) {
          const ModelTensor *t = tensor(name);
          if (t && !t->empty() && pendingRunInputs_.count(t->record) &&
              networkWrites(net->second.nodes, ph)) {
            step.labels.emplace_back("run-overwrites-a-pending-runs-input");
            break;
          }
        }
      // Part of a record a pending run holds: a backend that fuses or
      // forwards the two must honour the view's offset and length.
      if (throughView)
        step.labels.emplace_back("run-joins-through-a-partial-view");
    }
  }
  // A network evicted while a run of it is still in flight: the run must
  // still compute its results (a backend keeps what the run needs).
  if (c.kind == CommandKind::EvictNetwork &&
      pendingRunNetworks_.count(c.target))
    step.labels.emplace_back("evict-while-run-pending");
  // A fault planned while a read-back issued without waiting is in flight,
  // which must not meet it.
  if (c.kind == CommandKind::InjectFault && issuedWithoutWaiting_)
    step.labels.emplace_back("fault-planned-behind-read-back");
  loneReadBackPending_ =
      c.noWait && !issuedWithoutWaiting_ && c.kind == CommandKind::FromDevice;
  issuedWithoutWaiting_ = c.noWait;
  if (!c.noWait) {
    pendingRecords_.clear();
    pendingRunRecords_.clear();
    pendingRunNetworks_.clear();
    pendingRunInputs_.clear();
  }
  // A run issued without waiting holds busy, and resident where it stays,
  // the records resident on its device before it: the ones a later run
  // joins (an output it allocates is not there until it completes).
  std::vector<int> residentBeforeRun;
  if (c.noWait && c.kind == CommandKind::Run && networkDevice_.count(c.target))
    for (const auto &[ph, name] : c.bindings)
      if (const ModelTensor *t = tensor(name); t && !t->empty()) {
        const ModelRecord &r = records_.at(t->record);
        if (isResident(r) && r.device == networkDevice_.at(c.target))
          residentBeforeRun.push_back(t->record);
      }
  auto before = [&](const std::string &name) {
    const ModelRecord *r = recordOf(name);
    step.labels.push_back(
        {commandKindName(c.kind), "@", r ? stateName(r->state) : "empty"});
  };
  Outcome &o = step.outcome;
  switch (c.kind) {
  case CommandKind::Create: {
    ModelTensor t;
    t.kind = c.elemKind;
    t.dims = c.dims;
    if (!validDims(c.dims, c.elemKind)) {
      o = Outcome::violationOf(ViolationKind::InvalidTensorType);
    } else {
      t.record = newRecord(t.bytes());
      ModelRecord &r = records_.at(t.record);
      r.references = 1;
      // fillPattern writes every byte (pattern 0: zeros).
      if (trackContents_)
        fillPattern(c.elemKind, c.pattern, 0,
                    r.data.makeForOverwrite(t.bytes()));
    }
    tensorSlot(c.target) = t;
    break;
  }
  case CommandKind::View: {
    before(c.source);
    ModelTensor src = tensors_.at(c.source);
    ModelTensor v;
    v.kind = src.kind;
    v.dims = c.dims;
    if (src.empty()) {
      o = Outcome::violationOf(ViolationKind::UseOfMovedFrom);
    } else if (!validDims(c.dims, src.kind) || c.offset > src.numElements() ||
               v.numElements() > src.numElements() - c.offset) {
      o = Outcome::violationOf(ViolationKind::ViewOutOfBounds);
      v = ModelTensor{};
    } else {
      v.record = src.record;
      v.offsetBytes = src.offsetBytes + c.offset * elemSize(src.kind);
      v.isView = true;
      ++records_.at(v.record).references;
    }
    if (o.kind != Outcome::Kind::Ok)
      v.record = -1;
    tensorSlot(c.target) = v;
    break;
  }
  case CommandKind::Clone: {
    before(c.source);
    const ModelTensor src = tensors_.at(c.source);
    ModelTensor copy;
    if (src.empty()) {
      o = Outcome::violationOf(ViolationKind::UseOfMovedFrom);
    } else {
      const ModelRecord &r = records_.at(src.record);
      if (r.state == ResidencyState::Device)
        o = Outcome::violationOf(ViolationKind::HostAccessWhileOnDevice);
      else if (r.state == ResidencyState::Lost)
        o = Outcome::violationOf(ViolationKind::HostAccessWhileLost);
    }
    if (o == Outcome::ok()) {
      copy.kind = src.kind;
      copy.dims = src.dims;
      int id = newRecord(src.bytes());
      const ModelRecord &from = records_.at(src.record);
      ModelRecord &to = records_.at(id);
      to.references = 1;
      if (trackContents_)
        to.data.assign(from.data.bytes().subspan(src.offsetBytes, src.bytes()));
      to.known.clear();
      for (const auto &[b, e] :
           from.known.within(src.offsetBytes, src.offsetBytes + src.bytes()))
        to.known.mark(b, e);
      for (const auto &[b, e] :
           from.openNaN.within(src.offsetBytes, src.offsetBytes + src.bytes()))
        to.openNaN.mark(b, e);
      copy.record = id;
    }
    tensorSlot(c.target) = copy;
    break;
  }
  case CommandKind::MoveConstruct: {
    ModelTensor src = tensors_.at(c.source);
    tensorSlot(c.source) = ModelTensor{};
    tensorSlot(c.target) = src;
    unbindEverywhere(c.target);
    break;
  }
  case CommandKind::MoveAssign: {
    before(c.target);
    if (c.target == c.source)
      break;
    ModelTensor src = tensors_.at(c.source);
    ModelTensor &dst = tensors_.at(c.target);
    if (!dst.empty()) {
      const ModelRecord &r = records_.at(dst.record);
      if (isResident(r))
        step.labels.emplace_back("move-assign-onto-resident");
      dropReference(dst.record, step);
    }
    dst = src;
    tensorSlot(c.source) = ModelTensor{};
    break;
  }
  case CommandKind::SelfMove:
    before(c.target);
    break;
  case CommandKind::Destroy:
    before(c.target);
    forgetTensor(c.target, step);
    break;
  case CommandKind::ToDevice: {
    before(c.target);
    const ModelTensor &t = tensors_.at(c.target);
    ModelDevice &d = device(c.device);
    if (t.empty())
      o = Outcome::violationOf(ViolationKind::UseOfMovedFrom);
    else if (t.offsetBytes != 0 || t.bytes() != records_.at(t.record).bytes)
      o = Outcome::error(ErrorCode::InvalidArgument);
    else if (d.shutDown && !(d.traits.capabilities.residentTensors &&
                             residentElsewhere(t.record, c.device)))
      o = Outcome::error(ErrorCode::DeviceLost);
    else if (!d.traits.capabilities.residentTensors)
      o = Outcome::error(ErrorCode::NotSupported);
    else
      o = moveHere(t.record, c.device, c.location, step);
    break;
  }
  case CommandKind::FromDevice: {
    before(c.target);
    const ModelTensor &t = tensors_.at(c.target);
    if (t.empty()) {
      o = Outcome::violationOf(ViolationKind::UseOfMovedFrom);
      break;
    }
    ModelRecord &r = records_.at(t.record);
    if (t.offsetBytes != 0 || t.bytes() != r.bytes)
      o = Outcome::error(ErrorCode::InvalidArgument);
    else if (r.state == ResidencyState::Lost)
      o = Outcome::error(ErrorCode::DeviceLost);
    else if (r.state == ResidencyState::Host)
      o = Outcome::ok();
    else if (r.device != c.device)
      o = Outcome::error(ErrorCode::InvalidArgument);
    else if (r.state == ResidencyState::Mirrored) {
      if (c.release)
        releaseRecord(r);
    } else {
      o = fetchToHost(t.record, c.release, step);
    }
    break;
  }
  case CommandKind::Release:
    before(c.target);
    o = releaseTensor(tensors_.at(c.target), c.device, step);
    break;
  case CommandKind::DoubleRelease: {
    before(c.target);
    bool wasResident = recordOf(c.target) && isResident(*recordOf(c.target));
    o = releaseTensor(tensors_.at(c.target), c.device, step);
    if (o == Outcome::ok()) {
      o = releaseTensor(tensors_.at(c.target), c.device, step);
      if (wasResident)
        step.labels.emplace_back("double-release-of-resident");
    }
    break;
  }
  case CommandKind::Read: {
    before(c.target);
    const ModelTensor &t = tensors_.at(c.target);
    if (t.empty()) {
      o = Outcome::violationOf(ViolationKind::UseOfMovedFrom);
      break;
    }
    const ModelRecord &r = records_.at(t.record);
    if (r.state == ResidencyState::Device)
      o = Outcome::violationOf(ViolationKind::HostAccessWhileOnDevice);
    else if (r.state == ResidencyState::Lost)
      o = Outcome::violationOf(ViolationKind::HostAccessWhileLost);
    if (t.isView && o.kind == Outcome::Kind::Violation)
      step.labels.push_back({"view-observes-", stateName(r.state)});
    break;
  }
  case CommandKind::Write:
    before(c.target);
    o = writeHost(tensors_.at(c.target), c.pattern, false, step);
    break;
  case CommandKind::Refill:
    before(c.target);
    o = writeHost(tensors_.at(c.target), c.pattern, true, step);
    break;
  case CommandKind::AddNetwork: {
    networkDevice_[c.target] = c.device;
    ModelDevice &d = device(c.device);
    if (placement_.count(c.target))
      o = Outcome::error(ErrorCode::InvalidArgument);
    else if (d.shutDown)
      o = Outcome::error(ErrorCode::DeviceLost);
    else if (networkRefused(c))
      o = Outcome::error(ErrorCode::InvalidArgument);
    else {
      d.networks[c.target] = c;
      placement_[c.target] = c.device;
    }
    break;
  }
  case CommandKind::EvictNetwork: {
    auto it = placement_.find(c.target);
    if (it == placement_.end()) {
      o = Outcome::error(ErrorCode::InvalidArgument);
      break;
    }
    ModelDevice &d = device(it->second);
    if (!d.networks.erase(c.target))
      o = Outcome::error(ErrorCode::InvalidArgument);
    placement_.erase(it);
    break;
  }
  case CommandKind::Run:
    o = run(c, step);
    break;
  case CommandKind::EnsureOutputs:
    o = ensureOutputs(c, step);
    break;
  case CommandKind::Shutdown:
    step.labels.emplace_back(device(c.device).shutDown ? "shutdown-again"
                                                       : "shutdown");
    shutdownDevice(c.device, step);
    break;
  case CommandKind::InjectFault:
    if (!device(c.device).traits.capabilities.faultInjection)
      o = Outcome::error(ErrorCode::NotSupported);
    else if (device(c.device).shutDown)
      o = Outcome::error(ErrorCode::DeviceLost);
    else if (c.fault.nth == 0 || c.fault.code == ErrorCode::Success)
      o = Outcome::error(ErrorCode::InvalidArgument);
    else
      device(c.device).faults.push_back(
          {c.fault.site, c.fault.nth, c.fault.code});
    if (c.fault.code == ErrorCode::DeviceLost)
      device(c.device).lossPlanned = true;
    break;
  case CommandKind::Alloc: {
    ModelDevice &d = device(c.device);
    locations_[c.target] =
        ModelLocation{c.device, c.bytes, ModelLocation::State::Dead};
    if (d.shutDown)
      o = Outcome::error(ErrorCode::DeviceLost);
    else if (c.bytes == 0)
      o = Outcome::error(ErrorCode::InvalidArgument);
    else if (!d.traits.capabilities.residentTensors)
      o = Outcome::error(ErrorCode::NotSupported);
    else
      o = allocate(c.device, c.bytes, step);
    if (o == Outcome::ok()) {
      locations_[c.target].state = ModelLocation::State::Live;
      activeLocations_.insert(c.target);
    }
    break;
  }
  case CommandKind::Free: {
    ModelLocation &l = locations_.at(c.target);
    if (l.device != c.device) {
      o = Outcome::error(ErrorCode::InvalidArgument);
      step.labels.emplace_back("free-on-another-device");
      break;
    }
    if (l.state != ModelLocation::State::Live || device(c.device).shutDown) {
      o = Outcome::error(ErrorCode::InvalidArgument);
      if (l.state == ModelLocation::State::Owned)
        step.labels.emplace_back("free-of-owned-location");
      break;
    }
    freeOnDevice(c.device, l.bytes);
    markDead(c.target);
    break;
  }
  }
  if (o.kind == Outcome::Kind::Violation)
    step.callbacks = 0;
  else if (completesThroughCallback(c.kind))
    step.callbacks = 1;
  if (o != Outcome::ok()) {
    auto [kindText, name] = o.textParts();
    step.labels.push_back({"outcome-", kindText, name});
  }
  if (c.sync)
    step.labels.emplace_back(c.kind == CommandKind::Run ? "sync-run"
                             : c.kind == CommandKind::ToDevice
                                 ? "sync-to-device"
                                 : "sync-from-device");
  if (c.inCallback)
    step.labels.emplace_back(c.kind == CommandKind::Shutdown
                                 ? "shutdown-in-callback"
                                 : "issued-in-callback");
  if (c.noWait) {
    step.labels.emplace_back("issued-without-waiting");
    if (const ModelTensor *t =
            c.kind == CommandKind::Run ? nullptr : tensor(c.target);
        t && !t->empty()) {
      pendingRecords_.insert(t->record);
      // A transfer waits for the runs before it: what follows meets it.
      pendingRunRecords_.erase(t->record);
      pendingRunInputs_.erase(t->record);
    }
    if (c.kind == CommandKind::Run && networkDevice_.count(c.target)) {
      step.labels.emplace_back("run-issued-without-waiting");
      pendingRunNetworks_.insert(c.target);
      const std::string &dev = networkDevice_.at(c.target);
      if (auto net = device(dev).networks.find(c.target);
          net != device(dev).networks.end())
        for (const auto &[ph, name] : c.bindings)
          if (const ModelTensor *t = tensor(name);
              t && !t->empty() && !networkWrites(net->second.nodes, ph))
            pendingRunInputs_.insert(t->record);
      for (const auto &[ph, name] : c.bindings)
        if (const ModelTensor *t = tensor(name); t && !t->empty())
          pendingRecords_.insert(t->record);
      for (int record : residentBeforeRun)
        pendingRunRecords_.emplace(record, networkDevice_.at(c.target));
    }
  }
  return step;
}

bool Model::transferPendingOn(const std::string &name) const {
  const ModelTensor *t = tensor(name);
  return t && !t->empty() && pendingRecords_.count(t->record);
}

bool Model::accountingFixedByCompletion(const Command &c) const {
  if (c.kind == CommandKind::Run) {
    auto dev = networkDevice_.find(c.target);
    if (dev == networkDevice_.end() || c.bindings.empty())
      return false;
    return std::all_of(c.bindings.begin(), c.bindings.end(), [&](auto &b) {
      const ModelTensor *t = tensor(b.second);
      if (!t || t->empty())
        return false;
      const ModelRecord &r = records_.at(t->record);
      return isResident(r) && r.device == dev->second;
    });
  }
  const ModelTensor *t = tensor(c.target);
  if (!t || t->empty())
    return false;
  const ModelRecord &r = records_.at(t->record);
  if (c.kind == CommandKind::ToDevice)
    return r.state != ResidencyState::Device || r.device == c.device;
  if (c.kind == CommandKind::FromDevice)
    return !c.release || r.state == ResidencyState::Host;
  return false;
}

void Model::teardown() {
  Step ignored;
  for (auto &[name, l] : locations_)
    if (l.state == ModelLocation::State::Live) {
      freeOnDevice(l.device, l.bytes);
      l.state = ModelLocation::State::Dead;
      activeLocations_.erase(name);
    }
  std::vector<std::string> names;
  for (const auto &[name, t] : tensors_)
    names.push_back(name);
  for (const std::string &name : names)
    forgetTensor(name, ignored);
}

bool commandFitsModel(const Command &c, const Model &model) {
  auto has = [&](const std::string &name) { return model.tensor(name); };
  auto hasDevice = [&](const std::string &name) {
    return model.devices().count(name) != 0;
  };
  auto network = [&](const std::string &name) {
    return model.networkDevices().count(name) != 0;
  };
  switch (c.kind) {
  case CommandKind::Create:
    return !has(c.target) && (c.device.empty() || hasDevice(c.device));
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
           (c.location.empty() || model.locations().count(c.location)) &&
           (!c.noWait || !model.devices().at(c.device).lossPlanned);
  case CommandKind::FromDevice:
    return has(c.target) && hasDevice(c.device) &&
           (!c.noWait || !model.devices().at(c.device).lossPlanned);
  case CommandKind::Release:
  case CommandKind::DoubleRelease:
    return has(c.target) && hasDevice(c.device);
  case CommandKind::AddNetwork:
    return hasDevice(c.device);
  case CommandKind::Shutdown:
  case CommandKind::InjectFault:
    // Beside pending transfers as validateScenario allows.
    return hasDevice(c.device) &&
           (!model.transfersPending() ||
            mayFollowPendingWork(c, model.loneReadBackPending()));
  case CommandKind::Run:
    for (const auto &[ph, t] : c.bindings)
      if (!has(t))
        return false;
    return network(c.target) &&
           (!c.noWait || !model.devices()
                              .at(model.networkDevices().at(c.target))
                              .lossPlanned);
  case CommandKind::EvictNetwork:
  case CommandKind::EnsureOutputs:
    return network(c.target);
  case CommandKind::Alloc:
    return hasDevice(c.device) && !model.locations().count(c.target);
  case CommandKind::Free:
    return hasDevice(c.device) && model.locations().count(c.target);
  }
  return false;
}

} // namespace drt::conformance
