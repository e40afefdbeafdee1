// Reduce-scatter through the group's host channel (algorithms/host_channel/turn.h):
// in each turn every rank copies a piece of each of its peers' blocks into
// its buffer (block j's piece in slot j), and once every peer's flag is up,
// rank r reduces slot r of every rank's buffer, in rank order
// (algorithms/host_channel/reduction.h), into its output. Its own block it
// reads from its input, where no peer needs it: only an output that
// overlaps an own block has that block copied into its slot too. The
// blocks are cut alike on every rank, a buffer's worth of the n pieces per
// turn.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a reduce-scatter of `bytes` (each rank's whole input) goes
// through the channel: the same answer on every rank
// (hostChannelCollectiveApplies).
bool hostChannelReduceScatterApplies(const Comm& comm, size_t bytes);

// As hostReduceScatterInto: rank r's chunk (chunkOf(input.count, n, r)) of
// the reduction lands in `output`, which must not overlap the input;
// `input` stays as it was. The op and dtype must be supported
// (reductionSupported); AVG divides once, at the end.
void hostChannelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                              void* output);

// The same with block j at blocks[j] (hostReduceScatterBlocksInto);
// `output` may be this rank's own block, and overlap no other.
void hostChannelReduceScatterBlocks(const Comm& comm, const OpContext& op,
                                    const ReductionArgs& input,
                                    const std::vector<const void*>& blocks, void* output);

// One tensor of a coalesced reduce-scatter (torch's
// reduce_scatter_tensor_coalesced): `count` elements at `input`, of which
// this rank's chunk (chunkOf(count, n, rank)) of the reduction lands at
// `output`, which must not overlap any input.
struct ReduceScatterPart {
  const void* input;
  void* output;
  size_t count;
};

// Several tensors of one dtype and op as one message
// (algorithms/host_channel/stretches.h): one turn for a block that fits a
// buffer, however many tensors it has. The inputs stay as they were.
void hostChannelReduceScatterParts(const Comm& comm, const OpContext& op, DataType type,
                                   ReduceOp reduceOp, const std::vector<ReduceScatterPart>& parts);

}  // namespace ringreduce
