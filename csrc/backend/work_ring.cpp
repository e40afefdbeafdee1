// The c10d::Work of one queued ringreduce collective (work_ring.h)
#include "backend/work_ring.h"

#include "core/observe/latency_probe.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

namespace ringreduce {

namespace {
std::vector<c10::Device> devicesOf(const DeviceCall* device) {
  if (device == nullptr) return {};
  return {device->device};
}
}  // namespace

WorkRing::WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
                   const DeviceCall* device, std::weak_ptr<Executor> executor, bool timed)
    : c10d::Work(rank, opType),
      seq_(seq),
      timed_(timed),
      outputs_(std::move(outputs)),
      executor_(std::move(executor)) {
  if (device != nullptr) {
    deviceFuture_ = tensorListFuture(devicesOf(device));
    stream_ = device->stream;
    if (timed) span_ = std::make_shared<DeviceSpan>();
  }
}

void WorkRing::markDeviceStarted() {
  if (span_) span_->start.record(*stream_);
}

bool WorkRing::wait(std::chrono::milliseconds timeout) {
  probe::mark(ProbePoint::WaitEntered);
  // A CUDA work's wait() must not block the host on the GPU, so only host
  // works are run by the waiting thread.
  Clock::time_point gaveUpAt{};  // set where helpUntil's spin gave up
  if (!stream_) {
    // torch's send() and recv() wait at once; inside a coalescing block
    // (batch_isend_irecv's) that holds them, nothing could complete them.
    TORCH_CHECK_VALUE(!heldInBlock_.load(std::memory_order_acquire), "ringreduce: wait() on ",
                      c10d::opTypeToString(opType_), " #", seq_, " on rank ", rank_,
                      " inside the coalescing block that holds it until the block ends: it "
                      "could never complete. Wait for it after the block (as for "
                      "batch_isend_irecv's works), or issue it outside the block; the block "
                      "still runs it when it ends (a block torch's manager left open, where "
                      "it raised, ends at the group's next all_reduce, "
                      "all_gather_into_tensor, reduce_scatter_tensor or block)");
    if (std::shared_ptr<Executor> executor = executor_.lock()) {
      executor->helpUntil([this] { return ended(); }, &gaveUpAt);
    }
  }
  const bool completed = c10d::Work::wait(timeout);  // the host part; throws its error
  // Where this thread's spin gave up and it blocked: how soon after that
  // the result came teaches the next caller's spin. (Not held across the
  // wait: a group shut down meanwhile stops its executor.)
  if (gaveUpAt != Clock::time_point{}) {
    if (std::shared_ptr<Executor> executor = executor_.lock()) {
      executor->learnFromBlockedWait(gaveUpAt, finished_);
    }
  }
  synchronize();
  probe::mark(ProbePoint::WaitReturned);
  return completed;
}

// The caller's current stream waits on the events the future recorded on
// the internal stream: the host does not wait for the GPU.
void WorkRing::synchronize() {
  if (stream_) deviceFuture_->wait();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkRing::getFuture() {
  expedite();
  return stream_ ? deviceFuture_ : hostFuture_.get(outputs_);
}

c10::intrusive_ptr<c10::ivalue::Future> WorkRing::getFutureResult() {
  expedite();
  return result_.get();
}

bool WorkRing::isCompleted() {
  if (ended()) return deviceFinished();
  if (stream_) return false;  // a CUDA work's host part is the worker's alone
  std::shared_ptr<Executor> executor = executor_.lock();
  if (executor == nullptr) return ended();
  // Once every peer is in a published-ahead collective, the poll runs it
  // here (it only reads their parts now); until then it stays queued, and
  // the worker takes it only after its grace (a poller that stops polling).
  if (executor->runIfReady() && ended()) return true;
  // A send or receive in flight: the poll moves it itself (a message that
  // came is seen now, not at the worker's next wake-up), and the first
  // poll wakes the worker too, for a caller that stops polling.
  if (executor->progressMessages() && ended()) return true;
  if (!polled_.exchange(true, std::memory_order_relaxed)) executor->expediteMessages();
  return ended();
}

bool WorkRing::deviceFinished() const {
  if (span_ && span_->end.was_marked_for_recording()) return span_->end.query();
  return !deviceDone_ || deviceDone_->query();  // none: a host work, or a failed one
}

void WorkRing::expedite() {
  // A future's wait never runs the task on its thread (as wait() does): a
  // task left for its caller (Runner::CallerWhenWaited) and messages left
  // in flight are the worker's now.
  if (stream_ || ended()) return;
  std::shared_ptr<Executor> executor = executor_.lock();
  if (executor == nullptr) return;
  // Every peer in a published-ahead collective, already or within a
  // moment: what is left only reads their parts, so it runs here, as a poll
  // does (isCompleted), and the future is complete when returned (a then()
  // hook then runs at once, on this thread), with no hand-off to the worker.
  if (executor->awaitReadyAndRun() && ended()) return;
  executor->expedite();
}

std::vector<at::Tensor> WorkRing::result() { return outputs_; }

float WorkRing::getDuration() const {
  const WorkName who{opType_, seq_, rank_};
  if (stream_) {
    // From the first part's start event for a coalesced block, as NCCL
    // spans a coalesced work from its first collective.
    const DeviceSpan* first = firstPart_ ? firstPart_->span_.get() : span_.get();
    return deviceMilliseconds(who, first ? &first->start : nullptr,
                              span_ ? &span_->end : nullptr, Untimed::TimingOff);
  }
  if (!timed_) refuseDuration(who, Untimed::TimingOff, false);
  return hostMilliseconds(who, startTime(), finished_, Untimed::NotYet);
}

void WorkRing::markSucceeded() {
  finished_ = std::chrono::steady_clock::now();
  std::optional<c10::StreamGuard> onInternalStream;
  if (stream_) {
    onInternalStream.emplace(*stream_);  // the future's events go there
    if (span_) {
      span_->end.record(*stream_);
    } else {
      deviceDone_.emplace(stream_->device_type());
      deviceDone_->record(*stream_);
    }
  }
  finish();
  if (stream_) {
    deviceFuture_->markCompleted(c10::IValue(outputs_));
  } else {
    hostFuture_.succeed(outputs_);
  }
  result_.settle(c10d::WorkResult::SUCCESS);
}

void WorkRing::release_resources() {
  outputs_.clear();
  deviceFuture_.reset();
  hostFuture_.release();
  span_.reset();
  firstPart_.reset();
}

void WorkRing::markFailed(std::exception_ptr error, c10d::WorkResult result) {
  finished_ = std::chrono::steady_clock::now();
  finish(error);
  if (stream_) {
    deviceFuture_->setError(error);
  } else {
    hostFuture_.fail(error);
  }
  result_.settle(result);
}

}  // namespace ringreduce
