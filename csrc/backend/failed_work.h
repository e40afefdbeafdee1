// The Work of an asynchronous collective that ran from the caller's thread
// and failed (ProcessGroupRing::runOnHostChannel): as with a queued one, the
// caller learns it from wait(), get_future() or exception(), not from the
// call that issued it (Horovod's handles, for one, check their own records
// before they wait, and name a mismatch from them).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ringreduce {

class FailedWork : public c10d::Work {
 public:
  // `error`: what the call would have raised (torch's exception type).
  FailedWork(int rank, c10d::OpType opType, uint64_t seq, std::exception_ptr error);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  const uint64_t seq_;
};

}  // namespace ringreduce
