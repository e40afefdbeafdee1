// The timeline (RINGREDUCE_TIMELINE=PATH): every collective of this process
// as a Chrome trace event with its phases nested inside (phase_recorder.h),
// for Perfetto or chrome://tracing; `python -m torch_ringreduce.timeline
// merge` puts the ranks' files side by side.
//
// One file per process, not per group: the path names the process ({rank}
// is its global rank), its groups share the file, each on rows of its own,
// and a group made after destroy_process_group() continues it. Events
// collect in memory and reach the file when 1 MiB has collected, when a
// group shuts down (destroy_process_group, interpreter exit) and at process
// exit. Each write ends the JSON array, then steps back over the bracket so
// the next write continues the array: the file is complete JSON after every
// write, and a process that dies between writes leaves its events up to the
// last one.
//
// Rows: Chrome trace slices on one row must nest, but a queued operation's
// span begins while the operation before it runs. An operation takes the
// first of its group's rows that is free when it is queued, so the spans of
// one row never overlap (operations of a group run, and finish, in order).
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/observe/phase_recorder.h"

namespace ringreduce {

// One collective as the timeline shows it.
struct TimelineOp {
  const char* name = "collective";
  uint64_t seq = 0;
  std::string group;
  std::string dtype;
  uint64_t bytes = 0;
  int row = 0;  // Timeline::takeRow
  Clock::time_point queued{};
  PhaseRecorder phases;
};

class Timeline {
 public:
  // This process's timeline for `pathTemplate`, with every "{rank}" replaced
  // by `rank`: created (the file truncated) on the first call, the same one
  // after. Throws Error when the file cannot be written.
  static std::shared_ptr<Timeline> forProcess(const std::string& pathTemplate, int rank);

  // Opens (truncates) `path` and writes the "rank N" process name. Throws Error.
  Timeline(const std::string& path, int rank);
  ~Timeline();  // writes what is left
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  const std::string& path() const { return path_; }

  // Caller's thread, as the operation is queued: the row (trace thread id)
  // it will be drawn on, held until record().
  int takeRow(const std::string& group);
  // The operation's event, from queued to `end`, and its phases; frees its
  // row. `error`: why it failed, or empty.
  void record(const TimelineOp& op, Clock::time_point end, const std::string& error = "");
  // Writes the events collected so far to the file.
  void flush();

 private:
  struct GroupRows {
    int index = 0;             // order the groups appeared in: sorts the rows
    std::vector<int> rows;     // trace thread ids
    std::vector<bool> busy;
  };
  void append(const char* text, size_t length);  // with mutex_ held
  void writeLocked();                           // with mutex_ held

  const std::string path_;
  const int rank_;
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::string pending_;  // events not yet written, each after ",\n"
  std::map<std::string, GroupRows> groups_;
  int nextRow_ = 1;
};

}  // namespace ringreduce
