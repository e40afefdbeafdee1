#include "core/half_reduce.h"

#include <algorithm>

#include "core/half_conversion.h"
#include "core/host_reduce.h"

namespace ringreduce {

namespace {
// Two float blocks of this many elements stay in L1 (2 x 8 KiB).
constexpr size_t kBlock = 2048;
}  // namespace

void reduceHalfInto(bool half, ReduceOp op, uint16_t* dst, const uint16_t* src, size_t count,
                    int avgDivisor) {
  alignas(64) float a[kBlock];
  alignas(64) float b[kBlock];
  const ReduceOp combine = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = std::min(kBlock, count - done);
    halfBufferToFloat(half, dst + done, a, n);
    halfBufferToFloat(half, src + done, b, n);
    reduceInto(DataType::Float32, combine, a, b, n);
    if (avgDivisor != 0) finishAverage(DataType::Float32, a, n, avgDivisor);
    floatBufferToHalf(half, a, dst + done, n);
  }
}

}  // namespace ringreduce
