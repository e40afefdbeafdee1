// The arithmetic of every collective that reduces over the group's host
// channel (the allreduce, reduce-scatter and reduce): each rank adds up the
// ranks' buffers in rank order, the same expression on every rank, so every
// rank holds the same bits whichever rank computes a result.
#pragma once

#include <cstddef>

#include "algorithms/ring_allreduce.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

// dst[0, bytes) = buffer_0 (op) buffer_1 (op) ... (op) buffer_{n-1}, each
// over [firstByte, firstByte + bytes) of that rank's bytes of `turn`.
// dst must hold this rank's own values of that range (what its buffer
// holds there). AVG divides in the last step, once (reduceAndAverage).
// args.data and args.count are not read. `ownValues`, if given, holds
// this rank's values of the range where its own buffer would (a caller's
// input block this rank did not copy into the buffer, since no peer reads
// it). It is either dst itself (this rank's values in place: each slice
// is kept aside before dst is written) or apart from dst.
void reduceInRankOrder(const HostChannel& channel, const HostChannel::Turn& turn,
                       const ReductionArgs& args, char* dst, size_t firstByte, size_t bytes,
                       const char* ownValues = nullptr);

// Whether reduceInRankOrder on this rank reads this rank's own buffer: not
// on rank 0 (its own values start the expression in dst) nor on rank 1 of
// two with an exactly commuting op; a rank that is the only one to reduce
// (a reduce's root) need not fill its buffer otherwise.
bool reduceInRankOrderReadsOwnBuffer(const HostChannel& channel, const ReductionArgs& args);

}  // namespace ringreduce
