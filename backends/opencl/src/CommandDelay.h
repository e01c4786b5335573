//===- CommandDelay.h - Commands held back as by a slow device -*- C++ -*-===//
//
// The `driver-delay-us` parameter's machinery: each command the backend
// enqueues waits, before the device may start it, for a user event that a
// thread of its own completes a random time later. On POCL a copy ends
// within microseconds of its enqueue, so that a buffer given back, reused or
// freed before the command that reads it has run goes unnoticed; on a
// device slower than its host it is overwritten first. Holding commands
// back opens that window here too.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_OPENCL_COMMANDDELAY_H
#define DRT_OPENCL_COMMANDDELAY_H

#include <CL/cl.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace drt::opencl {

class CommandDelay {
public:
  /// Holds commands back for up to \p most each.
  explicit CommandDelay(std::chrono::microseconds most);
  /// Completes every event not yet completed at once, then ends its thread.
  ~CommandDelay();
  CommandDelay(const CommandDelay &) = delete;
  CommandDelay &operator=(const CommandDelay &) = delete;

  /// A user event of \p queue's context that completes a random time from
  /// now (from half the bound to all of it), for a command's wait list; null
  /// when none can be made (the command then runs undelayed). The caller
  /// releases it once the command is enqueued; this object completes and
  /// releases it too (it may complete before the command is enqueued).
  cl_event gate(cl_command_queue queue);

private:
  void run();

  const std::chrono::microseconds most_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::multimap<std::chrono::steady_clock::time_point, cl_event> pending_;
  std::minstd_rand random_;
  bool exit_ = false;
  std::thread thread_;
};

} // namespace drt::opencl

#endif // DRT_OPENCL_COMMANDDELAY_H
