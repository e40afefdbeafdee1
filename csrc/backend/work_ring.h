// The c10d::Work of one ringreduce collective. It completes on the group's
// executor thread; wait(), is_completed() and get_future() behave as with
// gloo (the future holds the output tensors, which DDP's reducer reads).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace ringreduce {

class WorkRing : public c10d::Work {
 public:
  WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;
  uint64_t getSequencenumber() const override { return seq_; }
  // For a recv from any source: the rank the message came from.
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int rank) { sourceRank_ = rank; }

  // Called once, on the executor thread.
  void markSucceeded();
  void markFailed(std::exception_ptr error);

 private:
  const uint64_t seq_;
  int sourceRank_ = -1;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringreduce
