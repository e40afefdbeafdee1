// Work.get_future() of a queued host collective: a Future of its output
// tensors, made only when asked for (DDP's comm hooks ask at once; an
// `async_op=True` caller that only waits, FSDP and the functional
// collectives never do), completed at once where the work has already
// ended. A Future made and completed for every queued collective cost its
// allocation, its type and a list of the outputs each time, on the caller's
// thread and then on the one that completed it. (A CUDA work's future is
// made with the work: its completion records events on the internal stream.)
#pragma once

#include <ATen/core/ivalue.h>

#include <exception>
#include <mutex>
#include <vector>

namespace ringreduce {

class OutputFuture {
 public:
  // Any thread: the future, made on the first call.
  c10::intrusive_ptr<c10::ivalue::Future> get(const std::vector<at::Tensor>& outputs);
  // Once, as the work ends (the future's callbacks, if it has one, run here).
  void succeed(const std::vector<at::Tensor>& outputs);
  void fail(std::exception_ptr error);
  // Its work's last handle went (WorkRing::release_resources): the future
  // goes, with the outputs it holds; a caller that took it keeps its own.
  void release();

 private:
  // Completes `future` as the work ended.
  void complete(c10::ivalue::Future& future, const std::vector<at::Tensor>& outputs) const;

  std::mutex mutex_;
  bool ended_ = false;
  std::exception_ptr error_;  // how it ended, once ended_, if it failed
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A pending future of a list of tensors on `devices` (none: the CPU).
c10::intrusive_ptr<c10::ivalue::Future> tensorListFuture(std::vector<c10::Device> devices = {});

}  // namespace ringreduce
