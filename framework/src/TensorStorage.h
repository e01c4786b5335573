//===- TensorStorage.h - Host bytes and the record they share ---*- C++ -*-===//
//
// The object a tensor and its views share: 64-byte aligned host bytes and the
// residency record. Its destructor is the "last reference goes" point of the
// contract: it releases a device copy exactly once.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_TENSORSTORAGE_H
#define DRT_FRAMEWORK_TENSORSTORAGE_H

#include "drt/HostMemory.h"
#include "drt/Tensor.h"

#include "GuardedHostBlock.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace drt {

class TensorStorage : public std::enable_shared_from_this<TensorStorage> {
public:
  static constexpr size_t Alignment = 64;

  /// Whether new storage is zero-filled, or left for its creator to write
  /// every byte of before anyone else can read it.
  enum class Contents { Zeroed, WrittenByCreator };
  /// \p bytes of pageable memory (zeroed unless \p contents says the
  /// creator writes them), between guards of \p guard bytes (0 or
  /// HostGuardBytes); with guards, of GuardedBlockMinBytes or more in a
  /// guarded block (GuardedHostBlock.h), whose guard after the bytes runs to
  /// the end of its page.
  TensorStorage(size_t bytes, std::string name, size_t guard,
                Contents contents = Contents::Zeroed);
  /// Takes over the block at \p base that \p memory allocated: \p bytes,
  /// which it zeroes, between guards of \p guard bytes.
  TensorStorage(size_t bytes, std::string name, size_t guard, std::byte *base,
                std::shared_ptr<HostMemory> memory);
  ~TensorStorage();
  TensorStorage(const TensorStorage &) = delete;
  TensorStorage &operator=(const TensorStorage &) = delete;

  std::byte *data() { return data_.data; }
  /// Where the bytes came from; null for pageable memory.
  const std::shared_ptr<HostMemory> &memory() const { return data_.memory; }
  size_t size() const { return data_.size; }
  /// The owner's name, for messages about the whole storage.
  const std::string &name() const { return name_; }
  /// "tensor 'a' (16 bytes)".
  std::string describe() const;
  /// describe() of a storage named \p name of \p bytes.
  static std::string describe(std::string_view name, size_t bytes);
  /// Empty while the guards around the bytes (HostGuardScope) hold their
  /// pattern, or when there are none; else which guard bytes changed, and
  /// the pattern is written again, so a change is told once.
  std::string takeGuardDamage();
  /// Where the storage has guards (it was made while a HostGuardScope was
  /// alive), overwrites its bytes with StaleHostByte: the record is on a
  /// device only, its host copy stale (semantics §2), so a backend that
  /// reads the host bytes from then on, or a read-back that leaves some of
  /// them in place, shows the pattern instead of the device's data. Called
  /// with the record's lock held, when it becomes Device.
  void markHostStale();

  ResidencyRecord record;

private:
  /// The bytes, given back where they came from when the storage goes.
  struct HostBytes {
    std::byte *data;
    size_t size;
    /// Bytes of guard before data.
    size_t guard;
    /// Bytes of guard after its size bytes.
    size_t guardAfter;
    /// Null for pageable memory.
    std::shared_ptr<HostMemory> memory;
    /// Where the bytes lie in a guarded block (pageable memory, not from
    /// operator new); null mapping otherwise.
    GuardedHostBlock block;
    ~HostBytes();
  };
  /// Pageable bytes for the first constructor.
  static HostBytes pageableBytes(size_t bytes, size_t guard);

  HostBytes data_;
  std::string name_;
};

} // namespace drt

#endif // DRT_FRAMEWORK_TENSORSTORAGE_H
