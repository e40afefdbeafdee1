// How long a waiting loop spins before it blocks (spin_budget.h)
#include "core/base/spin_budget.h"

#include <algorithm>

namespace ringreduce {

SpinBudget::SpinBudget(std::chrono::microseconds ceiling, bool adaptive, Now now) {
  setClock(std::move(now));
  setLimits(ceiling, adaptive);
  budget_ = ceiling_;  // a machine is taken to be quiet until its waits say otherwise
}

void SpinBudget::setClock(Now now) {
  now_ = now ? std::move(now) : Now([] { return Clock::now(); });
}

void SpinBudget::setLimits(std::chrono::microseconds ceiling, bool adaptive) {
  ceiling_ = std::max<std::chrono::nanoseconds>(ceiling, std::chrono::nanoseconds(0));
  adaptive_ = adaptive;
  // Until a wait has said otherwise the machine is taken to be quiet: a
  // budget made first and given its limits later (the transport's) starts
  // at its ceiling too, not at the 0 of its first limits.
  budget_ = adaptive_ && learnt_ ? std::min(budget_, ceiling_) : ceiling_;
}

std::chrono::nanoseconds SpinBudget::probeBudget() const {
  // Long enough to catch a peer that runs alongside (a small message's round
  // trip on one machine is 10-30 us), short enough that a failed probe under
  // load costs little.
  return std::max(ceiling_ / 8, std::min<std::chrono::nanoseconds>(ceiling_, kDescheduledGap / 4));
}

void SpinBudget::startWait() {
  open_ = true;
  spun_ = false;
  hasLastRead_ = false;
  probing_ = false;
  givenMinimum_ = false;
  auto window = budget_;
  if (adaptive_ && window.count() == 0 && ceiling_.count() > 0 &&
      blockedAtOnce_ >= probeInterval_) {
    probing_ = true;
    blockedAtOnce_ = 0;
    window = probeBudget();
  }
  // Only a wait that spins reads the clock; blocking at once costs nothing.
  spinUntil_ = window.count() > 0 ? now_() + window : Clock::time_point{};
}

void SpinBudget::startWait(std::chrono::nanoseconds atLeast) {
  startWait();
  const auto window = std::min(atLeast, ceiling_);
  if (window.count() <= 0 || !givesMinimum()) return;
  const Clock::time_point until = now_() + window;
  if (spinUntil_ != Clock::time_point{} && spinUntil_ >= until) return;
  spinUntil_ = until;
  givenMinimum_ = true;
  // A probe this would have been is spent by the minimum's spin.
  probing_ = false;
}

bool SpinBudget::judging() const { return open_ && adaptive_ && hasLastRead_; }

bool SpinBudget::gapBefore(Clock::time_point now) const {
  return judging() && now - lastRead_ > gap_;
}

void SpinBudget::moved() {
  // Only a spin that is being judged needs the clock.
  if (judging()) {
    moved(now_());
  } else {
    hasLastRead_ = false;
  }
}

void SpinBudget::moved(Clock::time_point passStart) {
  if (gapBefore(passStart)) {
    // Away before this pass looked: whatever it found came while the
    // thread did not run. The wait goes on (it has news to handle) but its
    // spin is over.
    blocked();
    return;
  }
  hasLastRead_ = false;  // the pass's own work follows: not judged
}

bool SpinBudget::keepSpinning() {
  if (open_ && spinUntil_ != Clock::time_point{}) return keepSpinning(now_());
  return keepSpinning(Clock::time_point{});
}

bool SpinBudget::keepSpinning(Clock::time_point now) {
  if (!open_) return false;
  if (spinUntil_ == Clock::time_point{}) {
    blocked();
    return false;
  }
  // Fixed spins run their whole length, as they did before this class.
  if (gapBefore(now)) {
    blocked();
    return false;
  }
  if (now >= spinUntil_) {
    // Ran its whole window while the thread ran: a minimum given for nothing.
    // (A spin descheduled is not counted: its thread did not hold the core.)
    if (givenMinimum_) ++minimumMisses_;
    blocked();
    return false;
  }
  lastRead_ = now;
  hasLastRead_ = true;
  spun_ = true;
  return true;
}

void SpinBudget::finishWait() {
  if (!open_) return;
  // The last interval ends here: a thread that was away while its event
  // came was descheduled, not rewarded for spinning.
  if (spun_ && judging() && gapBefore(now_())) {
    blocked();
    return;
  }
  if (spun_) spinPaid();
  open_ = false;
}

void SpinBudget::abandon() { open_ = false; }

void SpinBudget::wokeAfter(std::chrono::nanoseconds slept) {
  if (!adaptive_ || ceiling_.count() == 0) return;
  if (slept > ceiling_) return;
  // Twice the sleep, not just a probe: what usually ends it is the peer
  // waking from its own sleep, and the next wait meets the same wake-up
  // (150-250 us here). A budget shorter than that runs out against it,
  // halves, and both ranks keep sleeping in turn (a sixth of the calls of a
  // back-to-back broadcast did, at 200 us each).
  const auto covering = std::min(ceiling_, std::max(probeBudget(), 2 * slept));
  if (budget_ >= covering) return;
  learnt_ = true;
  probeInterval_ = kMinProbeInterval;
  blockedAtOnce_ = 0;
  budget_ = covering;
  minimumMisses_ = 0;
}

void SpinBudget::spinPaid() {
  if (!adaptive_) return;
  learnt_ = true;
  minimumMisses_ = 0;
  if (probing_) probeInterval_ = kMinProbeInterval;
  budget_ = std::min(ceiling_, std::max(budget_ * 2, probeBudget()));
}

void SpinBudget::blocked() {
  const bool spun = spinUntil_ != Clock::time_point{};
  open_ = false;
  if (!adaptive_) return;
  learnt_ = true;
  if (!spun) {
    ++blockedAtOnce_;
    return;
  }
  if (probing_) {
    // Still no use spinning: look again later, and less often.
    probeInterval_ = std::min(probeInterval_ * 2, kMaxProbeInterval);
    return;
  }
  // A spin that ran out, or that was descheduled (the cores are wanted
  // elsewhere; it stopped at once) did not pay. Halving, not dropping to 0
  // at the first preemption: on two cores with a little background load an
  // occasional preemption is the price of spins that mostly pay (0 there
  // cost up to 3-7x in small-message latency); under real load nearly every
  // spin is preempted, and a handful of waits take it to 0.
  budget_ = budget_ / 2;
  if (budget_ < floor()) budget_ = std::chrono::nanoseconds(0);
}

}  // namespace ringreduce
