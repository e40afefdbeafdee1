// Moving a rank's waiting thread off the core it shares with the peer it
// waits for, while other processes keep the machine's cores busy
// (RINGREDUCE_SEPARATE_CORES=1; off by default: most small calls under load
// get 4-8x faster, the slow ones slower, and the mean per call came out
// alike or up to 1.3x higher with 8 busy processes on 2 cores,
// benchmarks/RESULTS.md, "Busy cores").
//
// Why: under load the scheduler often puts two ranks that wake each other
// on one core (a woken thread goes to its waker's core), and there they
// stay: every core has as many runnable tasks as the next, so nothing is
// moved. Each collective then costs the two ranks a context switch per
// wait, each behind the busy processes' time slices on that core: with 4
// busy processes on the 2 cores a 64 KiB allreduce took 480-550 us at p50
// where the ranks shared a core and 40-100 us where they did not, in the
// same processes (the UCX path alike). One move ends it: the thread's
// affinity is set to its mask without its current CPU, which moves it at
// once, and then back to the mask it had, so that nothing of the user's
// settings changes (os.sched_getaffinity reads the same before and after)
// and the scheduler is free to place it again.
//
// When: after kStreak waits in a row in which the awaited peer last ran on
// this thread's CPU, where other work wants the cores (a quiet machine
// gives a woken rank an idle core of its own), at most once per
// kMinInterval. Of two ranks only one moves (HostChannel: the higher), or
// both would move and meet again.
//
// Not where the thread may run on one CPU only (a mask of one, a cpuset):
// there is nowhere to go.
//
// One instance per waiting loop's thread; not thread safe. No torch, no
// UCX; the clock and the move are injectable for the tests.
#pragma once

#include <chrono>
#include <functional>

namespace ringreduce {

class CoreSeparation {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;
  // Moves this thread off its current CPU; true where it did.
  using Move = std::function<bool()>;

  static constexpr int kStreak = 8;
  static constexpr std::chrono::milliseconds kMinInterval{50};

  explicit CoreSeparation(bool enabled, Now now = nullptr, Move move = nullptr);

  // One wait of this thread for a peer (the ones it should move for):
  // whether that peer last ran on this thread's CPU. `contended` is asked
  // only when a move is due. True where this call moved the thread.
  bool noteWait(bool besidePeer, const std::function<bool()>& contended);

  bool enabled() const { return enabled_; }
  // How often it moved the thread.
  int moves() const { return moves_; }

 private:
  bool enabled_;
  Now now_;
  Move move_;
  int streak_ = 0;
  int moves_ = 0;
  bool moved_ = false;
  Clock::time_point lastMove_{};
};

// Sets this thread's affinity to its mask without the CPU it runs on, then
// back to the mask; false where the mask has no other CPU or the kernel
// refuses.
bool moveThreadOffItsCpu();

}  // namespace ringreduce
