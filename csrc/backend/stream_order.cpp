// One stream waits, on the device, for the work queued so far on another (stream_order.h)
#include "backend/stream_order.h"

#include <c10/core/Event.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <utility>

namespace ringreduce {

void streamWaitsFor(const c10::Stream& waiter, const c10::Stream& done) {
  if (waiter == done) return;
  TORCH_CHECK(waiter.device() == done.device(), "ringreduce: internal: a stream on ",
              waiter.device(), " cannot wait on a stream on ", done.device());
  // Never destroyed: an event destroyed at exit may outlive the CUDA
  // runtime's own teardown.
  static std::mutex* mutex = new std::mutex;
  static auto* events = new std::map<std::pair<int, int>, c10::Event>;
  const std::pair<int, int> device{static_cast<int>(done.device_type()), done.device_index()};
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = events->find(device);
  if (it == events->end()) it = events->emplace(device, c10::Event(done.device_type())).first;
  it->second.record(done);
  it->second.block(waiter);
}

}  // namespace ringreduce
