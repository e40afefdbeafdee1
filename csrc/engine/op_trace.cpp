// The group's flight recorder (op_trace.h)
#include "engine/op_trace.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/observe/json_text.h"

namespace ringreduce {

namespace {

long long micros(Clock::time_point t) {
  if (t == Clock::time_point{}) return -1;
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// Makes `e` the entry `id`, keeping its strings' capacity (a full ring
// allocates nothing for an entry without text). False when a newer entry
// already took the slot (a writer that lapped this one): leave it.
bool claim(TraceEntry& e, uint64_t id, uint64_t seq, bool pointToPoint, const char* name,
           uint32_t fingerprint) {
  if (e.id > id) return false;
  e.id = id;
  e.seq = seq;
  e.pointToPoint = pointToPoint;
  e.onCaller = false;
  e.publishedAhead = false;
  e.fingerprint = fingerprint;
  e.name = name;
  e.summary.clear();
  e.fields.reset();
  e.state = TraceEntry::State::Queued;
  e.queued = e.started = e.finished = Clock::time_point{};
  e.error.clear();
  return true;
}

}  // namespace

// Held while one slot's entry is written or copied. The holder never
// blocks or allocates much, so a waiter only yields briefly.
class OpTrace::SlotLock {
 public:
  explicit SlotLock(Slot& slot) : slot_(slot) {
    while (slot_.writing.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~SlotLock() { slot_.writing.clear(std::memory_order_release); }
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;
  TraceEntry& entry() { return slot_.entry; }

 private:
  Slot& slot_;
};

std::string TraceEntry::describe() const {
  return fields ? ringreduce::describe(*fields) : summary;
}

const char* traceStateName(TraceEntry::State state) {
  switch (state) {
    case TraceEntry::State::Queued: return "queued";
    case TraceEntry::State::Started: return "started";
    case TraceEntry::State::Completed: return "completed";
    case TraceEntry::State::Failed: return "failed";
  }
  return "?";
}

OpTrace::OpTrace(size_t capacity)
    : capacity_(capacity), slots_(capacity == 0 ? nullptr : new Slot[capacity]) {}

uint64_t OpTrace::queued(uint64_t seq, bool pointToPoint, const char* name, std::string summary,
                         uint32_t fingerprint, bool publishedAhead) {
  if (!enabled()) return 0;
  const uint64_t id = next_.fetch_add(1);
  SlotLock lock(slotOf(id));
  TraceEntry& e = lock.entry();
  if (!claim(e, id, seq, pointToPoint, name, fingerprint)) return id;
  e.summary = std::move(summary);
  e.publishedAhead = publishedAhead;
  e.queued = Clock::now();
  return id;
}

uint64_t OpTrace::queued(uint64_t seq, bool pointToPoint, const char* name,
                         const OpFields& fields) {
  if (!enabled()) return 0;
  const uint64_t id = next_.fetch_add(1);
  SlotLock lock(slotOf(id));
  TraceEntry& e = lock.entry();
  if (!claim(e, id, seq, pointToPoint, name, 0)) return id;
  e.fields = fields;
  e.queued = Clock::now();
  return id;
}

void OpTrace::onCaller(uint64_t seq, const char* name, const OpFields& fields,
                       uint32_t fingerprint, Clock::time_point at, const char* error,
                       bool publishedAhead) {
  writeOnCaller(seq, name, &fields, nullptr, fingerprint, at, error, publishedAhead);
}

void OpTrace::onCaller(uint64_t seq, const char* name, const std::string& summary,
                       uint32_t fingerprint, Clock::time_point at, const char* error) {
  writeOnCaller(seq, name, nullptr, &summary, fingerprint, at, error);
}

void OpTrace::writeOnCaller(uint64_t seq, const char* name, const OpFields* fields,
                            const std::string* summary, uint32_t fingerprint,
                            Clock::time_point at, const char* error, bool publishedAhead) {
  if (!enabled()) return;
  const uint64_t id = next_.fetch_add(1);
  SlotLock lock(slotOf(id));
  TraceEntry& e = lock.entry();
  if (!claim(e, id, seq, false, name, fingerprint)) return;
  if (fields != nullptr) {
    e.fields = *fields;
  } else {
    e.summary = *summary;
  }
  e.onCaller = true;
  e.publishedAhead = publishedAhead;
  e.queued = e.started = e.finished = at;
  e.state = error == nullptr ? TraceEntry::State::Completed : TraceEntry::State::Failed;
  if (error != nullptr) e.error = error;
}

void OpTrace::started(uint64_t id) { mark(id, TraceEntry::State::Started, nullptr); }

void OpTrace::completed(uint64_t id) { mark(id, TraceEntry::State::Completed, nullptr); }

void OpTrace::failed(uint64_t id, const std::string& error) {
  mark(id, TraceEntry::State::Failed, &error);
}

void OpTrace::mark(uint64_t id, TraceEntry::State state, const std::string* error) {
  if (id == 0 || !enabled()) return;
  SlotLock lock(slotOf(id));
  TraceEntry& e = lock.entry();
  if (e.id != id) return;  // overwritten by a newer entry
  e.state = state;
  (state == TraceEntry::State::Started ? e.started : e.finished) = Clock::now();
  if (error != nullptr) e.error = *error;
}

std::vector<TraceEntry> OpTrace::snapshot() const {
  std::vector<TraceEntry> out;
  if (!enabled()) return out;
  const uint64_t next = next_.load();
  const uint64_t first = next > capacity_ ? next - capacity_ : 1;
  out.reserve(next - first);
  for (uint64_t id = first; id < next; ++id) {
    SlotLock lock(slotOf(id));
    // An id handed out but not written yet, or already overwritten.
    if (lock.entry().id != id) continue;
    out.push_back(lock.entry());
  }
  for (TraceEntry& e : out) {
    if (e.fields) e.summary = e.describe();  // rendered outside the slot's lock
  }
  return out;
}

std::string OpTrace::toJson(int rank, int size, const std::string& group,
                            const std::string& reason) const {
  std::ostringstream json;
  json << "{\"rank\": " << rank << ", \"world_size\": " << size << ", \"group\": "
       << jsonQuoted(group) << ", \"reason\": " << jsonQuoted(reason)
       << ", \"dumped_us\": " << micros(Clock::now()) << ", \"entries\": [";
  bool first = true;
  for (const TraceEntry& e : snapshot()) {
    json << (first ? "\n  " : ",\n  ") << "{\"id\": " << e.id << ", \"seq\": " << e.seq
         << ", \"p2p\": " << (e.pointToPoint ? "true" : "false")
         << ", \"direct\": " << (e.onCaller ? "true" : "false")
         << ", \"published_ahead\": " << (e.publishedAhead ? "true" : "false")
         << ", \"op\": " << jsonQuoted(e.name)
         << ", \"summary\": " << jsonQuoted(e.summary) << ", \"fingerprint\": " << e.fingerprint
         << ", \"state\": \""
         << traceStateName(e.state) << "\", \"queued_us\": " << micros(e.queued)
         << ", \"started_us\": " << micros(e.started) << ", \"finished_us\": "
         << micros(e.finished) << ", \"error\": " << jsonQuoted(e.error) << "}";
    first = false;
  }
  json << "\n]}\n";
  return json.str();
}

std::string writeTraceFile(const std::string& group, int rank, const std::string& json) {
  const char* dir = std::getenv("RINGREDUCE_TRACE_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  std::string safeGroup;
  for (char c : group) safeGroup += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  const std::string path =
      std::string(dir) + "/ringreduce_trace_" + safeGroup + "_rank" + std::to_string(rank) + ".json";
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return "";
  const bool ok = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  return (std::fclose(file) == 0 && ok) ? path : "";
}

}  // namespace ringreduce
