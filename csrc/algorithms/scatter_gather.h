// Reduce-scatter and allgather, chosen like the allreduce (algorithms/
// allreduce.h): recursive halving / doubling in rank order (far partners
// first, so rank r ends with block r) when the group is a power of two and
// the cost model prefers halving/doubling for an allreduce of that size (each
// is half of one), else the ring. RINGREDUCE_ALGORITHM=halving_doubling
// forces it on powers of two; the other settings give the ring. Same results
// as the ring forms, bit for bit, on inputs with exact sums.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/op_context.h"

namespace ringreduce {

// As ringReduceScatter: chunk r (chunkOf(count, p, r)) of rank r's buffer
// ends with the reduction of that chunk.
void hostReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// As ringAllgather: rank r's block lands at r * blockBytes of every output.
void hostAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args);

}  // namespace ringreduce
