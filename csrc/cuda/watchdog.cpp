// A watchdog over our device work, from a thread of its own (watchdog.h)
#include "cuda/watchdog.h"

#include "cuda/current_device.h"

namespace ringreduce::cuda {

Watchdog::Watchdog(int device, Target target, std::function<void(const std::string&)> onFailure,
                   std::function<bool()> shouldStop, std::chrono::milliseconds period)
    : device_(device),
      target_(std::move(target)),
      onFailure_(std::move(onFailure)),
      shouldStop_(std::move(shouldStop)),
      period_(period),
      thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::check() {
  const std::string reason = target_.failure();
  if (!reason.empty()) {
    target_.stop(reason);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (reported_) return;
      reported_ = true;
    }
    if (onFailure_) onFailure_(reason);
    return;
  }
  if (shouldStop_ && shouldStop_()) target_.stop("the process group failed or was aborted");
}

void Watchdog::run() {
  try {
    makeCurrent(device_);  // also for the event queries of stream-memops collectives
  } catch (...) {
    // A broken runtime: the collectives report it themselves.
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (!quit_) {
    wake_.wait_for(lock, period_);
    if (quit_) break;
    lock.unlock();
    try {
      check();
    } catch (...) {
      // As above: a look that cannot be made is retried at the next one.
    }
    lock.lock();
  }
}

}  // namespace ringreduce::cuda
