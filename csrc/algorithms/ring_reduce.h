// Reduce to one root: ring reduce-scatter (bandwidth-optimal), then every
// rank sends its reduced chunk to the root.
#pragma once

#include "algorithms/workspace.h"
#include "core/config.h"
#include "core/data_type.h"
#include "core/op_context.h"
#include "core/reduce_op.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

// `data` is used as scratch on every rank (callers pass a copy on non-roots);
// on the root it ends with the reduction over all ranks.
void ringReduce(UcxTransport& transport, const OpContext& op, void* data, size_t count,
                DataType type, ReduceOp reduceOp, int root, const Config& config,
                Workspace& workspace);

}  // namespace ringreduce
