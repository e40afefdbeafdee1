#include "cuda/signal/signal_watchdog.h"

namespace ringreduce::cuda {

SignalWatchdog::SignalWatchdog(SignalGroup& group,
                               std::function<void(const std::string&)> onFailure,
                               std::function<bool()> shouldStop, std::chrono::milliseconds period)
    : group_(group),
      onFailure_(std::move(onFailure)),
      shouldStop_(std::move(shouldStop)),
      thread_(group.device(), period, [this] { check(); }) {}

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

}  // namespace ringreduce::cuda
