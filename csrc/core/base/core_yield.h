// Giving the core away while a rank polls for its peers (RINGREDUCE_SPIN_YIELD).
//
// With more ranks than cores, a rank that yields lets the peer it waits for
// run, and is back as soon as that peer blocks or yields in turn: tens of
// microseconds. But the kernel's scheduler (EEVDF) treats a yield as giving
// up the rest of the time slice, so when an unrelated process is runnable on
// the core (a build, a data loader) one yield can cost that process's whole
// slice, milliseconds (measured: 4 B allreduces at world 4 went from ~0.1 ms
// to 1-5 ms per op under a load average of 8). So a yield that took longer
// than kLongYield turns yielding off for the whole process for kYieldBackoff:
// waits then sleep at once, as they do without yielding.
#pragma once

#include <chrono>

namespace ringreduce {

constexpr auto kLongYield = std::chrono::microseconds(1000);
constexpr auto kYieldBackoff = std::chrono::seconds(1);

// Whether waits may yield now (no long yield within the last kYieldBackoff).
bool yieldingPays();
// sched_yield(), noting a long one.
void yieldCore();

}  // namespace ringreduce
