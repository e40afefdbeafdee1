#include "cuda/nccl/nccl_watchdog.h"

namespace ringreduce::cuda {

NcclWatchdog::NcclWatchdog(NcclCommunicator& nccl,
                           std::function<void(const std::string&)> onFailure,
                           std::function<bool()> shouldStop, std::chrono::milliseconds period)
    : nccl_(nccl),
      onFailure_(std::move(onFailure)),
      shouldStop_(std::move(shouldStop)),
      thread_(nccl.device(), period, [this] { check(); }) {}

void NcclWatchdog::check() {
  if (nccl_.aborted()) return;
  const std::string reason = nccl_.asyncError();
  if (!reason.empty()) {
    nccl_.abort(reason);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (reported_) return;
      reported_ = true;
    }
    if (onFailure_) onFailure_(reason);
    return;
  }
  if (shouldStop_ && shouldStop_()) nccl_.abort("the process group failed or was aborted");
}

}  // namespace ringreduce::cuda
