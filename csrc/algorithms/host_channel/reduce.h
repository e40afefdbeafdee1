// Reduce to a root through the group's host channel (algorithms/host_channel/turn.h):
// in each turn every rank copies a piece of its input into its buffer, and
// once every peer's flag is up the root reduces every rank's piece, in rank
// order (algorithms/host_channel/reduction.h), into its own. Pieces of a buffer, the
// same on every rank. One sequence number, where the queued forms take two.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a reduce of `bytes` goes through the channel: the same answer on
// every rank (hostChannelCollectiveApplies).
bool hostChannelReduceApplies(const Comm& comm, size_t bytes);

// On `root`, args.data ends with the reduction over all ranks, in rank
// order; elsewhere it is only read. Supported op and dtype only
// (reductionSupported).
void hostChannelReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int root);

}  // namespace ringreduce
