// How long a waiting loop spins before it blocks, learnt from how its own
// recent waits ended.
//
// A spin pays when the event comes while the thread still polls: it saves
// the sleep and the wake-up (50-200 us on a virtual machine whose idle cores
// halt). It costs when the cores are wanted by other processes (DataLoader
// workers, a neighbour's job, a compiler): the spinning thread holds a core
// the peer it waits for, or another process, needs; the scheduler then
// preempts it for whole time slices, and a small collective takes
// milliseconds. Whether the cores are free cannot be decided once at group
// creation (load comes and goes, and most of it is not ranks), so each
// waiting loop keeps a running account:
// - a wait satisfied while spinning: spinning paid; the budget grows back
//   (doubling) to the ceiling;
// - a sign that this thread was descheduled during its spin (two successive
//   clock reads of the spin further apart than kDescheduledGap: a preemption
//   or a sched_yield that returned late): this wait blocks now, and counts
//   as a spin that did not pay;
// - a spin that did not pay (it ran out, or was descheduled): the budget
//   halves, and below a sixteenth of the ceiling it is 0 (block at once):
//   under load, where nearly every spin is preempted, within five waits;
// - at 0, every probeInterval-th wait that must block first spins a probe
//   (an eighth of the ceiling): if the probe pays, spinning resumes at that
//   budget; if not, probes become rarer (up to one wait in kMaxProbeInterval).
// Blocking itself is the caller's (a sleep on the event that the peer's
// progress signals); this class only says when.
//
// Fixed (not adaptive, RINGREDUCE_SPIN_US / RINGREDUCE_WAIT_SPIN_US set
// explicitly): every wait spins the whole ceiling, as before this class.
//
// One instance per waiting loop, used by one thread at a time (the thread
// that drives it holds the lock that makes it the driver); not thread safe.
// No torch, no UCX; the clock is injectable for the tests.
#pragma once

#include <chrono>
#include <functional>

namespace ringreduce {

class SpinBudget {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;

  // Two clock reads of one spin further apart than this: the thread did not
  // run in between (a time slice of the kernel's scheduler is 0.75-3 ms; one
  // idle pass of a wait loop is a few microseconds). The default; a loop
  // that yields at every pass expects its peers' turns in between and sets
  // a longer one (setDescheduledGap).
  static constexpr std::chrono::microseconds kDescheduledGap{200};
  static constexpr int kMinProbeInterval = 8;
  static constexpr int kMaxProbeInterval = 64;

  explicit SpinBudget(std::chrono::microseconds ceiling = std::chrono::microseconds(0),
                      bool adaptive = true, Now now = nullptr);

  // The longest spin and whether the account adapts it. A lower ceiling
  // clamps the current budget; a higher one lets it grow back.
  void setLimits(std::chrono::microseconds ceiling, bool adaptive);
  void setDescheduledGap(std::chrono::microseconds gap) { gap_ = gap; }

  // One wait, from the loop's point of view:
  //   startWait(); loop { if (progress) moved(); else if (!keepSpinning()) block...; }
  //   finishWait() when the condition came true.
  // A wait is opened by startWait and closed by finishWait, abandon, or a
  // keepSpinning that returns false (the wait blocks; after the block the
  // loop opens a new wait for whatever spin follows). startWait on an open
  // wait abandons it first.
  void startWait();
  // A pass that brought something: the next idle pass's clock read starts a
  // new interval (the work done in between is no sign of descheduling).
  void moved();
  // An idle pass: true to poll again, false to block now (the outcome
  // "blocked" is recorded and the wait closed). `now`: the loop's own clock
  // read of this pass, if it has one.
  bool keepSpinning();
  bool keepSpinning(Clock::time_point now);
  // The condition came true: "satisfied while spinning" if this wait spun.
  void finishWait();
  // Closes the wait without learning from it (an error, a spin not allowed
  // for another reason).
  void abandon();

  bool waiting() const { return open_; }
  std::chrono::nanoseconds budget() const { return budget_; }
  std::chrono::nanoseconds ceiling() const { return ceiling_; }
  bool adaptive() const { return adaptive_; }

 private:
  void spinPaid();
  void blocked();
  std::chrono::nanoseconds probeBudget() const;
  std::chrono::nanoseconds floor() const { return ceiling_ / 16; }

  Now now_;
  std::chrono::nanoseconds ceiling_{0};
  bool adaptive_ = true;
  std::chrono::nanoseconds budget_{0};
  std::chrono::nanoseconds gap_ = kDescheduledGap;
  int probeInterval_ = kMinProbeInterval;
  int blockedAtOnce_ = 0;  // waits that blocked without spinning since the last probe

  // The open wait.
  bool open_ = false;
  bool probing_ = false;
  bool spun_ = false;
  bool hasLastRead_ = false;
  Clock::time_point spinUntil_{};
  Clock::time_point lastRead_{};
};

}  // namespace ringreduce
