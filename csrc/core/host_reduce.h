// Host reduction loops used by every ring step: dst[i] = dst[i] (op) src[i].
// Half precision types are not reduced here: the algorithms widen them to
// float32 first (see half_conversion.h), so precision does not depend on the
// ring position of a rank.
#pragma once

#include <cstddef>

#include "core/data_type.h"
#include "core/reduce_op.h"

namespace ringreduce {

// Throws InvalidArgument for half types or an unsupported (type, op) pair.
// AVG reduces as SUM; finishAverage() divides once at the end.
void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);

// Divides every element by `divisor` (AVG's final step). Integers truncate
// toward zero, as NCCL's integer average does.
void finishAverage(DataType type, void* data, size_t count, int divisor);

}  // namespace ringreduce
