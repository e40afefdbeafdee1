// Barrier through the group's host channel (algorithms/host_channel/turn.h): one
// turn with nothing in the buffers; every rank sets its flag and waits for
// every peer's, which is what a barrier is.
#pragma once

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a barrier goes through the channel: the same answer on every
// rank (hostChannelCollectiveApplies, of no bytes).
bool hostChannelBarrierApplies(const Comm& comm);

void hostChannelBarrier(const Comm& comm, const OpContext& op);

// The barrier a host collective takes: the channel where it applies, else
// dissemination (algorithms/barrier.h); the same choice on every rank.
void hostBarrier(const Comm& comm, const OpContext& op);

}  // namespace ringreduce
