#include "engine/op_trace.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/observe/json_text.h"

namespace ringreduce {

namespace {

long long micros(Clock::time_point t) {
  if (t == Clock::time_point{}) return -1;
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace

const char* traceStateName(TraceEntry::State state) {
  switch (state) {
    case TraceEntry::State::Queued: return "queued";
    case TraceEntry::State::Started: return "started";
    case TraceEntry::State::Completed: return "completed";
    case TraceEntry::State::Failed: return "failed";
  }
  return "?";
}

uint64_t OpTrace::queued(uint64_t seq, bool pointToPoint, const char* name, std::string summary) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_++;
  TraceEntry& e = entries_[id % entries_.size()];
  e.id = id;
  e.seq = seq;
  e.pointToPoint = pointToPoint;
  e.name = name;
  e.summary = std::move(summary);
  e.state = TraceEntry::State::Queued;
  e.queued = Clock::now();
  e.started = e.finished = Clock::time_point{};
  e.error.clear();
  return id;
}

TraceEntry* OpTrace::find(uint64_t id) {
  if (id == 0 || entries_.empty()) return nullptr;
  TraceEntry& e = entries_[id % entries_.size()];
  return e.id == id ? &e : nullptr;
}

void OpTrace::started(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (TraceEntry* e = find(id)) {
    e->state = TraceEntry::State::Started;
    e->started = Clock::now();
  }
}

void OpTrace::completed(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (TraceEntry* e = find(id)) {
    e->state = TraceEntry::State::Completed;
    e->finished = Clock::now();
  }
}

void OpTrace::failed(uint64_t id, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (TraceEntry* e = find(id)) {
    e->state = TraceEntry::State::Failed;
    e->finished = Clock::now();
    e->error = error;
  }
}

std::vector<TraceEntry> OpTrace::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TraceEntry> out;
  const uint64_t first = next_ > entries_.size() ? next_ - entries_.size() : 1;
  for (uint64_t id = first; id < next_; ++id) out.push_back(entries_[id % entries_.size()]);
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
         << ", \"p2p\": " << (e.pointToPoint ? "true" : "false") << ", \"op\": " << jsonQuoted(e.name)
         << ", \"summary\": " << jsonQuoted(e.summary) << ", \"state\": \""
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
