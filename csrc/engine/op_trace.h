// The group's flight recorder: the last N operations (RINGREDUCE_TRACE_BUFFER_SIZE,
// default 2000; 0 turns it off) with what they were, their state and their
// times, so that a hang or a failure can be explained after the fact: which
// rank is behind, which one called something else. Written as JSON, one file
// per rank, when the group fails with RINGREDUCE_TRACE_DIR set, or on
// demand; `python -m torch_ringreduce.trace DIR` reads every rank's file.
//
// Cost: one short mutex-protected write per state change; no allocation
// once the ring is full except the summary strings.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/op_context.h"

namespace ringreduce {

struct TraceEntry {
  enum class State { Queued, Started, Completed, Failed };
  uint64_t id = 0;           // position in the group's history (1-based)
  uint64_t seq = 0;          // collective (or point-to-point) sequence number
  bool pointToPoint = false;
  const char* name = "";     // op name: "allreduce"
  std::string summary;       // dtype, sizes, reduce op, root, peer
  State state = State::Queued;
  Clock::time_point queued{}, started{}, finished{};
  std::string error;         // Failed: why
};

const char* traceStateName(TraceEntry::State state);

class OpTrace {
 public:
  explicit OpTrace(size_t capacity) : entries_(capacity) {}

  bool enabled() const { return !entries_.empty(); }
  // Returns the entry's id (0 when disabled).
  uint64_t queued(uint64_t seq, bool pointToPoint, const char* name, std::string summary);
  void started(uint64_t id);
  void completed(uint64_t id);
  void failed(uint64_t id, const std::string& error);

  // Oldest first.
  std::vector<TraceEntry> snapshot() const;
  // {"rank": .., "world_size": .., "group": .., "reason": .., "entries": [...]}
  // Times are microseconds of CLOCK_MONOTONIC, comparable across the ranks of
  // one machine.
  std::string toJson(int rank, int size, const std::string& group,
                     const std::string& reason) const;

 private:
  TraceEntry* find(uint64_t id);  // null once overwritten; with mutex_ held

  mutable std::mutex mutex_;
  std::vector<TraceEntry> entries_;
  uint64_t next_ = 1;
};

// Writes `json` to DIR/ringreduce_trace_<group>_rank<rank>.json when
// RINGREDUCE_TRACE_DIR is set; returns the path, or "" (unset or failed).
std::string writeTraceFile(const std::string& group, int rank, const std::string& json);

}  // namespace ringreduce
