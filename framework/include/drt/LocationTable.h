//===- drt/LocationTable.h - Generation-checked handle table ----*- C++ -*-===//
//
// Backends keep their allocations in a LocationTable: each entry is reached
// through a DeviceLocation that encodes the table, a slot and the slot's
// generation. A slot's generation changes every time it is freed, so a
// handle that was released (or never issued) no longer matches and lookup()
// returns nullptr; nor does a handle another table issued (another
// device's), whose slot and generation may well be live here. This is what
// keeps stale and foreign handles away from the driver.
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

/// The tag of the next LocationTable made, of any T: tags go round 0-255,
/// so that tables made one after the other, of one backend or several,
/// never share one.
uint32_t nextLocationTableTag();

/// A slot map from DeviceLocation to T. Not thread-safe: the owning backend
/// serialises access. A handle is the generation (high 32 bits), the
/// table's tag (8 bits) and the slot plus one (24 bits); tags are handed
/// out in turn, so tables made one after the other (the devices of one
/// program) never share one.
template <typename T> class LocationTable {
public:
  LocationTable() : tag_(nextLocationTableTag()) {}

  /// Stores \p value and returns a fresh handle for it, or the null handle
  /// (storing nothing) when 2^24 - 1 entries are live already.
  DeviceLocation insert(T value) {
    uint32_t slot;
    if (!freeSlots_.empty()) {
      slot = freeSlots_.back();
      freeSlots_.pop_back();
    } else {
      // Handles have room for 2^24 - 1 slots.
      if (slots_.size() >= SlotMask)
        return DeviceLocation{};
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

  static constexpr uint64_t SlotBits = 24;
  static constexpr uint64_t SlotMask = (uint64_t(1) << SlotBits) - 1;

  DeviceLocation encode(uint32_t slot, uint32_t generation) const {
    return DeviceLocation{(uint64_t(generation) << 32) |
                          (uint64_t(tag_) << SlotBits) | (uint64_t(slot) + 1)};
  }
  static uint32_t slotOf(DeviceLocation l) {
    return static_cast<uint32_t>(l.value & SlotMask) - 1;
  }
  Slot *find(DeviceLocation location) {
    uint64_t low = location.value & SlotMask;
    if (low == 0 || low > slots_.size() ||
        ((location.value >> SlotBits) & 0xffu) != tag_)
      return nullptr;
    Slot &s = slots_[low - 1];
    if (!s.value || s.generation != uint32_t(location.value >> 32))
      return nullptr;
    return &s;
  }

  uint32_t tag_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> freeSlots_;
  size_t size_ = 0;
};

} // namespace drt

#endif // DRT_LOCATIONTABLE_H
