// The c10d::Work of one ringreduce collective. It completes on the group's
// executor thread; wait(), is_completed() and get_future() behave as with
// gloo (the future holds the output tensors, which DDP's reducer reads).
// For CUDA tensors they behave as with NCCL: the future carries the device
// and completes with events on the group's internal stream; wait() and
// synchronize() make the caller's current stream wait on them.
// get_duration() and get_future_result() as work_timing.h and
// work_result.h say.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "backend/device_call.h"
#include "backend/output_future.h"
#include "backend/work_result.h"
#include "backend/work_timing.h"
#include "engine/executor.h"

namespace ringreduce {

class WorkRing : public c10d::Work {
 public:
  // `executor`: the group's, so that wait() on a host work can run it on the
  // waiting thread instead of sleeping until the executor has. `timed`: the
  // group's timing was on when it was issued: only then has it a duration
  // (a CUDA work then records events around its device work), as with NCCL.
  WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
           const DeviceCall* device = nullptr, std::weak_ptr<Executor> executor = {},
           bool timed = false);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // is_completed(). A poll must return at once, so it runs only what cannot
  // wait on this rank's caller: a published-ahead collective
  // (Runner::CallerWhenWaited) whose peers are all in it, which it then
  // completes on its thread (Executor::runIfReady). The first poll that
  // finds the work still running hands an irecv's message in flight to the
  // worker (Executor::expediteMessages). Before, a polled async allreduce
  // with a late peer completed about 3 ms after the peer had (5 ms after
  // the call: the worker's grace), a polled irecv as late; gloo's allreduce
  // completes as the peer's does. A CUDA work is complete once the device
  // has run it (as NCCL's is), not once its host part enqueued it: its
  // output is on the internal stream, which the caller's stream has not
  // waited on yet.
  bool isCompleted() override;
  // Whether it has ended, without expediting it (wait()'s own checks, the
  // group's bookkeeping).
  bool ended() { return c10d::Work::isCompleted(); }
  // Milliseconds from the start of the work to its end (work_timing.h).
  float getDuration() const override;
  void synchronize() override;

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  std::vector<at::Tensor> result() override;
  uint64_t getSequencenumber() const override { return seq_; }
  // For a recv from any source: the rank the message came from.
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int rank) { sourceRank_ = rank; }

  // On the thread that runs it, as it starts running (not as it is queued):
  // the work begins. The first call counts (the engine may say so twice).
  void markStarted() {
    if (started_ == std::chrono::steady_clock::time_point{}) {
      started_ = std::chrono::steady_clock::now();
    }
  }
  // Executor thread, with the internal stream current, once it waited for
  // the caller's stream: the device work begins (its start event, if timed).
  void markDeviceStarted();
  // A coalescing block holds it until the block ends (engine/operation.h):
  // wait() on a host work then raises instead of waiting for good.
  void setHeldInBlock(bool held) { heldInBlock_.store(held, std::memory_order_release); }
  // A coalesced block's work: it began when its first part did.
  void startsWith(c10::intrusive_ptr<WorkRing> firstPart) { firstPart_ = std::move(firstPart); }
  std::chrono::steady_clock::time_point startTime() const {
    return firstPart_ ? firstPart_->startTime() : started_;
  }
  std::chrono::steady_clock::time_point endTime() const { return finished_; }
  c10d::OpType opType() const { return opType_; }

  // Called once, on the executor thread. `result`: what the failure means
  // for get_future_result() (work_result.h).
  void markSucceeded();
  void markFailed(std::exception_ptr error, c10d::WorkResult result);

  // intrusive_ptr calls this instead of the destructor when the last
  // handle goes while a weak one remains (the sends and receives in flight,
  // point_to_point_in_flight.h, keep one until the next send or receive
  // prunes them): the tensors go now, as gloo's do when its Work goes, not
  // at the next send or receive (a pipeline stage's activations).
  void release_resources() override;

 private:
  // get_future() and get_future_result(): see Executor::expedite.
  void expedite();
  // Once ended(): whether the device has passed the work's end (always,
  // for a host work or a failed one).
  bool deviceFinished() const;
  const uint64_t seq_;
  const bool timed_;
  int sourceRank_ = -1;
  std::vector<at::Tensor> outputs_;
  std::optional<c10::Stream> stream_;  // CUDA: the internal stream the work ran on
  std::weak_ptr<Executor> executor_;
  std::chrono::steady_clock::time_point started_{};
  std::chrono::steady_clock::time_point finished_{};
  // get_future(): a CUDA work's made with it (its completion records events
  // on the internal stream), a host work's when asked for.
  c10::intrusive_ptr<c10::ivalue::Future> deviceFuture_;
  OutputFuture hostFuture_;
  ResultFuture result_;
  // CUDA, while timed: events around the device work.
  std::shared_ptr<DeviceSpan> span_;
  // CUDA, untimed: recorded on the internal stream when the host part
  // succeeds; set before finish(), so read only once ended().
  std::optional<c10::Event> deviceDone_;
  c10::intrusive_ptr<WorkRing> firstPart_;  // a coalesced block's
  std::atomic<bool> heldInBlock_{false};
  std::atomic<bool> polled_{false};  // is_completed() has woken the worker for messages
};

}  // namespace ringreduce
