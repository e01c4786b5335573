//===- TensorStorage.h - Host bytes and the record they share ---*- C++ -*-===//
//
// The object a tensor and its views share: 64-byte aligned host bytes and the
// residency record. Its destructor is the "last reference goes" point of the
// contract: it releases a device copy exactly once.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_TENSORSTORAGE_H
#define DRT_FRAMEWORK_TENSORSTORAGE_H

#include "drt/Tensor.h"

#include <cstddef>
#include <memory>
#include <string>

namespace drt {

class TensorStorage : public std::enable_shared_from_this<TensorStorage> {
public:
  static constexpr size_t Alignment = 64;

  TensorStorage(size_t bytes, std::string name);
  ~TensorStorage();
  TensorStorage(const TensorStorage &) = delete;
  TensorStorage &operator=(const TensorStorage &) = delete;

  std::byte *data() { return data_.get(); }
  size_t size() const { return size_; }
  /// The owner's name, for messages about the whole storage.
  const std::string &name() const { return name_; }
  /// "tensor 'a' (16 bytes)".
  std::string describe() const;

  ResidencyRecord record;

private:
  struct AlignedDelete {
    void operator()(std::byte *p) const {
      ::operator delete[](p, std::align_val_t(Alignment));
    }
  };
  std::unique_ptr<std::byte[], AlignedDelete> data_;
  size_t size_;
  std::string name_;
};

} // namespace drt

#endif // DRT_FRAMEWORK_TENSORSTORAGE_H
