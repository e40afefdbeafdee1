// The sends and receives a group has issued that have not completed, for
// shrink_group's SHRINK_DEFAULT: like NCCL's, it lets the group's
// outstanding work finish first, and a posted send or receive waits for its
// peer outside the executor's queue (Executor::addPoller), where waiting
// for the queue does not see it.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <mutex>
#include <vector>

#include "backend/work_ring.h"

namespace ringreduce {

class PointToPointInFlight {
 public:
  // Caller's thread, as a send or receive is issued.
  void add(const c10::intrusive_ptr<WorkRing>& work);
  // Returns once every one added so far has completed, either way (each
  // is bounded by its own timeout; its error is its owner's to see).
  void waitForAll();

 private:
  std::mutex mutex_;
  // Weak: the operation holds its Work until it completes.
  std::vector<c10::weak_intrusive_ptr<WorkRing>> works_;
};

}  // namespace ringreduce
