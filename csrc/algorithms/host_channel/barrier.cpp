#include "algorithms/host_channel/barrier.h"

#include "algorithms/barrier.h"
#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool sharedMemoryBarrierApplies(const Comm& comm) {
  return sharedMemoryCollectiveApplies(comm, 0);
}

void sharedMemoryBarrier(const Comm& comm, const OpContext& op) {
  exchangeTurn(comm, op, [](char*) {});
}

void hostBarrier(const Comm& comm, const OpContext& op) {
  if (comm.size() > 1 && sharedMemoryBarrierApplies(comm)) return sharedMemoryBarrier(comm, op);
  disseminationBarrier(comm, op);
}

}  // namespace ringreduce
