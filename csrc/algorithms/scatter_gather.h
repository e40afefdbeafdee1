// Reduce-scatter and allgather, chosen like the allreduce (algorithms/
// allreduce.h) by the cost model's predictions for them (core/
// allreduce_cost.h): the ring; recursive halving / doubling in rank order
// (far partners first, so rank r ends with chunk r; folding a pair of ranks
// into one when the group is not a power of two, halving_doubling.h); or
// the two-level form (two_level_scatter_gather.h) when ranks share nodes;
// or direct (direct_allreduce.h: one of its allreduce's rounds).
// RINGREDUCE_ALGORITHM=halving_doubling, ring or direct forces that form;
// two_level forces the two-level form where it applies (more than one node,
// some node with more than one rank), else falls back as the two-level
// allreduce does (halving/doubling). Same results as the
// ring forms, bit for bit, on inputs with exact sums.
#pragma once

#include <vector>

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

// As ringReduceScatter: chunk r (chunkOf(count, p, r)) of rank r's buffer
// ends with the reduction of that chunk.
void hostReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// The same out of place, where the chosen form can read the input where it
// is (direct): `input` stays as it was and rank r's reduced chunk lands in
// `output`. Returns false, having done nothing, where the form would need a
// copy to work in (the ring, halving/doubling, two_level): the choice is the
// same on every rank, so all ranks return alike.
bool hostReduceScatterInto(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                           void* output);

// The same with the input in blocks of their own (the list form of
// reduce_scatter): block j, chunkOf(input.count, p, j) elements, at
// blocks[j], one per rank (input.data unused). `output` may be this rank's
// own block, not another.
bool hostReduceScatterBlocksInto(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                                 const std::vector<const void*>& blocks, void* output);

// Whether the form chosen for a reduce-scatter or allgather of `bytes` (the
// whole buffer) is direct: the same on every rank.
bool scatterGatherIsDirect(const Comm& comm, const OpContext& op, size_t bytes);

// As ringAllgather: rank r's block lands at r * blockBytes of every output.
void hostAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args);

}  // namespace ringreduce
