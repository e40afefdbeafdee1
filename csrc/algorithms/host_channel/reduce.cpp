// Reduce to a root through the group's host channel (reduce.h)
#include "algorithms/host_channel/reduce.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/reduction.h"
#include "algorithms/host_channel/turn.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"

namespace ringreduce {

bool hostChannelReduceApplies(const Comm& comm, size_t bytes) {
  return hostChannelCollectiveApplies(comm, bytes);
}

void hostChannelReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int root) {
  HostChannel& channel = *comm.channel;
  const size_t esize = elementSize(args.type);
  const size_t perTurn = std::max<size_t>(1, channel.bufferBytes() / esize) * esize;
  const size_t bytes = args.count * esize;
  auto* data = static_cast<char*>(args.data);
  // Only the root reads the buffers, and its own values it reads in place
  // (reduceInRankOrder keeps each slice aside before rank 0's values
  // overwrite it): the root publishes an empty turn, a copy of the whole
  // message saved.
  const bool fillOwn = channel.rank() != root;
  for (size_t first = 0; first < bytes; first += perTurn) {
    const size_t piece = std::min(perTurn, bytes - first);
    // Only the root reads: the others' last turn does not wait for it.
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, first + piece >= bytes,
        [&](char* mine) {
          if (fillOwn) channel.copyIn(mine, data + first, piece);
        },
        /*readsPeers=*/!fillOwn);
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    if (channel.rank() != root) continue;
    PhaseScope reducing(op.phases, Phase::Reduce);
    reduceInRankOrder(channel, turn, args, data + first, 0, piece, data + first);
  }
}

}  // namespace ringreduce
