// What a c10d call asks of a collective besides its tensors: its timeout, and
// whether the caller blocks on the Work right away (torch's async_op=False).
//
// A caller that blocks runs the queued collective on its own thread
// (engine/executor.h), so the executor need not arm the worker's grace
// wake-up for it: two timerfd_settime calls fewer per synchronous
// collective, about a tenth of a small one's time on the caller.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <type_traits>

namespace ringreduce {

struct CallOptions {
  // Not explicit: a bare timeout is a call whose caller may not wait.
  CallOptions(std::chrono::milliseconds t) : timeout(t) {}  // NOLINT(google-explicit-constructor)
  CallOptions(std::chrono::milliseconds t, bool waits) : timeout(t), callerWaits(waits) {}

  std::chrono::milliseconds timeout;
  bool callerWaits = false;
};

namespace detail {
template <typename Opts, typename = void>
struct HasAsyncOp : std::false_type {};
template <typename Opts>
struct HasAsyncOp<Opts, std::void_t<decltype(std::declval<const Opts&>().asyncOp)>>
    : std::true_type {};
}  // namespace detail

// torch sets asyncOp = async_op and, when it is false, calls wait() on the
// returned Work at once. A torch without the field says nothing: the caller
// may not wait, so the worker's wake-up stays armed.
template <typename Opts>
CallOptions callOptions(const Opts& opts) {
  if constexpr (detail::HasAsyncOp<Opts>::value) return {opts.timeout, !opts.asyncOp};
  return {opts.timeout};
}

}  // namespace ringreduce
