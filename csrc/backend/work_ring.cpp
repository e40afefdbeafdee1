#include "backend/work_ring.h"

namespace ringreduce {

WorkRing::WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, opType),
      seq_(seq),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

c10::intrusive_ptr<c10::ivalue::Future> WorkRing::getFuture() { return future_; }

std::vector<at::Tensor> WorkRing::result() { return outputs_; }

void WorkRing::markSucceeded() {
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void WorkRing::markFailed(std::exception_ptr error) {
  finish(error);
  future_->setError(error);
}

}  // namespace ringreduce
