// The autotuner's device clock for the CUDA candidates across nodes (device_trial_clock.h)
#include "backend/device_trial_clock.h"

#ifdef RINGREDUCE_WITH_CUDA

#include <algorithm>
#include <string>

#include "core/base/errors.h"
#include "cuda/stream_tracker.h"
#include "cuda/stream_wake.h"

namespace ringreduce {

StreamTrialClock::StreamTrialClock(int device, void* stream, const OpContext& op)
    : device_(device), stream_(stream), op_(op) {}

StreamTrialClock::~StreamTrialClock() { release(); }

// A mark still pending is released safely: CUDA frees it once reached.
void StreamTrialClock::release() {
  if (start_ != nullptr) cuda::freeMark(start_);
  if (end_ != nullptr) cuda::freeMark(end_);
  start_ = end_ = nullptr;
}

void StreamTrialClock::start() {
  release();
  start_ = cuda::recordTimingMark(device_, stream_);
}

double StreamTrialClock::stop() {
  end_ = cuda::recordTimingMark(device_, stream_);
  cuda::StreamWake wake;
  wake.armAfter(stream_);
  while (!cuda::markReached(end_)) {
    const auto now = Clock::now();
    if (now >= op_.deadline) {
      throw TimeoutError("ringreduce: " + op_.describe() + " timed out after " +
                         std::to_string(op_.timeout.count()) +
                         " ms (operation timeout reached) waiting for the GPU to finish an "
                         "autotune trial");
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(op_.deadline - now).count() + 1;
    wake.sleep(static_cast<int>(std::min<long long>(left, 100)));
  }
  return cuda::secondsBetweenMarks(start_, end_);
}

}  // namespace ringreduce

#endif
