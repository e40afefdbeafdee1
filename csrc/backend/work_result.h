// Work.get_future_result(): a Future of torch's WorkResult (its value as an
// int, as ProcessGroupNCCL gives it), completed when the work ends: SUCCESS,
// TIMEOUT when the work ran past its deadline, COMM_ERROR for any other
// failure (a peer that died or left, a mismatched collective, a group that
// had already failed or was aborted). Made only when asked for, so a Work
// nobody asks costs nothing more.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <mutex>
#include <optional>

namespace ringreduce {

// What a failure means for the result: TIMEOUT for the library's
// TimeoutError, COMM_ERROR for the rest.
c10d::WorkResult workResultOf(std::exception_ptr error);

// A completed result future.
c10::intrusive_ptr<c10::ivalue::Future> completedResult(c10d::WorkResult result);

class ResultFuture {
 public:
  // Any thread: the future, made on the first call (completed at once if the
  // work has already ended).
  c10::intrusive_ptr<c10::ivalue::Future> get();
  // Once, when the work ends (its callbacks run on this thread).
  void settle(c10d::WorkResult result);

 private:
  std::mutex mutex_;
  std::optional<c10d::WorkResult> result_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringreduce
