// barrier (through the host channel where it applies, else dissemination,
// log2(n) rounds) and monitored_barrier (rank 0
// names every rank that did not arrive).
#include "algorithms/host_channel/barrier.h"
#include "algorithms/monitored_barrier.h"
#include "backend/process_group_ring.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::barrier(const c10d::BarrierOptions& opts) {
  if (auto work =
          copiesAlone(c10d::OpType::BARRIER, "barrier", opts.timeout, {}, {}, CheckedArgs{})) {
    return work;
  }
  if (auto done = barrierOnHostChannel(callOptions(opts))) return *done;
  return enqueue(nullptr, c10d::OpType::BARRIER, "barrier", callOptions(opts), {}, "",
                 [this](const OpContext& ctx) { hostBarrier(comm(), ctx); }, CheckedArgs{}, 1,
                 !channelSynchronizes());
}

void ProcessGroupRing::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  // It waits for its own work below.
  const CallOptions waited(opts.timeout, /*waits=*/true);
  auto work = enqueue(nullptr, c10d::OpType::BARRIER, "monitored_barrier", waited, {}, "",
                      [this, waitAllRanks](const OpContext& ctx) {
                        ringreduce::monitoredBarrier(comm(), ctx, waitAllRanks);
                      });
  work->wait();
}

}  // namespace ringreduce
