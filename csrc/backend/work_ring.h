// The c10d::Work of one ringreduce collective. It completes on the group's
// executor thread; wait(), is_completed() and get_future() behave as with
// gloo (the future holds the output tensors, which DDP's reducer reads).
// For CUDA tensors they behave as with NCCL: the future carries the device
// and completes with events on the group's internal stream; wait() and
// synchronize() make the caller's current stream wait on them.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <optional>
#include <vector>

#include "backend/device_call.h"
#include "engine/executor.h"

namespace ringreduce {

class WorkRing : public c10d::Work {
 public:
  // `executor`: the group's, so that wait() on a host work can run it on the
  // waiting thread instead of sleeping until the executor has.
  WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
           const DeviceCall* device = nullptr, std::weak_ptr<Executor> executor = {});

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // Milliseconds from the start of the work to its end (Work.get_duration()).
  float getDuration() const override;
  void synchronize() override;

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;
  uint64_t getSequencenumber() const override { return seq_; }
  // For a recv from any source: the rank the message came from.
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int rank) { sourceRank_ = rank; }

  // On the thread that runs it: the work begins.
  void markStarted() { started_ = std::chrono::steady_clock::now(); }
  std::chrono::steady_clock::time_point startTime() const { return started_; }
  std::chrono::steady_clock::time_point endTime() const { return finished_; }
  c10d::OpType opType() const { return opType_; }

  // Called once, on the executor thread.
  void markSucceeded();
  void markFailed(std::exception_ptr error);

 private:
  const uint64_t seq_;
  int sourceRank_ = -1;
  std::vector<at::Tensor> outputs_;
  std::optional<c10::Stream> stream_;  // CUDA: the internal stream the work ran on
  std::weak_ptr<Executor> executor_;
  std::chrono::steady_clock::time_point started_{};
  std::chrono::steady_clock::time_point finished_{};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringreduce
