// Whether other work wants this machine's cores right now.
//
// Why: a rank that slept until its peer's flag came learns from how soon
// it woke whether a spin would have paid (SpinBudget::wokeAfter), which
// breaks the equilibrium of two ranks that each sleep until the other
// wakes. Where other processes want the cores, a peer that came soon after
// a sleep was late because it waited for a core, and the spin that the
// lesson brings back holds a core the peer needs: with 4-8 busy processes
// on the 2 cores, the preempted calls of a 4 KiB allreduce took 480-600 us
// at p50 with it and about 300 us without (UCX's waits, which never spin
// long: 340-540; benchmarks/RESULTS.md, "Busy cores"). Whether either
// rank was preempted tells the two apart badly (ranks that wake each other
// preempt each other too); how many tasks are runnable tells them apart.
//
// Linux: /proc/loadavg's count of runnable tasks (this thread among them)
// against the online cores. About 1.4 us a read, so only after a sleep.
#pragma once

namespace ringreduce {

class CpuContention {
 public:
  CpuContention();
  ~CpuContention();
  CpuContention(const CpuContention&) = delete;
  CpuContention& operator=(const CpuContention&) = delete;

  // More tasks runnable now than the machine has cores (and `spare` more:
  // a thread passing through the run queue is not other work). False where
  // it cannot tell (no /proc).
  bool contended(int spare = 0) const;

  // How heavily: 0 where not contended(spare), else the octave of runnable
  // tasks per core: 1 below 4 a core, 2 at 4-7, kTopLevel (3) at 8 and
  // more. For the large broadcast's choice (algorithms/host_channel/
  // large_broadcast.h): which form pays moves with how much of a core each
  // rank gets, not only with whether it gets a whole one.
  static constexpr int kTopLevel = 3;
  int level(int spare = 0) const;
  // The same from a runnable count and the online cores (-1 or 0: 0).
  static int levelOf(int runnable, int cores, int spare);

  // What contended() decides from: the runnable count in a /proc/loadavg
  // line ("0.50 0.40 0.30 3/250 12345" -> 3), or -1.
  static int runnableIn(const char* loadavgLine);

 private:
  int runnable() const;  // -1 where it cannot tell

  int fd_ = -1;
  int cores_ = 0;
};

}  // namespace ringreduce
