// Pipelined ring reductions on a host buffer, cut into one chunk per rank:
// allreduce (reduce-scatter, then allgather) and reduce-scatter alone. Each
// chunk is cut into segments; as soon as segment k of a step is reduced it is
// sent on as segment k of the next step, so the transfer of one segment
// overlaps the reduction of the next.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "core/base/data_type.h"
#include "core/base/op_context.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

class ChunkLayout;

// `count` elements of `type` at `data`, reduced in place with `op`.
struct ReductionArgs {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
};

// In place: every rank ends with the reduction of all ranks' buffers.
// float16 and bfloat16 travel as 16 bits: each step combines in float32 and
// rounds once (error bound in core/math/host_loops.h). AVG divides once, fused
// into the last reduce step.
void ringAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// In place: afterwards chunk r of `data` (chunkOf(count, n, r)) on rank r
// holds the reduction of that chunk over all ranks; the other chunks hold
// partial sums. Same precision and AVG rules as ringAllreduce.
void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args);
// The same with AVG's divisor given (0: none, partial sums only): a
// reduce-scatter that is one phase of a larger one (algorithms/
// two_level_scatter_gather.h) divides by the whole group's size, once.
void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int avgDivisor);
// The same with rank r's chunk given by `chunks` (core/plan/chunk_layout.h; in
// elements, covering the buffer), for the phases of the two-level form.
void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int avgDivisor, const ChunkLayout& chunks);

}  // namespace ringreduce
