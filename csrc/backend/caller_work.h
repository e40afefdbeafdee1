// The Work of a collective that ran from the caller's thread (the
// device-flags path, or a group of one): complete when it is returned.
// Unlike WorkRing it carries nothing per call but its output and the
// stream the collective was queued on: no device event (wait() on that
// same stream has nothing to wait for; from another stream it is one
// stream wait through a reused event) and no Future until get_future()
// asks for one (DDP's comm hooks do; a plain all_reduce does not).
// Any on-caller path makes one through ProcessGroupRing::finishOnCaller, with
// what its CallerTimer measured (work_timing.h): its duration is host time
// on the host (timed while the group's timing is on), CUDA events on the
// device; its get_future_result() is SUCCESS, since it exists only once
// the collective went through.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <optional>
#include <vector>

#include "backend/work_timing.h"

namespace ringreduce {

class CallerWork : public c10d::Work {
 public:
  // `queuedOn`: the CUDA stream the collective went on, or none (a host
  // collective, or one captured into a CUDA graph, whose order the graph
  // keeps).
  CallerWork(int rank, c10d::OpType opType, uint64_t seq, at::Tensor output,
             std::optional<c10::Stream> queuedOn, CallerTiming timing);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  std::exception_ptr exception() const override { return nullptr; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // The caller's current stream waits for the collective's stream.
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFutureResult() override;
  std::vector<at::Tensor> result() override { return {output_}; }
  uint64_t getSequencenumber() const override { return seq_; }
  float getDuration() const override;

 private:
  const uint64_t seq_;
  const at::Tensor output_;
  const std::optional<c10::Stream> queuedOn_;
  const CallerTiming timing_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // made by getFuture(), under mutex_
  c10::intrusive_ptr<c10::ivalue::Future> result_;  // made by getFutureResult(), under mutex_
};

}  // namespace ringreduce
