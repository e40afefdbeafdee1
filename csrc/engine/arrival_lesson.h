// When an asynchronous caller's peers did come, after its wait for them
// gave up (Engine::runOnCaller's arrival wait), for its next wait to learn.
//
// Why: that wait's budget (core/base/spin_budget.h) learns from its own
// spins alone, and each one that runs out halves it. Where the ranks come
// to a collective a few to a few tens of microseconds apart, call after
// call (2 ms of compute before each: the skew of the previous call's
// return carried into the next), the budget settles near the usual skew,
// and every call whose peer comes a little later is queued: a future
// waited for then costs the queued form's Work and hand-off, 15-40 us more
// than the call run here. The peers' announcements say when they did come
// (each rank stamps its announcement with the host's monotonic clock:
// HostChannel::peersAnnouncedAt), read once the queued form has run; where
// that is within the wait's ceiling of its start, a spin would have caught
// them, and the next wait covers twice that
// (SpinBudget::wokeAfter), as a future's wait learns from the worker
// (Executor::markGaveUp) and a host channel wait from its wake-up. Peers
// later than the ceiling (the eager functional collectives' 60-75 us of
// Python per call differ by more from rank to rank) teach nothing: the
// budget keeps falling there, as before. Nor do ranks on different clocks
// (containers in their own time namespaces: HostChannel::sharesClock),
// whose stamps the channel does not hand out.
//
// Two waits learn from it (teachArrivalWaits): the first, short one every
// asynchronous caller spins (Engine::kArrivalWait), and the longer one a
// caller whose peers wait for it goes on to (up to the worker's grace:
// Engine::aheadArrivalSpin_). Peers later than the first's ceiling teach
// the second: eager functional all-gathers of 1 MiB per rank (read in
// place), whose ranks drift 30-100 us apart call after call, had each been
// queued about half the time once the longer wait halved itself away
// (collective_anchors.py, world 2 on the 2-vCPU Xeon 6 VM, the rule on and
// off taking turns, three runs each: the slowest rank's p50 0.98-1.06x
// Open MPI's Iallgather reached through torch with it, 1.00-1.15x without;
// after compute 0.98-1.00x against 1.03-1.51x).
//
// One given-up collective at a time: the next one cannot run past the queue
// before the queued one has run (Engine::runOnCaller declines while the
// executor is busy). gaveUp and take on the caller that runs past the queue
// (one at a time), ran on whichever thread ran the queued form.
// No torch, no UCX.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "core/base/spin_budget.h"

namespace ringreduce {

class ArrivalLesson {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective `seq`'s arrival wait, begun at `waitStart`, gave up: the
  // collective is queued.
  void gaveUp(uint64_t seq, Clock::time_point waitStart);
  // Whether collective `seq` is the one given up, its lesson not yet told.
  bool awaits(uint64_t seq) const {
    return seq != 0 && seq_.load(std::memory_order_relaxed) == seq;
  }
  // Collective `seq`'s queued form ran; its peers were all in by
  // `peersCame` (the last one's announcement, or the body's end). Only the
  // collective last given up is learnt from, once.
  void ran(uint64_t seq, Clock::time_point peersCame);
  // How long after its wait's start the last given-up collective's peers
  // were in, at most; once per lesson, nothing if none came since.
  std::optional<std::chrono::nanoseconds> take();

 private:
  std::atomic<uint64_t> seq_{0};  // 0: no give-up waits for its lesson
  std::atomic<int64_t> waitStartNs_{0};
  std::atomic<int64_t> lateNs_{-1};  // -1: no lesson to take
};

// What a lesson (peers `late` after the wait's start) teaches the first
// arrival wait and the longer one after it: each a spin long enough again
// where the peers came within its ceiling (SpinBudget::wokeAfter); the
// longer one only where the first could not have caught them.
void teachArrivalWaits(std::chrono::nanoseconds late, SpinBudget& first, SpinBudget& longer);

}  // namespace ringreduce
