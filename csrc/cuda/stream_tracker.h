// The streams a group's device work ran on, so that its shutdown can wait
// for that work with a deadline (never cudaDeviceSynchronize, which waits
// for everyone's work and, behind a wait a dead peer never satisfies,
// forever) before it closes the mappings the work may still use.
#pragma once

#include <chrono>
#include <set>

namespace ringreduce::cuda {

// A mark after the work queued so far on a stream, and whether the device
// has passed it (a cudaEvent): how a host thread watches for work that is
// overdue without waiting for it. Any thread.
void* recordMark(int device, void* stream);
// Records a reached mark again, after the work queued so far on `stream`
// (of the mark's device): a mark reused per collective creates no event.
void recordMarkAgain(void* mark, void* stream);
bool markReached(void* mark);
void freeMark(void* mark);
// A mark that also keeps the device's time (a cudaEvent with timing): two of
// them on one stream, both reached, give the device time between them,
// whatever drove the work in between (kernels, or a host schedule whose
// work ends on the stream). Freed with freeMark.
void* recordTimingMark(int device, void* stream);
double secondsBetweenMarks(void* start, void* end);
// Calls `fn(arg)` once the work queued so far on `stream` is done, on a
// thread of the CUDA runtime (cudaLaunchHostFunc): how the device wakes a
// host thread that sleeps (cuda/stream_wake.h). `fn` must not call CUDA.
void callAfterQueuedWork(void* stream, void (*fn)(void*), void* arg);

class StreamTracker {
 public:
  // Per collective: the caller's stream is mostly the last one noted,
  // which costs no lookup.
  void note(void* stream) {
    if (stream == last_ && !streams_.empty()) return;
    last_ = stream;
    streams_.insert(stream);
  }
  // True once every noted stream (of `device`) has finished what it was
  // given before the call; false when `limit` passed first.
  bool waitAll(int device, std::chrono::milliseconds limit) const;

 private:
  std::set<void*> streams_;
  void* last_ = nullptr;
};

}  // namespace ringreduce::cuda
