// Barrier through the group's host channel (barrier.h)
#include "algorithms/host_channel/barrier.h"

#include "algorithms/barrier.h"
#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool hostChannelBarrierApplies(const Comm& comm) {
  return hostChannelCollectiveApplies(comm, 0);
}

void hostChannelBarrier(const Comm& comm, const OpContext& op) {
  exchangeTurn(comm, op, 0, /*lastTurn=*/true, [](char*) {});
}

void hostBarrier(const Comm& comm, const OpContext& op) {
  if (comm.size() > 1 && hostChannelBarrierApplies(comm)) return hostChannelBarrier(comm, op);
  disseminationBarrier(comm, op);
}

}  // namespace ringreduce
