// Which (source dtype, destination dtype, op) the fused kernel handles:
// plain C++, so the host-side tests of the IPC protocol link it without the
// device code.
#include "cuda/kernels/reduce_copy.h"

namespace ringreduce::cuda {

namespace {

bool isWireCast(DataType s, DataType d) {
  const bool narrow = s == DataType::Float32 && isHalfPrecision(d);
  const bool widen = isHalfPrecision(s) && d == DataType::Float32;
  return narrow || widen;
}

}  // namespace

std::string kernelUnsupportedReason(DataType srcType, DataType dstType, ReduceOp op) {
  if (srcType != dstType) {
    if (!isWireCast(srcType, dstType)) {
      return std::string("no device cast from ") + dataTypeName(srcType) + " to " +
             dataTypeName(dstType);
    }
    if (op != ReduceOp::Sum && op != ReduceOp::Avg) {
      return std::string("a 16-bit wire dtype carries SUM and AVG only, not ") +
             reduceOpName(op);
    }
    return "";
  }
  const std::string reason = unsupportedReason(srcType, op);
  if (!reason.empty()) return reason;
  if (isComplex(srcType) && op != ReduceOp::Sum && op != ReduceOp::Avg) {
    return std::string(reduceOpName(op)) + " is not defined for " + dataTypeName(srcType);
  }
  return "";
}

}  // namespace ringreduce::cuda
