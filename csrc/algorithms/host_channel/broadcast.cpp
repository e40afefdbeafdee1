// Broadcast through the group's host channel (broadcast.h)
#include "algorithms/host_channel/broadcast.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/large_broadcast.h"
#include "algorithms/host_channel/turn.h"

namespace ringreduce {

namespace {

// Whether the broadcast goes through the channel's buffers whatever the
// load: at most three turns, in which the root waits for its receivers'
// copies once at most (its second turn ends once they are done with its
// first, whose buffer its third rewrites; its last turn owes its wait).
// More turns go as a large broadcast, whose root chooses the form
// (large_broadcast.h): with 8 busy processes on the 2 cores, 3 MiB read in
// place took 1.18x the time through the buffers in two sets of ten runs,
// 4 MiB 0.69-0.99x in three of four (1.29x in the fourth; busy_cores.py,
// medians of the runs' p50, EPYC Zen 4).
bool takesBuffersAlone(const Comm& comm, size_t bytes) {
  return hostChannelCollectiveApplies(comm, bytes) && bytes <= 3 * comm.channel->bufferBytes();
}

}  // namespace

bool hostChannelBroadcastApplies(const Comm& comm, size_t bytes) {
  return takesBuffersAlone(comm, bytes) || largeBroadcastCarries(comm, bytes);
}

bool hostChannelBroadcastIsLarge(const Comm& comm, size_t bytes) {
  return !takesBuffersAlone(comm, bytes) && largeBroadcastCarries(comm, bytes);
}

void hostChannelBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  HostChannel& channel = *comm.channel;
  const bool root = channel.rank() == args.root;
  const size_t perTurn = channel.bufferBytes();
  auto* data = static_cast<char*>(args.data);
  for (size_t first = 0; first < args.bytes; first += perTurn) {
    const size_t piece = std::min(perTurn, args.bytes - first);
    // The root reads nothing of the receivers: its last turn does not wait for them.
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, first + piece >= args.bytes,
        [&](char* mine) {
          if (root) channel.copyIn(mine, data + first, piece);
        },
        /*readsPeers=*/!root);
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    if (!root) std::memcpy(data + first, channel.buffer(args.root, turn), piece);
  }
}

void hostBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  if (comm.size() > 1 && takesBuffersAlone(comm, args.bytes)) {
    return hostChannelBroadcast(comm, op, args);
  }
  if (comm.size() > 1 && largeBroadcastCarries(comm, args.bytes)) {
    return largeBroadcast(comm, op, args);
  }
  chainBroadcast(comm, op, args);
}

}  // namespace ringreduce
