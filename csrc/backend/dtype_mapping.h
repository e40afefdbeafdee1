// Translation between torch's types and the torch-free core's.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

bool isSupportedScalarType(at::ScalarType type);
// Throws TypeError naming the op and dtype when the dtype is not supported.
DataType toDataType(at::ScalarType type, const char* opName);
// Throws ValueError for PREMUL_SUM and anything else we do not reduce.
ReduceOp toReduceOp(const c10d::ReduceOp& op, const char* opName);

}  // namespace ringreduce
