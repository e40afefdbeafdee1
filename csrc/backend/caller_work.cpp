// The Work of a collective that ran on the caller's thread (caller_work.h)
#include "backend/caller_work.h"

#include "core/observe/latency_probe.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend/output_future.h"
#include "backend/stream_order.h"
#include "backend/work_result.h"

namespace ringreduce {

CallerWork::CallerWork(int rank, c10d::OpType opType, uint64_t seq, at::Tensor output,
                       std::optional<c10::Stream> queuedOn, CallerTiming timing)
    : c10d::Work(rank, opType),
      seq_(seq),
      output_(std::move(output)),
      queuedOn_(queuedOn),
      timing_(std::move(timing)) {
  completed_ = true;  // no one can see it yet: no lock, no notify
}

bool CallerWork::wait(std::chrono::milliseconds) {
  probe::mark(ProbePoint::WaitEntered);
  synchronize();
  probe::mark(ProbePoint::WaitReturned);
  return true;
}

void CallerWork::synchronize() {
  if (!queuedOn_) return;
  const c10::Stream current =
      c10::impl::getDeviceGuardImpl(queuedOn_->device_type())->getStream(queuedOn_->device());
  streamWaitsFor(current, *queuedOn_);
}

c10::intrusive_ptr<c10::ivalue::Future> CallerWork::getFuture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (future_) return future_;
  std::vector<c10::Device> devices;
  if (queuedOn_) devices.push_back(queuedOn_->device());
  future_ = tensorListFuture(std::move(devices));
  // Completing records the future's events on the current stream: it must
  // be the one the collective went on (callbacks then run after it).
  std::optional<c10::StreamGuard> onQueuedStream;
  if (queuedOn_) onQueuedStream.emplace(*queuedOn_);
  future_->markCompleted(c10::IValue(std::vector<at::Tensor>{output_}));
  return future_;
}

c10::intrusive_ptr<c10::ivalue::Future> CallerWork::getFutureResult() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!result_) result_ = completedResult(c10d::WorkResult::SUCCESS);
  return result_;
}

float CallerWork::getDuration() const {
  const WorkName who{opType_, seq_, rank_};
  if (output_.is_cuda()) {
    const DeviceSpan* span = timing_.device.get();
    return deviceMilliseconds(who, span ? &span->start : nullptr, span ? &span->end : nullptr,
                              timing_.captured ? Untimed::Captured : Untimed::TimingOff);
  }
  return hostMilliseconds(who, timing_.started, timing_.finished, Untimed::TimingOff);
}

}  // namespace ringreduce
