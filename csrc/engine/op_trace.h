// The group's flight recorder: the last N operations (RINGREDUCE_TRACE_BUFFER_SIZE,
// default 2000; 0 turns it off) with what they were, their state and their
// times, so that a hang or a failure can be explained after the fact: which
// rank is behind, which one called something else. Written as JSON, one file
// per rank, when the group fails with RINGREDUCE_TRACE_DIR set, or on
// demand; `python -m torch_ringreduce.trace DIR` reads every rank's file.
//
// Cost: a queued operation makes one short write per state change and
// carries its summary string. An on-caller one (Engine::runOnCaller, the hot path)
// makes a single write once it was launched, with its plain fields
// (engine/op_fields.h) and one time: no allocation, no clock read of its own.
// Each write locks only its own slot of the ring (a flag, uncontended unless
// a dump reads that very slot), so no lock is shared between the caller's
// thread and the executor's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/op_context.h"
#include "engine/op_fields.h"

namespace ringreduce {

struct TraceEntry {
  enum class State { Queued, Started, Completed, Failed };
  uint64_t id = 0;           // position in the group's history (1-based)
  uint64_t seq = 0;          // collective (or point-to-point) sequence number
  bool pointToPoint = false;
  bool onCaller = false;     // run on the caller's thread (Engine::runOnCaller)
  // This rank's first turn went up on the host channel before its peers
  // came (Engine::publishBeforeQueueing). Queued: where that was its last,
  // its peers need nothing more of it to finish their side, only this
  // rank's own reading of theirs. On the caller (onCaller too): it had
  // more turns, and its peers came while its caller still waited for them.
  bool publishedAhead = false;
  // A collective's fingerprintWord, alike on every rank that calls the same
  // collective, whichever way each ran it and on whichever device: what the
  // trace reader compares across ranks. 0: none (send/recv).
  uint32_t fingerprint = 0;
  const char* name = "";     // op name: "allreduce"
  std::string summary;       // dtype, sizes, reduce op, root, peer; unless `fields`
  std::optional<OpFields> fields;  // an on-caller op's or a send's, rendered only when read
  State state = State::Queued;
  Clock::time_point queued{}, started{}, finished{};
  std::string error;         // Failed: why

  // The summary as text, whichever way it was recorded.
  std::string describe() const;
};

const char* traceStateName(TraceEntry::State state);

class OpTrace {
 public:
  explicit OpTrace(size_t capacity);

  bool enabled() const { return capacity_ != 0; }
  // Returns the entry's id (0 when disabled).
  uint64_t queued(uint64_t seq, bool pointToPoint, const char* name, std::string summary,
                  uint32_t fingerprint = 0, bool publishedAhead = false);
  // The same with plain fields (a send or receive), rendered only when read.
  uint64_t queued(uint64_t seq, bool pointToPoint, const char* name, const OpFields& fields);
  void started(uint64_t id);
  void completed(uint64_t id);
  void failed(uint64_t id, const std::string& error);

  // An on-caller collective, recorded once it was launched: completed at `at`
  // (queued, started and finished alike), or failed with `error` if not
  // null. The second form is for callers that still describe it as text.
  // `publishedAhead`: its first turn went up before its peers came
  // (TraceEntry::publishedAhead), and they came while its caller waited.
  void onCaller(uint64_t seq, const char* name, const OpFields& fields, uint32_t fingerprint,
                Clock::time_point at, const char* error = nullptr, bool publishedAhead = false);
  void onCaller(uint64_t seq, const char* name, const std::string& summary, uint32_t fingerprint,
                Clock::time_point at, const char* error = nullptr);

  // Oldest first; each entry's `summary` holds its text (describe()).
  std::vector<TraceEntry> snapshot() const;
  // {"rank": .., "world_size": .., "group": .., "reason": .., "entries": [...]}
  // Times are microseconds of CLOCK_MONOTONIC, comparable across the ranks of
  // one machine.
  std::string toJson(int rank, int size, const std::string& group,
                     const std::string& reason) const;

 private:
  struct Slot {
    std::atomic_flag writing = ATOMIC_FLAG_INIT;  // held while the entry is written or read
    TraceEntry entry;
  };
  class SlotLock;
  Slot& slotOf(uint64_t id) const { return slots_[id % capacity_]; }
  // A queued entry's state change (`error`: Failed's reason, else null).
  void mark(uint64_t id, TraceEntry::State state, const std::string* error);
  // Both onCaller() forms: exactly one of `fields` and `summary` is set.
  void writeOnCaller(uint64_t seq, const char* name, const OpFields* fields,
                     const std::string* summary, uint32_t fingerprint, Clock::time_point at,
                     const char* error, bool publishedAhead = false);

  const size_t capacity_;
  const std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_{1};
};

// Writes `json` to DIR/ringreduce_trace_<group>_rank<rank>.json when
// RINGREDUCE_TRACE_DIR is set; returns the path, or "" (unset or failed).
std::string writeTraceFile(const std::string& group, int rank, const std::string& json);

}  // namespace ringreduce
