// Reduce to one root: a reduce-scatter in the form the selection picks for
// the group (ring, halving/doubling, direct, two-level: scatter_gather.h),
// then every rank sends its reduced chunk to the root. On one machine that
// is direct, which reads the non-roots' buffers where they are: a reduce
// costs no more than an allreduce, and less on the ranks that are not root.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Where a rank that is not the root works, so that its buffer stays as it
// was (as with NCCL and gloo's users expect).
struct ReduceScratch {
  // Direct: this rank's chunk (chunkOf(count, n, rank) elements) reduced
  // here, while peers read the buffer in place.
  void* chunk = nullptr;
  // The other forms reduce in place: on this copy of the buffer (count
  // elements; the buffer is copied in unless it is the same memory).
  void* copy = nullptr;
};

// Two parts of `op`, whose sequence numbers the caller reserved: part 0 the
// reduce-scatter, part 1 the gather. On `root`, `args.data` ends with the
// reduction over all ranks (the scratch is not used there); elsewhere it is
// only read.
void hostReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root,
                const ReduceScratch& scratch);

}  // namespace ringreduce
