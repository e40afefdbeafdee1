// Work.get_future_result(): a Future of torch's WorkResult (work_result.h)
#include "backend/work_result.h"

#include "core/base/errors.h"

namespace ringreduce {

namespace {
c10::IValue valueOf(c10d::WorkResult result) {
  return c10::IValue(static_cast<int64_t>(result));
}
c10::intrusive_ptr<c10::ivalue::Future> pendingResult() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get());
}
}  // namespace

c10d::WorkResult workResultOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError&) {
    return c10d::WorkResult::TIMEOUT;
  } catch (...) {
    return c10d::WorkResult::COMM_ERROR;
  }
}

c10::intrusive_ptr<c10::ivalue::Future> completedResult(c10d::WorkResult result) {
  auto future = pendingResult();
  future->markCompleted(valueOf(result));
  return future;
}

c10::intrusive_ptr<c10::ivalue::Future> ResultFuture::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!future_) future_ = result_ ? completedResult(*result_) : pendingResult();
  return future_;
}

void ResultFuture::settle(c10d::WorkResult result) {
  c10::intrusive_ptr<c10::ivalue::Future> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = result;
    waiting = future_;
  }
  // Outside the lock: the future's callbacks run here.
  if (waiting) waiting->markCompleted(valueOf(result));
}

}  // namespace ringreduce
