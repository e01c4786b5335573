//===- CommandDelay.cpp - Commands held back as by a slow device ----------===//
#include "CommandDelay.h"

namespace drt::opencl {

CommandDelay::CommandDelay(std::chrono::microseconds most)
    : most_(most), thread_([this] { run(); }) {}

CommandDelay::~CommandDelay() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exit_ = true;
  }
  changed_.notify_one();
  thread_.join();
}

cl_event CommandDelay::gate(cl_command_queue queue) {
  cl_context context = nullptr;
  if (clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context,
                            nullptr) != CL_SUCCESS)
    return nullptr;
  cl_int rc = CL_SUCCESS;
  cl_event event = clCreateUserEvent(context, &rc);
  if (rc != CL_SUCCESS || !event)
    return nullptr;
  // One reference for the caller, one for the thread that completes it.
  if (clRetainEvent(event) != CL_SUCCESS) {
    clSetUserEventStatus(event, CL_COMPLETE);
    clReleaseEvent(event);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // At least half the bound, so that a command is held back for sure.
    auto delay =
        std::chrono::microseconds(std::uniform_int_distribution<long long>(
            most_.count() / 2, most_.count())(random_));
    pending_.emplace(std::chrono::steady_clock::now() + delay, event);
  }
  changed_.notify_one();
  return event;
}

void CommandDelay::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!exit_ || !pending_.empty()) {
    if (pending_.empty()) {
      changed_.wait(lock);
      continue;
    }
    auto first = pending_.begin();
    if (!exit_ && std::chrono::steady_clock::now() < first->first) {
      changed_.wait_until(lock, first->first);
      continue;
    }
    cl_event event = first->second;
    pending_.erase(first);
    // Completed without the lock: a blocking enqueue may be waiting on it
    // while another thread asks for a gate.
    lock.unlock();
    clSetUserEventStatus(event, CL_COMPLETE);
    clReleaseEvent(event);
    lock.lock();
  }
}

} // namespace drt::opencl
