// Moving a waiting thread off the core it shares with its peer
// (core_separation.h)
#include "core/base/core_separation.h"

#include <sched.h>

namespace ringreduce {

CoreSeparation::CoreSeparation(bool enabled, Now now, Move move)
    : enabled_(enabled),
      now_(now ? std::move(now) : Now([] { return Clock::now(); })),
      move_(move ? std::move(move) : Move(moveThreadOffItsCpu)) {}

bool CoreSeparation::noteWait(bool besidePeer, const std::function<bool()>& contended) {
  if (!enabled_) return false;
  if (!besidePeer) {
    streak_ = 0;
    return false;
  }
  if (++streak_ < kStreak) return false;
  streak_ = 0;
  const Clock::time_point now = now_();
  if (moved_ && now - lastMove_ < kMinInterval) return false;
  if (!contended()) return false;
  // Counted as tried either way: a thread that cannot move (one CPU left
  // to it) is not asked again before the interval.
  moved_ = true;
  lastMove_ = now;
  if (!move_()) return false;
  ++moves_;
  return true;
}

bool moveThreadOffItsCpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  const int here = sched_getcpu();
  if (here < 0 || !CPU_ISSET(here, &allowed) || CPU_COUNT(&allowed) < 2) return false;
  cpu_set_t elsewhere = allowed;
  CPU_CLR(here, &elsewhere);
  // The kernel moves a running thread off a CPU its new mask leaves out
  // before the call returns; the mask it had goes back at once.
  if (sched_setaffinity(0, sizeof(elsewhere), &elsewhere) != 0) return false;
  // Only a cpuset changed meanwhile could refuse the mask back; a second
  // try then, since a thread left on fewer CPUs than its user gave it
  // would be worse than one left beside its peer.
  if (sched_setaffinity(0, sizeof(allowed), &allowed) != 0) {
    sched_setaffinity(0, sizeof(allowed), &allowed);
  }
  return true;
}

}  // namespace ringreduce
