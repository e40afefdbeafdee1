// Where one small collective's time goes (latency_probe.h)
#include "core/observe/latency_probe.h"

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace ringreduce::probe {

namespace {

std::atomic<bool> gEnabled{false};

// A thread's marks: appended by that thread only, read under the registry's
// lock after a release of the count.
struct ThreadMarks {
  static constexpr size_t kCapacity = 1 << 16;  // a full buffer drops marks, never grows
  uint64_t thread = 0;
  std::atomic<size_t> count{0};
  Event events[kCapacity];
};

std::mutex registryMutex;
std::vector<std::shared_ptr<ThreadMarks>>& registry() {
  static auto* threads = new std::vector<std::shared_ptr<ThreadMarks>>();  // outlives every thread
  return *threads;
}

ThreadMarks& mine() {
  thread_local std::shared_ptr<ThreadMarks> marks = [] {
    auto made = std::make_shared<ThreadMarks>();
    std::lock_guard<std::mutex> lock(registryMutex);
    made->thread = registry().size();
    registry().push_back(made);
    return made;
  }();
  return *marks;
}

int64_t monotonicNanoseconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

}  // namespace

void configureFromEnvironment() {
  const char* value = std::getenv("RINGREDUCE_PROBE");
  if (value != nullptr && std::strcmp(value, "1") == 0) gEnabled.store(true);
}

bool enabled() { return gEnabled.load(std::memory_order_relaxed); }

void record(ProbePoint point) {
  ThreadMarks& marks = mine();
  const size_t at = marks.count.load(std::memory_order_relaxed);
  if (at >= ThreadMarks::kCapacity) return;
  marks.events[at] = Event{marks.thread, point, monotonicNanoseconds()};
  marks.count.store(at + 1, std::memory_order_release);
}

std::vector<Event> take() {
  std::vector<Event> all;
  std::lock_guard<std::mutex> lock(registryMutex);
  for (const auto& marks : registry()) {
    const size_t count = marks->count.load(std::memory_order_acquire);
    all.insert(all.end(), marks->events, marks->events + count);
    // Only while its thread is not marking (the benchmark takes between calls).
    marks->count.store(0, std::memory_order_release);
  }
  return all;
}

}  // namespace ringreduce::probe
