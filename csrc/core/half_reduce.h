// Reductions of float16 / bfloat16 buffers that stay 16-bit on the wire:
// each ring step widens both operands to float32 a cache-sized block at a
// time, combines them there, and rounds the result once back to 16 bits.
//
// Precision: one rounding per ring step (as gloo and NCCL do). A SUM over n
// ranks rounds its running partial sum n-1 times, so the error is at most
// (n-1) * u * sum(|x_i|) (plus second-order terms), with u the unit roundoff:
// 2^-11 for float16, 2^-8 for bfloat16. AVG divides before the last rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/reduce_op.h"

namespace ringreduce {

// dst[i] = round(float(dst[i]) (op) float(src[i])), and divided by
// `avgDivisor` before rounding when it is not 0. `half` selects float16
// (true) or bfloat16 (false). AVG combines as SUM.
void reduceHalfInto(bool half, ReduceOp op, uint16_t* dst, const uint16_t* src, size_t count,
                    int avgDivisor = 0);

}  // namespace ringreduce
