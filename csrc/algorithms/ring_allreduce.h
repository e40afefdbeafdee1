// Pipelined ring allreduce (reduce-scatter, then allgather) in place on a
// host buffer. Each rank's chunk is cut into segments; as soon as segment k
// of a step is reduced it is sent on as segment k of the next step, so the
// transfer of one segment overlaps the reduction of the next.
#pragma once

#include <cstddef>

#include "algorithms/workspace.h"
#include "core/config.h"
#include "core/data_type.h"
#include "core/op_context.h"
#include "core/reduce_op.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

// Half precision data is widened to float32 for the whole reduction and
// narrowed once at the end. AVG divides once, fused into the last
// reduce-scatter step.
void ringAllreduce(UcxTransport& transport, const OpContext& op, void* data, size_t count,
                   DataType type, ReduceOp reduceOp, const Config& config,
                   Workspace& workspace);

}  // namespace ringreduce
