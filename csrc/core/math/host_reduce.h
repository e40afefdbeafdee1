// Host reduction loops used by every ring step: dst[i] = dst[i] (op) src[i].
// float16 and bfloat16 are combined in float32 and rounded once per call
// (core/math/host_loops.h), so they travel as 16 bits.
#pragma once

#include <cstddef>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

// Throws InvalidArgument for an unsupported (type, op) pair. AVG reduces as
// SUM; the last step divides (reduceAndAverage).
void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);

// AVG's last step: dst = (dst + src) / divisor, with the division fused
// before the one rounding of float16 and bfloat16.
void reduceAndAverage(DataType type, void* dst, const void* src, size_t count, int divisor);

// Divides every element by `divisor` (AVG's final step). Integers truncate
// toward zero, as NCCL's integer average does.
void finishAverage(DataType type, void* data, size_t count, int divisor);

}  // namespace ringreduce
