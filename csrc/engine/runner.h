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
};

}  // namespace ringreduce
