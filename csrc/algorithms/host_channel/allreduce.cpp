// Allreduce through the group's host channel (allreduce.h)
#include "algorithms/host_channel/allreduce.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/reduction.h"
#include "algorithms/host_channel/turn.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "core/plan/partition.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

bool hostChannelAllreduceApplies(const Comm& comm, size_t bytes) {
  if (!hostChannelCollectiveApplies(comm, bytes)) return false;
  // RINGREDUCE_ALGORITHM=shm: as asked, up to the pieces every collective may take.
  const size_t pieces = comm.config.allreduceAlgorithm == AllreduceAlgorithm::HostChannel
                            ? kHostChannelMaxPieces
                            : kHostChannelMaxAllreducePieces;
  return bytes <= comm.channel->bufferBytes() * pieces &&
         comm.config.hostWireDtype == WireDtype::None;
}

namespace {

// One piece of the message, at most a buffer: one turn of the channel.
void reducePiece(const Comm& comm, const OpContext& op, const ReductionArgs& args, char* data,
                 size_t count) {
  HostChannel& channel = *comm.channel;
  const int rank = channel.rank();
  const size_t esize = elementSize(args.type);
  const size_t bytes = count * esize;
  const HostChannel::Turn turn =
      exchangeTurn(comm, op, [&](char* mine) { channel.copyIn(mine, data, bytes); });
  char* mine = channel.buffer(rank, turn.parity);
  if (bytes < kTwoPhaseFromBytes) {
    PhaseScope reducing(op.phases, Phase::Reduce);
    reduceInRankOrder(channel, turn.parity, args, data, 0, bytes);
    return;
  }
  // Two phases: this rank's chunk of everyone's buffer, reduced into its
  // place in the output and back into this rank's buffer for the others.
  const int n = channel.size();
  const Range chunk = chunkOf(count, n, rank);
  {
    PhaseScope reducing(op.phases, Phase::Reduce);
    char* dst = data + chunk.offset * esize;
    reduceInRankOrder(channel, turn.parity, args, dst, chunk.offset * esize, chunk.count * esize);
    std::memcpy(mine + chunk.offset * esize, dst, chunk.count * esize);
  }
  publishAndAwait(comm, op, FlagKind::Reduced, turn);
  for (int r = 0; r < n; ++r) {
    if (r == rank) continue;
    const Range theirs = chunkOf(count, n, r);
    std::memcpy(data + theirs.offset * esize,
                channel.buffer(r, turn.parity) + theirs.offset * esize, theirs.count * esize);
  }
}

}  // namespace

void hostChannelAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  const size_t esize = elementSize(args.type);
  // Every rank cuts the message alike: the same turns in the same order.
  const size_t perPiece = std::max<size_t>(1, comm.channel->bufferBytes() / esize);
  char* data = static_cast<char*>(args.data);
  for (size_t first = 0; first < args.count; first += perPiece) {
    reducePiece(comm, op, args, data + first * esize, std::min(perPiece, args.count - first));
  }
}

}  // namespace ringreduce
