// Reduce to one root: ring reduce-scatter (bandwidth-optimal), then every
// rank sends its reduced chunk to the root.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/op_context.h"

namespace ringreduce {

// `args.data` is used as scratch on every rank (callers pass a copy on
// non-roots); on `root` it ends with the reduction over all ranks.
void ringReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root);

}  // namespace ringreduce
