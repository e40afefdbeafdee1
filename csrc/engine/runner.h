#pragma once

namespace ringreduce {

// Who is expected to run a submitted task; it decides when a sleeping
// worker wakes for it.
enum class Runner {
  // The caller may wait for it soon (an asynchronous host collective): the
  // worker starts it after the grace period unless a caller claims it.
  CallerOrWorker,
  // The caller calls helpUntil for it at once (a synchronous collective):
  // no wake-up is armed, saving two timerfd_settime calls per collective
  // (each reprograms a timer: on a virtual machine, an exit to the
  // hypervisor; together 13 us of a 19 us collective on one rank). A caller
  // that never waits after all delays its task until the worker's next tick
  // (at most a second).
  Caller,
  // No caller will run it (a CUDA collective, whose wait() never runs the
  // host part): the worker wakes at once, without the grace period.
  Worker,
  // An asynchronous host collective whose peers wait for nothing of it: this
  // rank's part of it is on the host channel already (Engine::runOnCaller's
  // publish-ahead), and what is left, reading the peers' parts, is its own.
  // Its caller's wait() runs it; the worker only once a task queued behind
  // it is due, once its future is asked for (Executor::expedite: a future's
  // wait never runs tasks), or after Executor's kUnwaitedGrace. Waking the
  // worker at the usual grace instead took a core from both ranks' Python
  // for a wait that paid nothing (the eager functional collectives).
  CallerWhenWaited,
};

}  // namespace ringreduce
