// Broadcast through the group's host channel (algorithms/host_channel/turn.h): in
// each turn the root copies a piece of the message into its buffer, every
// rank sets its flag (the receivers too: the buffer rule), and once all are
// up each receiver copies the piece out of the root's buffer. Pieces of a
// buffer, the same on every rank.
#pragma once

#include <cstddef>

#include "algorithms/chain_broadcast.h"
#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a broadcast of `bytes` goes through the channel: the same answer
// on every rank. Through its buffers in at most three turns
// (hostChannelCollectiveApplies, and at most three buffers), or beyond in
// the form the root chooses (large_broadcast.h).
bool hostChannelBroadcastApplies(const Comm& comm, size_t bytes);
// Whether it goes the second way: its first turn puts up where the ranks'
// tensors lie, so it may not be run to publish ahead.
bool hostChannelBroadcastIsLarge(const Comm& comm, size_t bytes);

// As chainBroadcast: the root's `bytes` at `data` land at every other
// rank's `data`.
void hostChannelBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

// The broadcast a host collective takes: three turns of the channel's
// buffers at most where they carry it, else the channel's large broadcast
// where it carries that, else the chain (the same choice on every rank).
void hostBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

}  // namespace ringreduce
