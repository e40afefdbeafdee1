// Pipelined ring reductions on a host buffer, cut into one chunk per rank:
// allreduce (reduce-scatter, then allgather) and reduce-scatter alone. Each
// chunk is cut into segments; as soon as segment k of a step is reduced it is
// sent on as segment k of the next step, so the transfer of one segment
// overlaps the reduction of the next.
#pragma once

#include <cstddef>

#include "algorithms/workspace.h"
#include "core/config.h"
#include "core/data_type.h"
#include "core/op_context.h"
#include "core/reduce_op.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

// In place: every rank ends with the reduction of all ranks' buffers. Half
// precision data is widened to float32 for the whole reduction and narrowed
// once at the end. AVG divides once, fused into the last reduce step.
void ringAllreduce(UcxTransport& transport, const OpContext& op, void* data, size_t count,
                   DataType type, ReduceOp reduceOp, const Config& config,
                   Workspace& workspace);

// In place: afterwards chunk r of `data` (chunkOf(count, n, r)) on rank r
// holds the reduction of that chunk over all ranks; the other chunks hold
// partial sums. Same precision and AVG rules as ringAllreduce.
void ringReduceScatter(UcxTransport& transport, const OpContext& op, void* data, size_t count,
                       DataType type, ReduceOp reduceOp, const Config& config,
                       Workspace& workspace);

}  // namespace ringreduce
