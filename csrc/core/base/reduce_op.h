// Reduction operators, mirroring c10d::ReduceOp without depending on torch.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/data_type.h"

namespace ringreduce {

enum class ReduceOp : uint8_t { Sum, Avg, Product, Min, Max, BAnd, BOr, BXor };

const char* reduceOpName(ReduceOp op);

// Empty when `op` can reduce `type`; otherwise the reason, phrased for users
// ("MIN is not defined for complex64").
std::string unsupportedReason(DataType type, ReduceOp op);

}  // namespace ringreduce
