//===- PinnedHostMemory.h - Tensor storage the device DMAs ------*- C++ -*-===//
//
// Pinned host memory for tensors (drt::HostMemory): each allocation is a
// CL_MEM_ALLOC_HOST_PTR buffer, mapped for its whole life, whose mapped
// memory the driver moves to and from the device by DMA without a staging
// copy (NVIDIA's driver page-locks it; on POCL it is the buffer's storage).
// A process-wide table of the mapped ranges lets a transfer tell pinned
// storage from pageable storage.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_PINNEDHOSTMEMORY_H
#define DRT_OPENCL_PINNEDHOSTMEMORY_H

#include "drt/HostMemory.h"

#include <CL/cl.h>

#include <cstdint>
#include <memory>
#include <string>

namespace drt::opencl {

/// True when [\p data, \p data + \p bytes) lies inside one live allocation
/// of pinned host memory of this process.
bool isPinnedHostMemory(const void *data, uint64_t bytes);

/// Pinned host memory in \p context for \p device (retained for the
/// memory's life, with a command queue of its own to map and unmap), named
/// after the device manager \p who; DeviceError naming the failing call.
Expected<std::shared_ptr<HostMemory>>
makePinnedHostMemory(cl_context context, cl_device_id device, std::string who);

} // namespace drt::opencl

#endif // DRT_OPENCL_PINNEDHOSTMEMORY_H
