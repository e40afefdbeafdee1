// What the host channel's collectives share: their rule and their turn (turn.h)
#include "algorithms/host_channel/turn.h"

#include "algorithms/host_channel/allreduce.h"
#include "core/base/errors.h"
#include "core/observe/latency_probe.h"
#include "core/observe/phase_recorder.h"

namespace ringreduce {

bool hostChannelSettingsAllow(const Comm& comm) {
  const AllreduceAlgorithm forced = comm.config.allreduceAlgorithm;
  return comm.channel != nullptr &&
         (forced == AllreduceAlgorithm::Auto || forced == AllreduceAlgorithm::HostChannel) &&
         !comm.config.payloadFree;
}

bool hostChannelCollectiveApplies(const Comm& comm, size_t bytes) {
  return hostChannelSettingsAllow(comm) &&
         bytes <= comm.channel->bufferBytes() * kHostChannelMaxPieces;
}

void publishFlag(const Comm& comm, const OpContext& op, FlagKind kind, const HostChannel::Turn& turn) {
  comm.channel->publish(kind, turn, op);
  probe::mark(ProbePoint::Published);
}

void awaitFlags(const Comm& comm, const OpContext& op, FlagKind kind, const HostChannel::Turn& turn) {
  // A body run to publish ahead stops at its first turn (exchangeTurn),
  // before any wait: a caller that waited here would wait for a peer that
  // may first wait for this rank elsewhere.
  if (op.publishOnly()) {
    throw Error("ringreduce: internal error: " + op.describe() +
                " waits on the host channel in a run that only publishes ahead");
  }
  {
    PhaseScope waiting(op.phases, Phase::WaitPeers);
    comm.channel->awaitPeers(kind, turn, op, comm.spinBudget(), comm.drivenTransport());
  }
  probe::mark(ProbePoint::PeersHere);
}

void payOwedWait(const Comm& comm, const OpContext& op) {
  PhaseScope waiting(op.phases, Phase::WaitPeers);
  comm.channel->payOwedWait(op, comm.spinBudget(), comm.drivenTransport());
}

void refuseTurnAfterPublishingAhead(const OpContext& op) {
  throw Error("ringreduce: internal error: " + op.describe() +
              " takes another turn after publishing its first ahead");
}

void publishAndAwait(const Comm& comm, const OpContext& op, FlagKind kind,
                     const HostChannel::Turn& turn) {
  publishFlag(comm, op, kind, turn);
  awaitFlags(comm, op, kind, turn);
}

}  // namespace ringreduce
