// Translation between torch's types and the torch-free core's (dtype_mapping.h)
#include "backend/dtype_mapping.h"

#include <c10/util/Exception.h>

namespace ringreduce {

namespace {
bool lookup(at::ScalarType type, DataType* out) {
  switch (type) {
    case at::kFloat: *out = DataType::Float32; return true;
    case at::kDouble: *out = DataType::Float64; return true;
    case at::kHalf: *out = DataType::Float16; return true;
    case at::kBFloat16: *out = DataType::BFloat16; return true;
    case at::kChar: *out = DataType::Int8; return true;
    case at::kByte: *out = DataType::UInt8; return true;
    case at::kShort: *out = DataType::Int16; return true;
    case at::kInt: *out = DataType::Int32; return true;
    case at::kLong: *out = DataType::Int64; return true;
    case at::kBool: *out = DataType::Bool; return true;
    case at::kComplexFloat: *out = DataType::Complex64; return true;
    case at::kComplexDouble: *out = DataType::Complex128; return true;
    default: return false;
  }
}
}  // namespace

bool isSupportedScalarType(at::ScalarType type) {
  DataType unused;
  return lookup(type, &unused);
}

DataType toDataType(at::ScalarType type, const char* opName) {
  DataType result;
  TORCH_CHECK_TYPE(lookup(type, &result), "ringreduce: ", opName, " does not support dtype ",
                   c10::toString(type),
                   " (supported: float32, float64, float16, bfloat16, int8, uint8, int16, "
                   "int32, int64, bool, complex64, complex128)");
  return result;
}

ReduceOp toReduceOp(const c10d::ReduceOp& op, const char* opName) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::Product;
    case c10d::ReduceOp::MIN: return ReduceOp::Min;
    case c10d::ReduceOp::MAX: return ReduceOp::Max;
    case c10d::ReduceOp::BAND: return ReduceOp::BAnd;
    case c10d::ReduceOp::BOR: return ReduceOp::BOr;
    case c10d::ReduceOp::BXOR: return ReduceOp::BXor;
    default: break;
  }
  TORCH_CHECK_VALUE(false, "ringreduce: ", opName, " does not support reduce op ",
                    op.op_ == c10d::ReduceOp::PREMUL_SUM ? std::string("PREMUL_SUM")
                                                         : std::to_string(op.op_));
}

}  // namespace ringreduce
