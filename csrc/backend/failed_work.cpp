// FailedWork: a completed Work that carries its collective's error.
#include "backend/failed_work.h"

#include "backend/output_future.h"

namespace ringreduce {

FailedWork::FailedWork(int rank, c10d::OpType opType, uint64_t seq, std::exception_ptr error)
    : c10d::Work(rank, opType), seq_(seq) {
  completed_ = true;  // no one can see it yet: no lock, no notify
  exception_ = std::move(error);
}

bool FailedWork::wait(std::chrono::milliseconds) {
  std::rethrow_exception(exception_);
}

c10::intrusive_ptr<c10::ivalue::Future> FailedWork::getFuture() {
  auto future = tensorListFuture();
  future->setError(exception_);
  return future;
}

}  // namespace ringreduce
