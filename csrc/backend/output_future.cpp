// Work.get_future() of a queued host collective, made when asked for (output_future.h)
#include "backend/output_future.h"

namespace ringreduce {

c10::intrusive_ptr<c10::ivalue::Future> tensorListFuture(std::vector<c10::Device> devices) {
  // torch's one List[Tensor] type, made once, not a new type per future.
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), std::move(devices));
}

c10::intrusive_ptr<c10::ivalue::Future> OutputFuture::get(const std::vector<at::Tensor>& outputs) {
  c10::intrusive_ptr<c10::ivalue::Future> made;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_) return future_;
    future_ = tensorListFuture();
    if (!ended_) return future_;  // succeed() or fail() completes it
    made = future_;
  }
  // Ended before anyone asked: completed here, outside the lock as in
  // succeed() (another thread that got it meanwhile may have added a
  // callback, which runs here).
  complete(*made, outputs);
  return made;
}

void OutputFuture::succeed(const std::vector<at::Tensor>& outputs) {
  c10::intrusive_ptr<c10::ivalue::Future> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    waiting = future_;
  }
  if (waiting) waiting->markCompleted(c10::IValue(outputs));
}

void OutputFuture::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  future_.reset();
}

void OutputFuture::fail(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    error_ = error;
    waiting = future_;
  }
  if (waiting) waiting->setError(std::move(error));
}

void OutputFuture::complete(c10::ivalue::Future& future,
                            const std::vector<at::Tensor>& outputs) const {
  if (error_) {
    future.setError(error_);
  } else {
    future.markCompleted(c10::IValue(outputs));
  }
}

}  // namespace ringreduce
