// When an asynchronous caller's peers did come (arrival_lesson.h)
#include "engine/arrival_lesson.h"

#include <algorithm>

namespace ringreduce {

namespace {
int64_t nanosecondsOf(ArrivalLesson::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

void ArrivalLesson::gaveUp(uint64_t seq, Clock::time_point waitStart) {
  waitStartNs_.store(nanosecondsOf(waitStart), std::memory_order_relaxed);
  seq_.store(seq, std::memory_order_release);  // publishes the start with it
}

void ArrivalLesson::ran(uint64_t seq, Clock::time_point peersCame) {
  if (!awaits(seq)) return;
  uint64_t expected = seq;
  if (!seq_.compare_exchange_strong(expected, 0, std::memory_order_acquire)) return;
  const int64_t late = nanosecondsOf(peersCame) - waitStartNs_.load(std::memory_order_relaxed);
  lateNs_.store(std::max<int64_t>(late, 0), std::memory_order_release);
}

std::optional<std::chrono::nanoseconds> ArrivalLesson::take() {
  const int64_t late = lateNs_.exchange(-1, std::memory_order_acquire);
  if (late < 0) return std::nullopt;
  return std::chrono::nanoseconds(late);
}

void teachArrivalWaits(std::chrono::nanoseconds late, SpinBudget& first, SpinBudget& longer) {
  first.wokeAfter(late);
  if (late > first.ceiling()) longer.wokeAfter(late);
}

}  // namespace ringreduce
