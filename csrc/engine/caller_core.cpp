// Keeping a group's worker thread on its caller's core (caller_core.h)
#include "engine/caller_core.h"

namespace ringreduce {

int CallerCore::follow() {
  if (!enabled_) return -1;
  if (!started_) {
    started_ = true;
    if (sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0) CPU_ZERO(&allowed_);
  }
  const int cpu = callerCpu_.load(std::memory_order_relaxed);
  if (cpu < 0 || cpu == boundCpu_) return boundCpu_;
  if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_)) {
    // A caller bound outside the worker's mask (a user's own binding): the
    // worker keeps the mask it was given.
    if (boundCpu_ >= 0 && sched_setaffinity(0, sizeof(allowed_), &allowed_) == 0) boundCpu_ = -1;
    return boundCpu_;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof(one), &one) == 0) boundCpu_ = cpu;
  return boundCpu_;
}

}  // namespace ringreduce
