// Keeping a group's worker thread on the core of the thread that hands it
// collectives (RINGREDUCE_WORKER_FOLLOWS_CALLER).
//
// When this machine's ranks fill its cores (world 2 on two cores, one
// training thread per rank), a rank's worker has no core of its own. Left
// to the scheduler, it often runs beside the other rank's training thread:
// that rank's backward then slows by the worker's whole share, the ranks
// drift apart by tens of milliseconds a step, and the synchronising
// collective at the end of backward makes the faster rank wait. On its own
// caller's core, each rank's compute and communication add up on that
// rank, and the ranks stay level (benchmarks/RESULTS.md, "The worker
// beside its own rank").
#pragma once

#include <sched.h>

#include <atomic>

namespace ringreduce {

class CallerCore {
 public:
  explicit CallerCore(bool enabled) : enabled_(enabled) {}

  // The submitting thread: remember the CPU it runs on now.
  void noteCaller() {
    if (enabled_) callerCpu_.store(sched_getcpu(), std::memory_order_relaxed);
  }

  // The worker thread, before it runs a task: move onto the latest caller's
  // CPU if it is not there yet and the worker's own mask (the one it
  // started with) allows it. Returns the CPU it is bound to, or -1.
  int follow();

 private:
  const bool enabled_;
  std::atomic<int> callerCpu_{-1};
  // Worker thread only.
  bool started_ = false;
  cpu_set_t allowed_{};  // the worker's mask before the first move
  int boundCpu_ = -1;
};

}  // namespace ringreduce
