// The timeline writer, RINGREDUCE_TIMELINE (timeline.h)
#include "core/observe/timeline.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "core/base/errors.h"
#include "core/observe/json_text.h"

namespace ringreduce {

namespace {

// Written after the events at every write, and stepped back over after it.
constexpr char kClosing[] = "\n]\n";
constexpr long kClosingLength = sizeof(kClosing) - 1;
// Collected events are written once they reach this size.
constexpr size_t kWriteThreshold = 1 << 20;

// Chrome trace times are microseconds; keep nanoseconds as three decimals.
struct Micros {
  long long whole, thousandths;
};
Micros micros(Clock::duration d) {
  const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return {ns / 1000, ns % 1000};
}

// Every timeline of the process. Never destroyed: groups made after the
// last one was destroyed continue the file, and a flush at process exit
// (std::atexit) must find it alive whatever the order of static destructors.
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Timeline>> timelines;
};
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

void flushAllAtExit() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [path, timeline] : r.timelines) timeline->flush();
}

std::string expandRank(std::string path, int rank) {
  const std::string key = "{rank}", value = std::to_string(rank);
  for (size_t at = path.find(key); at != std::string::npos; at = path.find(key, at + value.size())) {
    path.replace(at, key.size(), value);
  }
  return path;
}

}  // namespace

std::shared_ptr<Timeline> Timeline::forProcess(const std::string& pathTemplate, int rank) {
  const std::string path = expandRank(pathTemplate, rank);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.timelines.empty()) std::atexit(flushAllAtExit);
  auto found = r.timelines.find(path);
  if (found != r.timelines.end()) return found->second;
  auto timeline = std::make_shared<Timeline>(path, rank);  // may throw: nothing kept then
  r.timelines.emplace(path, timeline);
  return timeline;
}

Timeline::Timeline(const std::string& path, int rank) : path_(path), rank_(rank) {
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) {
    throw Error("ringreduce: RINGREDUCE_TIMELINE: cannot write '" + path_ +
                "': " + std::strerror(errno));
  }
  pending_ = "[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(rank_) +
             ",\"tid\":0,\"args\":{\"name\":\"rank " + std::to_string(rank_) + "\"}}";
  std::lock_guard<std::mutex> lock(mutex_);
  writeLocked();
}

Timeline::~Timeline() {
  std::lock_guard<std::mutex> lock(mutex_);
  writeLocked();
  std::fclose(file_);
}

int Timeline::takeRow(const std::string& group) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, isNew] = groups_.try_emplace(group);
  GroupRows& rows = it->second;
  if (isNew) rows.index = static_cast<int>(groups_.size()) - 1;
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    if (!rows.busy[i]) {
      rows.busy[i] = true;
      return rows.rows[i];
    }
  }
  // A new row, named for the viewer: "group 0", then "group 0 (2)" for the
  // operations queued behind a running one.
  const int row = nextRow_++;
  const size_t lane = rows.rows.size();
  rows.rows.push_back(row);
  rows.busy.push_back(true);
  const std::string name = "group " + group + (lane == 0 ? "" : " (" + std::to_string(lane + 1) + ")");
  const std::string meta =
      ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(rank_) +
      ",\"tid\":" + std::to_string(row) + ",\"args\":{\"name\":" + jsonQuoted(name) +
      "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(rank_) +
      ",\"tid\":" + std::to_string(row) + ",\"args\":{\"sort_index\":" +
      std::to_string(rows.index * 1000 + static_cast<int>(lane)) + "}}";
  append(meta.data(), meta.size());
  return row;
}

void Timeline::record(const TimelineOp& op, Clock::time_point end, const std::string& error) {
  // Formatted before taking the lock: ranks' executors need not wait on each other.
  std::string text;
  text.reserve(320 + 96 * op.phases.spans().size());
  char buffer[256];
  const auto span = [&](const char* category, const char* name, Clock::time_point begin,
                        Clock::time_point finish) {
    const Micros ts = micros(begin.time_since_epoch()), dur = micros(finish - begin);
    std::snprintf(buffer, sizeof(buffer),
                  ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,"
                  "\"ts\":%lld.%03lld,\"dur\":%lld.%03lld",
                  category, name, rank_, op.row, ts.whole, ts.thousandths, dur.whole,
                  dur.thousandths);
    text += buffer;
  };
  span("collective", op.name, op.queued, end);
  std::snprintf(buffer, sizeof(buffer),
                ",\"args\":{\"name\":\"%s\",\"seq\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"dtype\":",
                op.name, op.seq, op.bytes);
  text += buffer;
  text += jsonQuoted(op.dtype) + ",\"group\":" + jsonQuoted(op.group) + ",\"phase_us\":{";
  // Every phase's whole time, including spans too short or too many to draw.
  bool first = true;
  for (size_t p = 0; p < kPhaseCount; ++p) {
    const Micros total = micros(op.phases.total(static_cast<Phase>(p)));
    if (total.whole == 0 && total.thousandths == 0) continue;
    std::snprintf(buffer, sizeof(buffer), "%s\"%s\":%lld.%03lld", first ? "" : ",",
                  phaseName(static_cast<Phase>(p)), total.whole, total.thousandths);
    text += buffer;
    first = false;
  }
  text += "}";
  if (op.phases.dropped() > 0) text += ",\"spans_left_out\":" + std::to_string(op.phases.dropped());
  if (!error.empty()) text += ",\"error\":" + jsonQuoted(error);
  text += "}}";
  for (const PhaseSpan& s : op.phases.spans()) {
    span("phase", phaseName(s.phase), s.begin, s.end);
    text += "}";
  }

  std::lock_guard<std::mutex> lock(mutex_);
  append(text.data(), text.size());
  auto it = groups_.find(op.group);
  if (it == groups_.end()) return;
  GroupRows& rows = it->second;
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    if (rows.rows[i] == op.row) rows.busy[i] = false;
  }
}

void Timeline::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  writeLocked();
}

void Timeline::append(const char* text, size_t length) {
  pending_.append(text, length);
  if (pending_.size() >= kWriteThreshold) writeLocked();
}

void Timeline::writeLocked() {
  if (file_ == nullptr || pending_.empty()) return;
  // A failed write (a full disk) loses these events; the next write tries again.
  std::fwrite(pending_.data(), 1, pending_.size(), file_);
  std::fwrite(kClosing, 1, kClosingLength, file_);
  std::fflush(file_);
  std::fseek(file_, -kClosingLength, SEEK_CUR);
  pending_.clear();
}

}  // namespace ringreduce
