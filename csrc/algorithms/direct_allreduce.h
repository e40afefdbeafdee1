// Allreduce in two rounds of direct messages: every rank sends block j of
// its buffer to rank j, which reduces the p blocks (reduce-scatter), then
// sends its reduced block to every rank (allgather). Two message latencies
// whatever p, at the price of p-1 messages per rank per round: the choice
// for small buffers on few ranks, and for large ones on one machine, where
// round 1 arrives in segments that are reduced while in cache.
//
// Same results as the ring: each block is reduced at one rank, in rank
// order, and copied; 16-bit floats round once per combination; AVG divides
// once, in the last.
#pragma once

#include <vector>

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

void directAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// Its first round alone, as ringReduceScatter: chunk r of rank r's buffer
// ends with the reduction of that chunk.
void directReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args);
// The same out of place: `input` stays as it was (peers read it where it
// is) and rank r's reduced chunk lands in `output`.
void directReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                         void* output);

// The same with the input in blocks of their own (the list form): block j,
// chunkOf(input.count, n, j) elements, at blocks[j] (one per rank; input.data
// unused). `output` may be this rank's own block, not another.
void directReduceScatterBlocks(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                               const std::vector<const void*>& blocks, void* output);

// Reduce to `root` (reduce_to_root.h) by its first round, each reduced
// segment sent on to the root as soon as it is reduced. Two parts of `op`:
// part 0 round 1, part 1 the segments to the root. The root's buffer ends
// with the reduction; elsewhere `args.data` is only read and the rank's
// chunk is reduced into `chunk`.
void directReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root,
                  void* chunk);

// Its second round alone, as ringAllgather: rank r's block lands at
// r * blockBytes of every output.
void directAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args);

}  // namespace ringreduce
