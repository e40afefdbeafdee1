#include "cuda/signal/signal_watchdog.h"

#include <cuda_runtime_api.h>

namespace ringreduce::cuda {

SignalWatchdog::SignalWatchdog(SignalGroup& group,
                               std::function<void(const std::string&)> onFailure,
                               std::function<bool()> shouldStop, std::chrono::milliseconds period)
    : group_(group),
      onFailure_(std::move(onFailure)),
      shouldStop_(std::move(shouldStop)),
      period_(period),
      thread_([this] { run(); }) {}

SignalWatchdog::~SignalWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SignalWatchdog::check() {
  const std::string reason = group_.failure();
  if (!reason.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (reported_) return;
      reported_ = true;
    }
    group_.stop();
    onFailure_(reason);
    return;
  }
  if (shouldStop_ && shouldStop_()) group_.stop();
}

void SignalWatchdog::run() {
  // The group's device, for the event queries of stream-memops collectives.
  (void)cudaSetDevice(group_.device());
  std::unique_lock<std::mutex> lock(mutex_);
  while (!quit_) {
    wake_.wait_for(lock, period_);
    if (quit_) break;
    lock.unlock();
    try {
      check();
    } catch (...) {
      // A broken runtime: the collectives report it themselves.
    }
    lock.lock();
  }
}

}  // namespace ringreduce::cuda
