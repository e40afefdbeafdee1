// Reduction operators, mirroring c10d::ReduceOp without torch (reduce_op.h)
#include "core/base/reduce_op.h"

namespace ringreduce {

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
    case ReduceOp::BAnd: return "BAND";
    case ReduceOp::BOr: return "BOR";
    case ReduceOp::BXor: return "BXOR";
  }
  return "UNKNOWN";
}

bool reductionSupported(DataType type, ReduceOp op) {
  const bool bitwise = op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
  if (bitwise && !(isIntegral(type) || type == DataType::Bool)) return false;
  if (isComplex(type) && !(op == ReduceOp::Sum || op == ReduceOp::Avg)) return false;
  return !(type == DataType::Bool && op == ReduceOp::Avg);
}

std::string unsupportedReason(DataType type, ReduceOp op) {
  if (reductionSupported(type, op)) return "";
  const std::string pair =
      std::string(reduceOpName(op)) + " is not supported for " + dataTypeName(type);
  const bool bitwise =
      op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
  if (bitwise && !(isIntegral(type) || type == DataType::Bool)) {
    return pair + " (bitwise ops need an integer or bool tensor)";
  }
  if (isComplex(type) && !(op == ReduceOp::Sum || op == ReduceOp::Avg)) {
    return pair + " (complex tensors support SUM and AVG)";
  }
  if (type == DataType::Bool && op == ReduceOp::Avg) {
    return pair + " (the average of booleans is not a boolean)";
  }
  return "";
}

}  // namespace ringreduce
