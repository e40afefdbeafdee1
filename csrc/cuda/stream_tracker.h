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
