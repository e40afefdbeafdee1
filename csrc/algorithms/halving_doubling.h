// Rabenseifner's allreduce: reduce-scatter by recursive halving, then
// allgather by recursive doubling (core/plan/halving_plan.h: the pairing, the
// fold for sizes that are not powers of two, the blocks each rank owns).
// 2*log2(p) steps instead of the ring's 2(p-1), moving the same 2(p-1)/p of
// the buffer per rank (plus the fold's whole buffer, twice, when p is not a
// power of two): the choice for latency-bound sizes.
//
// Same results as the ring: each element is reduced at one rank and then
// copied, so all ranks hold identical bits; 16-bit floats combine in float32
// and round once per step; AVG divides once, in the element's last step.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/halving_plan.h"
#include "core/base/op_context.h"
#include "core/plan/partition.h"

namespace ringreduce {

void halvingDoublingAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// The halves, for the two-level allreduce. After halvingReduceScatter the
// rank of virtual rank v holds the reduction of block plan.blockOf(v) (its
// elements: halvingBlock); ranks folded out hold partial data. `avgDivisor`
// (0: none) divides each element in its last reduction, for AVG.
void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor);
// The inverse: every block from its owner to every rank, folded-out ranks included.
void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// Reduce-scatter and allgather in rank order, for any number of ranks:
// rank r ends with (reduce-scatter) or contributes (allgather, already in
// place) chunks.chunk(r) of the buffer (in elements of args.type), as the
// ring forms place them. Far partners first, so that virtual rank v's
// blocks are the chunks of ranks [lowestRankOf(v), lowestRankOf(v + 1)).
//
// When p is not a power of two the pairs of the plan's fold (core/
// halving_plan.h) share a virtual rank: for the reduce-scatter the folded
// rank hands its whole buffer over first and gets back its own reduced
// chunk at the end; for the allgather it hands over its own chunk first and
// gets the whole buffer back at the end. That costs one step and one whole
// buffer more than a power of two (priced in core/plan/allreduce_cost.h), and
// keeps the allreduce's plan, so the steps that remain are the usual
// log2 p' exchanges. Schemes without a fold (Bruck's dissemination, or
// halving with groups split unevenly) avoid the whole-buffer hand-over but
// need more steps or messages whose sizes depend on p in ways the cost
// model would have to follow too. (MPICH's recursive-halving
// reduce-scatter folds the same way; the allgather here is its mirror.)
void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor, const ChunkLayout& chunks);
void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       const ChunkLayout& chunks);

// The elements of `block` of a halving plan's 2^L blocks.
inline Range halvingBlock(size_t count, const HalvingPlan& plan, int block) {
  return chunkOf(count, plan.pow2(), block);
}

}  // namespace ringreduce
