// Where one small collective's time goes: marks at the boundaries of its
// phases, taken on whichever thread passes them, read back by
// benchmarks/small_path_breakdown.py (torch_ringreduce._C._probe_take).
//
// Off unless RINGREDUCE_PROBE=1 was set when the process made its first
// group: a mark then costs one load and one branch. On, a mark is a clock
// read and a store into the thread's own buffer (no lock, no allocation
// after the thread's first mark), so the probe changes what it measures by
// tens of nanoseconds per mark.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/name_table.h"

namespace ringreduce {

enum class ProbePoint : uint8_t {
  BackendEntered,  // ProcessGroupRing's op entered: torch dispatched the call to us
  Checked,         // its arguments checked
  Queued,          // numbered and queued: its Work, Future and callbacks made
  WaitEntered,     // Work::wait() entered: back out through torch and Python, and in again
  Claimed,         // a thread took it from the executor's queue
  BodyStarted,     // its set-up done (stage-in, the neighbour check posted)
  Posted,          // a send or receive posted to the transport
  Arrived,         // a wait of the transport's found its message complete
  Reduced,         // a host reduction loop finished
  BodyFinished,    // the algorithm returned
  Completed,       // its Work completed (callbacks, Future, trace)
  WaitReturned,    // Work::wait() returns to torch
  OnCallerStarted,  // runOnCaller numbered it past the queue
  Published,       // its input copied into the host channel, its flag set
  PeersHere,       // every peer's flag seen
  OnCallerFinished, // runOnCaller returns: its Work is made next
};

template <>
struct NameTable<ProbePoint> {
  static constexpr NamedValue<ProbePoint> entries[] = {
      {ProbePoint::BackendEntered, "backend entered"},
      {ProbePoint::Checked, "checked"},
      {ProbePoint::Queued, "queued"},
      {ProbePoint::WaitEntered, "wait entered"},
      {ProbePoint::Claimed, "claimed"},
      {ProbePoint::BodyStarted, "body started"},
      {ProbePoint::Posted, "posted"},
      {ProbePoint::Arrived, "arrived"},
      {ProbePoint::Reduced, "reduced"},
      {ProbePoint::BodyFinished, "body finished"},
      {ProbePoint::Completed, "completed"},
      {ProbePoint::WaitReturned, "wait returned"},
      {ProbePoint::OnCallerStarted, "direct started"},
      {ProbePoint::Published, "published"},
      {ProbePoint::PeersHere, "peers here"},
      {ProbePoint::OnCallerFinished, "direct finished"},
  };
};

namespace probe {

// Reads RINGREDUCE_PROBE once (the first group's constructor calls it).
void configureFromEnvironment();
bool enabled();
void record(ProbePoint point);

inline void mark(ProbePoint point) {
  if (enabled()) record(point);
}

struct Event {
  uint64_t thread = 0;  // which thread marked it (an index, in order of first mark)
  ProbePoint point = ProbePoint::BackendEntered;
  int64_t nanoseconds = 0;  // CLOCK_MONOTONIC, as Python's time.perf_counter_ns
};
// Every thread's marks since the last take, and forgets them.
std::vector<Event> take();

}  // namespace probe
}  // namespace ringreduce
