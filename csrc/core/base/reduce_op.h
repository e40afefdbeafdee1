// Reduction operators, mirroring c10d::ReduceOp without depending on torch.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/data_type.h"

namespace ringreduce {

enum class ReduceOp : uint8_t { Sum, Avg, Product, Min, Max, BAnd, BOr, BXor };

const char* reduceOpName(ReduceOp op);

// Whether `op` can reduce `type`: what every collective asks, so it builds
// no string.
bool reductionSupported(DataType type, ReduceOp op);

// Empty when `op` can reduce `type`; otherwise the reason, phrased for users
// ("MIN is not defined for complex64"). For the failure path only.
std::string unsupportedReason(DataType type, ReduceOp op);

}  // namespace ringreduce
