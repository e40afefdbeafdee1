// Rabenseifner's allreduce: reduce-scatter by recursive halving, then
// allgather by recursive doubling (core/halving_plan.h: the pairing, the
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
#include "core/halving_plan.h"
#include "core/op_context.h"
#include "core/partition.h"

namespace ringreduce {

void halvingDoublingAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// The halves, for the two-level allreduce. After halvingReduceScatter the
// rank of virtual rank v holds the reduction of block plan.blockOf(v) (its
// elements: halvingBlock); ranks folded out hold partial data. `avgDivisor`
// (0: none) divides each element in its last reduction, for AVG.
// FarFirst: on a power-of-two group rank r ends with block r (chunkOf(count,
// p, r)), as ringReduceScatter leaves it.
void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor,
                          HalvingPlan::Order order = HalvingPlan::Order::NeighboursFirst);
// The inverse: every block from its owner to every rank, folded-out ranks included.
void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       HalvingPlan::Order order = HalvingPlan::Order::NeighboursFirst);

// The elements of `block` of a halving plan's 2^L blocks.
inline Range halvingBlock(size_t count, const HalvingPlan& plan, int block) {
  return chunkOf(count, plan.pow2(), block);
}

}  // namespace ringreduce
