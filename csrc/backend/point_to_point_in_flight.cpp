// The sends and receives a group has in flight, for shrink_group (point_to_point_in_flight.h)
#include "backend/point_to_point_in_flight.h"

#include <algorithm>

namespace ringreduce {

void PointToPointInFlight::add(const c10::intrusive_ptr<WorkRing>& work) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Completed ones go as new ones come, so the list stays as long as what
  // is in flight.
  works_.erase(std::remove_if(works_.begin(), works_.end(),
                              [](const c10::weak_intrusive_ptr<WorkRing>& w) {
                                const auto live = w.lock();
                                return !live || live->ended();
                              }),
               works_.end());
  works_.emplace_back(work);
}

void PointToPointInFlight::waitForAll() {
  std::vector<c10::intrusive_ptr<WorkRing>> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& w : works_) {
      if (auto work = w.lock()) live.push_back(std::move(work));
    }
  }
  for (const auto& work : live) {
    try {
      work->wait();
    } catch (const std::exception&) {
      // Failed: completed all the same.
    }
  }
}

}  // namespace ringreduce
