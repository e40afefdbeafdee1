// Giving the core away while a rank polls for its peers, RINGREDUCE_SPIN_YIELD (core_yield.h)
#include "core/base/core_yield.h"

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace ringreduce {

namespace {
using Clock = std::chrono::steady_clock;

// Process-wide: every group's waits share the cores.
std::atomic<int64_t> pausedUntilNs{0};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool yieldingPays() { return nowNs() >= pausedUntilNs.load(std::memory_order_relaxed); }

void yieldCore() {
  const int64_t before = nowNs();
  sched_yield();
  const int64_t after = nowNs();
  if (after - before > std::chrono::nanoseconds(kLongYield).count()) {
    pausedUntilNs.store(after + std::chrono::nanoseconds(kYieldBackoff).count(),
                        std::memory_order_relaxed);
  }
}

}  // namespace ringreduce
