//===- HandOff.h - Work handed to asynchronous devices ---------*- C++ -*-===//
//
// Internal to the framework. A call on a synchronous device may still
// complete later when the framework hands part of it to another device that
// completes asynchronously (a move of a record resident there, after waiting
// for an operation in flight on it). The blocking helpers count such
// hand-offs on the calling thread, so that they wait for that work instead
// of reporting the synchronous device for returning early.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FRAMEWORK_HANDOFF_H
#define DRT_FRAMEWORK_HANDOFF_H

namespace drt {

class DeviceManager;

/// Records that the calling thread is handing work to \p device, when
/// \p device declares asynchronous completion.
void noteHandOffTo(const DeviceManager &device);

/// How many hand-offs to asynchronous devices the calling thread has made.
unsigned asynchronousHandOffs();

} // namespace drt

#endif // DRT_FRAMEWORK_HANDOFF_H
