// The streams a group's device work ran on, so that its shutdown can wait
// for that work with a deadline (never cudaDeviceSynchronize, which waits
// for everyone's work and, behind a wait a dead peer never satisfies,
// forever) before it closes the mappings the work may still use.
#pragma once

#include <chrono>
#include <set>

namespace ringreduce::cuda {

class StreamTracker {
 public:
  void note(void* stream) { streams_.insert(stream); }
  // True once every noted stream has finished what it was given before the
  // call; false when `limit` passed first.
  bool waitAll(std::chrono::milliseconds limit) const;

 private:
  std::set<void*> streams_;
};

}  // namespace ringreduce::cuda
