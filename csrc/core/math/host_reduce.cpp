// Host reduction loops used by every ring step (host_reduce.h)
#include "core/math/host_reduce.h"

#include <string>

#include "core/base/errors.h"
#include "core/math/host_loops.h"

namespace ringreduce {

void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  if (!reductionSupported(type, op)) throw InvalidArgument(unsupportedReason(type, op));
  hostLoopsForBytes(count * elementSize(type)).reduce(type, op, dst, src, count);
}

void reduceAndAverage(DataType type, void* dst, const void* src, size_t count, int divisor) {
  hostLoopsForBytes(count * elementSize(type)).reduceAndAverage(type, dst, src, count, divisor);
}

void finishAverage(DataType type, void* data, size_t count, int divisor) {
  hostLoopsForBytes(count * elementSize(type)).finishAverage(type, data, count, divisor);
}

}  // namespace ringreduce
