//===- drt/LocationTable.h - Generation-checked handle table ----*- C++ -*-===//
//
// Backends keep their allocations in a LocationTable: each entry is reached
// through a DeviceLocation that encodes a slot and the slot's generation. A
// slot's generation changes every time it is freed, so a handle that was
// released (or never issued) no longer matches and lookup() returns nullptr.
// This is what keeps stale handles away from the driver.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_LOCATIONTABLE_H
#define DRT_LOCATIONTABLE_H

#include "drt/DeviceLocation.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace drt {

/// A slot map from DeviceLocation to T. Not thread-safe: the owning backend
/// serialises access.
template <typename T> class LocationTable {
public:
  /// Stores \p value and returns a fresh handle for it.
  DeviceLocation insert(T value) {
    uint32_t slot;
    if (!freeSlots_.empty()) {
      slot = freeSlots_.back();
      freeSlots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    Slot &s = slots_[slot];
    s.value = std::move(value);
    ++size_;
    return encode(slot, s.generation);
  }

  /// The entry for \p location, or nullptr if it is stale, unknown or null.
  T *lookup(DeviceLocation location) {
    Slot *s = find(location);
    return s ? &*s->value : nullptr;
  }
  const T *lookup(DeviceLocation location) const {
    return const_cast<LocationTable *>(this)->lookup(location);
  }

  /// Removes the entry for \p location and returns it; std::nullopt if the
  /// handle is stale, unknown or null (nothing is changed then).
  std::optional<T> erase(DeviceLocation location) {
    Slot *s = find(location);
    if (!s)
      return std::nullopt;
    std::optional<T> out = std::move(s->value);
    s->value.reset();
    // Generation 0 is never issued, so wrapping skips it.
    if (++s->generation == 0)
      s->generation = 1;
    freeSlots_.push_back(slotOf(location));
    --size_;
    return out;
  }

  /// Number of live entries.
  size_t size() const { return size_; }

  /// Calls \p fn(location, value) for each live entry.
  template <typename Fn> void forEach(Fn &&fn) {
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].value)
        fn(encode(i, slots_[i].generation), *slots_[i].value);
  }

  /// Removes every entry; all handles issued so far become stale.
  void clear() {
    for (uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].value)
        erase(encode(i, slots_[i].generation));
  }

private:
  struct Slot {
    std::optional<T> value;
    uint32_t generation = 1;
  };

  static DeviceLocation encode(uint32_t slot, uint32_t generation) {
    return DeviceLocation{(uint64_t(generation) << 32) | (uint64_t(slot) + 1)};
  }
  static uint32_t slotOf(DeviceLocation l) {
    return static_cast<uint32_t>(l.value & 0xffffffffu) - 1;
  }
  Slot *find(DeviceLocation location) {
    uint32_t low = static_cast<uint32_t>(location.value & 0xffffffffu);
    if (low == 0 || low > slots_.size())
      return nullptr;
    Slot &s = slots_[low - 1];
    if (!s.value || s.generation != uint32_t(location.value >> 32))
      return nullptr;
    return &s;
  }

  std::vector<Slot> slots_;
  std::vector<uint32_t> freeSlots_;
  size_t size_ = 0;
};

} // namespace drt

#endif // DRT_LOCATIONTABLE_H
