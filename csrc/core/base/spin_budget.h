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
// - a sign that this thread was descheduled during its spin (below: a
//   preemption, or a sched_yield that returned late): this wait blocks at
//   its next idle pass, and counts as a spin that did not pay, even when
//   the event arrived while the thread was away and the loop finds it
//   when it runs again (a preempted spin never counts as paid);
// - a spin that did not pay (it ran out, or was descheduled): the budget
//   halves, and below a sixteenth of the ceiling it is 0 (block at once):
//   under load, where nearly every spin is preempted, within five waits;
// - at 0, every probeInterval-th wait that must block first spins a probe
//   (an eighth of the ceiling): if the probe pays, spinning resumes at that
//   budget; if not, probes become rarer (up to one wait in kMaxProbeInterval).
//
// Descheduled, precisely: the budget judges the intervals between the clock
// reads of one spin, and one longer than the gap (kDescheduledGap, or
// setDescheduledGap's) means the thread did not run in between. The reads
// are each idle pass's (keepSpinning), the start of each pass that brought
// something (moved(passStart), the loop's read before it looked; moved()
// reads the clock then), and the end of a wait that spun (finishWait). The
// interval from a moved(passStart) to the next read holds that pass's own
// work (a large message copied, a reduction enqueued) and is not judged:
// work is no sign of descheduling. Every other interval is, also the one
// that ends the wait. What escapes: a preemption between a pass's own read
// and the moment its poll found the event (the start of one pass). The
// first read of a wait starts the account: what the loop did between
// startWait and it (setting the wait up) is not judged either.
//
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
  static constexpr int kMinimumMissesToRest = 4;

  explicit SpinBudget(std::chrono::microseconds ceiling = std::chrono::microseconds(0),
                      bool adaptive = true, Now now = nullptr);

  // The longest spin and whether the account adapts it. A lower ceiling
  // clamps the current budget; a higher one lets it grow back. Before any
  // wait was learnt from, the budget is the (new) ceiling.
  void setLimits(std::chrono::microseconds ceiling, bool adaptive);
  void setDescheduledGap(std::chrono::microseconds gap) { gap_ = gap; }

  // One wait, from the loop's point of view:
  //   startWait();
  //   loop { t = now(); if (poll brought something) moved(t);
  //          else if (!keepSpinning(t)) block...; }
  //   finishWait() when the condition came true.
  // A wait is opened by startWait and closed by finishWait, abandon, a
  // keepSpinning that returns false (the wait blocks; after the block the
  // loop opens a new wait for whatever spin follows), or a moved that found
  // the spin descheduled (recorded; the wait's next keepSpinning returns
  // false). startWait on an open wait abandons it first.
  void startWait();
  // A wait that spins at least `atLeast` (at most the ceiling), even where
  // the budget has fallen to 0: for a loop that knows a sleep costs more
  // than usual (host_channel.h: a peer on another core under load). How it
  // ends teaches the budget as any spin's does: paid, it grows back. The
  // minimum is given while it pays: after kMinimumMissesToRest of them in a
  // row ran out (a peer late by milliseconds, computing: each cost a whole
  // window of CPU and saved nothing), it rests, and the wait is startWait()'s
  // until a spin pays again (a probe's, on the usual schedule) or a sleep
  // shows one would have (wokeAfter).
  void startWait(std::chrono::nanoseconds atLeast);
  // A pass that brought something, and which started (the loop read the
  // clock before it polled) at `passStart`: the interval up to passStart is
  // judged; the pass's own work after it is not. moved(): a pass whose work
  // was short, judged up to now (reads the clock only while a judged spin
  // is open).
  void moved();
  void moved(Clock::time_point passStart);
  // An idle pass: true to poll again, false to block now (the outcome
  // "blocked" is recorded and the wait closed). `now`: the loop's own clock
  // read of this pass (from now()), if it has one.
  bool keepSpinning();
  bool keepSpinning(Clock::time_point now);
  // The condition came true: "satisfied while spinning" if this wait spun
  // and its last interval (from the last read to now) was no gap; a gap
  // there (the thread was away while the event came) counts as
  // descheduled. Reads the clock only for a wait that spun (adaptive).
  void finishWait();
  // Closes the wait without learning from it (an error, a spin not allowed
  // for another reason).
  void abandon();
  // After a block: the loop slept `slept` and woke to its event. Where that
  // took no longer than the ceiling, the event came within a full spin of
  // the wait's start, and a spin would have caught it and saved the
  // wake-up: the budget becomes at least twice the sleep (at least the
  // probe's, at most the ceiling), long enough to outlast the peer's own
  // wake-up the next time. Without this, two threads that wait for each other
  // can stay blocked for good once both budgets are 0: each one's event
  // comes only after the other's wake-up (150-250 us on the 2-core VMs
  // here), too late for the probes, which then grow rarer (a small
  // collective cost a wake-up every call on a quiet machine: 70 us instead
  // of 4). Under load a wake-up often outlasts the ceiling (the woken
  // thread waits for a time slice), and the host channel does not call this
  // where more tasks are runnable than there are cores
  // (core/base/cpu_contention.h: the peer was late waiting for a core, and
  // a long spin would hold one it needs); where a raised budget still
  // meets load, the next spin that runs out or is preempted halves it.
  void wokeAfter(std::chrono::nanoseconds slept);

  // The budget's clock (the steady clock, or a test's): a loop reads its
  // passes' times here, so that they and the budget's own reads agree.
  Clock::time_point now() const { return now_(); }
  // For tests that drive a product's waiting loop on a controlled clock;
  // before the loop runs (not thread safe).
  void setClock(Now now);

  bool waiting() const { return open_; }
  std::chrono::nanoseconds budget() const { return budget_; }
  std::chrono::nanoseconds ceiling() const { return ceiling_; }
  bool adaptive() const { return adaptive_; }
  // startWait(atLeast) gives its minimum (it has not run out
  // kMinimumMissesToRest times in a row since a spin last paid).
  bool givesMinimum() const { return minimumMisses_ < kMinimumMissesToRest; }
  // A probe's spin: long enough to catch a peer that runs alongside.
  std::chrono::nanoseconds probeBudget() const;

 private:
  void spinPaid();
  void blocked();
  // An adaptive spin is open and its last read starts a judged interval.
  bool judging() const;
  // Whether the interval from that read to `now` was a gap.
  bool gapBefore(Clock::time_point now) const;
  std::chrono::nanoseconds floor() const { return ceiling_ / 16; }

  Now now_;
  std::chrono::nanoseconds ceiling_{0};
  bool adaptive_ = true;
  std::chrono::nanoseconds budget_{0};
  std::chrono::nanoseconds gap_ = kDescheduledGap;
  int probeInterval_ = kMinProbeInterval;
  int blockedAtOnce_ = 0;  // waits that blocked without spinning since the last probe
  bool learnt_ = false;    // a wait's outcome has changed the account
  int minimumMisses_ = 0;  // minimum spins in a row that did not pay

  // The open wait.
  bool open_ = false;
  bool probing_ = false;
  bool givenMinimum_ = false;  // the window is startWait(atLeast)'s, beyond the budget's
  bool spun_ = false;
  bool hasLastRead_ = false;  // lastRead_ starts a judged interval
  Clock::time_point spinUntil_{};
  Clock::time_point lastRead_{};
};

}  // namespace ringreduce
