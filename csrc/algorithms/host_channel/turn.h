// What the collectives over the group's host channel (transport/host/
// host_channel.h) have in common: which of them go through it, and a turn
// of it. Each collective is one file (algorithms/host_channel/allreduce.h,
// algorithms/host_channel/allgather.h, algorithms/host_channel/reduce_scatter.h,
// algorithms/host_channel/broadcast.h, algorithms/host_channel/barrier.h,
// algorithms/host_channel/alltoall.h); each cuts its message into buffer-sized
// pieces, one turn each, the same cut on every rank.
//
// The channel's buffer rule binds them all: in every turn every rank
// publishes its flag and waits for every peer's, even a rank with nothing
// to give (a broadcast's receivers, a barrier), since a rank rewrites its
// buffer of one parity only once every peer has started the next turn,
// which the flags tell it.
#pragma once

#include <algorithm>
#include <cstddef>

#include "algorithms/comm.h"
#include "core/base/op_context.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

// Whether a collective that puts up to `bytes` into each rank's channel
// buffers (all its turns together) goes through the channel: there is one
// (every rank on this host, RINGREDUCE_SHM_BYTES not 0 anywhere), `bytes`
// fits kHostChannelMaxPieces buffers (beyond, cma and UCX move large
// messages without the extra copies), and no setting asks for another
// algorithm (RINGREDUCE_ALGORITHM other than auto or shm, or the
// payload-free benchmark mode). A function of what every rank holds alike,
// so every rank answers the same for the same collective. The allreduce
// has its own rule (hostChannelAllreduceApplies: its wire dtype too).
bool hostChannelCollectiveApplies(const Comm& comm, size_t bytes);
// The same but the size: a channel, and no setting that asks for another
// algorithm.
bool hostChannelSettingsAllow(const Comm& comm);

// Publishes this rank's `kind` flag for `turn` and waits for every peer's
// (HostChannel::awaitPeers, with the comm's spin budget and the transport
// it drives, if any).
void publishAndAwait(const Comm& comm, const OpContext& op, FlagKind kind,
                     const HostChannel::Turn& turn);
// The same in two halves, for work between them that needs no peer.
void publishFlag(const Comm& comm, const OpContext& op, FlagKind kind, const HostChannel::Turn& turn);
void awaitFlags(const Comm& comm, const OpContext& op, FlagKind kind, const HostChannel::Turn& turn);

// Waits for the peers as this rank's last turn without reading them left
// owed (exchangeTurn's readsPeers), before it writes its buffers again.
void payOwedWait(const Comm& comm, const OpContext& op);

// Throws an internal error: a body run to publish ahead went on to another
// turn after its first (its algorithm must return once op.stoppedAhead()).
[[noreturn]] void refuseTurnAfterPublishingAhead(const OpContext& op);

// One turn that uses `footprint` bytes of each buffer (HostChannel::takeTurn:
// the same on every rank): takes it, lets fill(mine) write this rank's bytes
// of it, publishes this rank's Input flag and waits for every peer's. The
// caller then reads the turn's bytes of each buffer (HostChannel::buffer(r, turn)).
// `meanwhile()` runs between the publishing and the wait: this rank's own
// share of the result, which needs no peer, while the peers still fill theirs.
//
// `lastTurn`: this rank publishes nothing more for the collective after
// this turn (false where that is not known yet).
//
// `published`, where given, is set to the turn once this rank's bytes are
// up, before the wait.
//
// `readsPeers` false: this rank reads nothing of its peers' buffers in this
// turn (a broadcast's root, a gather's other ranks). Its last turn then
// returns without waiting for them, as a sender that does not wait for its
// receivers: the wait is owed (HostChannel::oweWait) and paid before this
// rank's next turn writes its buffers (payOwedWait), where the buffer rule
// needs it. A late receiver then costs the sender nothing until the sender
// needs the receiver anyway.
//
// Run to publish ahead (OpContext::ahead), it returns once this rank's
// bytes are up, neither running meanwhile() nor waiting: the caller must
// then return at once (op.stoppedAhead()), reading no peer's buffer and
// writing no output. A collective's first turn may have been published
// ahead (by the same body with the same arguments, so the same bytes): it is
// adopted then, neither filled nor published again.
template <typename Fill, typename Meanwhile>
HostChannel::Turn exchangeTurn(const Comm& comm, const OpContext& op, size_t footprint,
                               bool lastTurn, const Fill& fill, const Meanwhile& meanwhile,
                               bool readsPeers = true, HostChannel::Turn* published = nullptr) {
  HostChannel& channel = *comm.channel;
  HostChannel::Turn turn;
  if (op.stoppedAhead()) refuseTurnAfterPublishingAhead(op);
  if (!channel.adoptPublishedAhead(op.seq, footprint, turn)) {
    if (channel.owesWait()) payOwedWait(comm, op);
    turn = channel.takeTurn(footprint);
    fill(channel.buffer(channel.rank(), turn));
    publishFlag(comm, op, FlagKind::Input, turn);
    if (op.publishOnly()) {
      channel.notePublishedAhead(op.seq, turn, footprint);
      *op.ahead = PublishedAhead{true, lastTurn};
      return turn;
    }
  }
  // For a caller whose peers may act on what it put up even if the wait
  // below fails (large_broadcast.h).
  if (published != nullptr) *published = turn;
  meanwhile();
  if (lastTurn && !readsPeers) {
    channel.oweWait(turn, op);
    return turn;
  }
  awaitFlags(comm, op, FlagKind::Input, turn);
  return turn;
}

template <typename Fill>
HostChannel::Turn exchangeTurn(const Comm& comm, const OpContext& op, size_t footprint,
                               bool lastTurn, const Fill& fill, bool readsPeers = true) {
  return exchangeTurn(comm, op, footprint, lastTurn, fill, [] {}, readsPeers);
}

// How many turns `bytes` take at `perTurn` (> 0) a turn; none for nothing.
inline size_t turnsFor(size_t bytes, size_t perTurn) { return (bytes + perTurn - 1) / perTurn; }

// Each rank's slot of a turn that gives every rank a slot: room for
// `wanted` bytes (rounded to a cache line, so the turn's footprint is no
// more than the message needs and the turns move round the buffer), at
// most an n-th of the buffer, a multiple of `elementBytes` (a divisor of
// 64), at least one element.
inline size_t slotBytesFor(size_t bufferBytes, size_t n, size_t wanted, size_t elementBytes) {
  const size_t most = bufferBytes / n / elementBytes * elementBytes;
  const size_t rounded = (wanted + HostChannel::kLineBytes - 1) / HostChannel::kLineBytes *
                         HostChannel::kLineBytes;
  return std::max(elementBytes, std::min(most, rounded));
}

}  // namespace ringreduce
