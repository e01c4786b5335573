//===- DeviceBlockPool.h - Freed device blocks kept for reuse ---*- C++ -*-===//
//
// The OpenCL backend keeps the cl_mem blocks of freed allocations in size
// classes and hands them to later allocations of the same class without a
// driver call, as PyTorch's CUDA caching allocator does: creating a buffer
// costs a driver call, and on POCL the first touch of its fresh pages costs
// about 2.4 us per 4 KiB (docs/opencl.md). The pool only stores blocks; the
// device manager decides what to keep, gives blocks back to the driver under
// pressure and at shutdown, and keeps every location generation-checked, so
// a reused block is never reachable through the location it had before.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_DEVICEBLOCKPOOL_H
#define DRT_OPENCL_DEVICEBLOCKPOOL_H

#include <CL/cl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <vector>

namespace drt::opencl {

/// A block of device memory: the buffer and the bytes it was created with.
struct DeviceBlock {
  cl_mem buffer = nullptr;
  uint64_t bytes = 0;
};

/// The size class of an allocation of \p bytes: rounded up to \p granule
/// (a power of two), and above 4 granules to a quarter of the largest power
/// of two not above \p bytes, so a block is at most 25% larger than asked.
inline uint64_t blockSizeClass(uint64_t bytes, uint64_t granule) {
  uint64_t floor = std::bit_floor(std::max<uint64_t>(bytes, 1));
  uint64_t step = std::max<uint64_t>(granule, floor / 4);
  return (bytes + step - 1) / step * step;
}

/// Cached blocks by exact size.
class DeviceBlockPool {
public:
  /// A cached block of exactly \p bytes, removed from the pool, or a null one.
  DeviceBlock take(uint64_t bytes) {
    auto it = blocks_.find(bytes);
    if (it == blocks_.end())
      return {};
    if (it->second.empty())
      return {};
    DeviceBlock block{it->second.back(), bytes};
    it->second.pop_back();
    // An emptied size stays listed, so that giving the block back allocates
    // nothing (a transfer takes and keeps one each time); only so many.
    if (it->second.empty() && blocks_.size() > MostEmptySizes)
      blocks_.erase(it);
    cachedBytes_ -= bytes;
    return block;
  }

  /// Caches \p block.
  void keep(DeviceBlock block) {
    blocks_[block.bytes].push_back(block.buffer);
    cachedBytes_ += block.bytes;
  }

  /// Removes cached blocks, largest first, until at least \p bytes of them
  /// are removed or the pool is empty, and returns them for release.
  std::vector<DeviceBlock> evict(uint64_t bytes) {
    std::vector<DeviceBlock> out;
    uint64_t removed = 0;
    while (removed < bytes && !blocks_.empty()) {
      auto it = std::prev(blocks_.end());
      if (it->second.empty()) {
        blocks_.erase(it);
        continue;
      }
      out.push_back({it->second.back(), it->first});
      removed += it->first;
      cachedBytes_ -= it->first;
      it->second.pop_back();
      if (it->second.empty())
        blocks_.erase(it);
    }
    return out;
  }

  /// Every cached block, removed from the pool.
  std::vector<DeviceBlock> evictAll() { return evict(cachedBytes_); }

  /// Bytes of the cached blocks.
  uint64_t cachedBytes() const { return cachedBytes_; }

private:
  /// Past this many sizes listed, a size emptied by take() is dropped.
  static constexpr size_t MostEmptySizes = 64;
  std::map<uint64_t, std::vector<cl_mem>> blocks_;
  uint64_t cachedBytes_ = 0;
};

} // namespace drt::opencl

#endif // DRT_OPENCL_DEVICEBLOCKPOOL_H
