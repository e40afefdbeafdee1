// Inputs whose reduction is exact in every type and every order of
// combination, so that any two algorithms must agree bit for bit: the
// algorithm tests (test_scale_algorithms.cpp,
// test_two_level_scatter_gather.cpp) compare each form with the ring on them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/base/data_type.h"
#include "core/math/half_conversion.h"
#include "core/base/reduce_op.h"

namespace ringreduce::testing {

constexpr DataType kTypes[] = {DataType::Float32,  DataType::Float64,   DataType::Float16,
                               DataType::BFloat16, DataType::Int8,      DataType::UInt8,
                               DataType::Int16,    DataType::Int32,     DataType::Int64,
                               DataType::Bool,     DataType::Complex64, DataType::Complex128};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg,  ReduceOp::Product, ReduceOp::Min,
                             ReduceOp::Max, ReduceOp::BAnd, ReduceOp::BOr,     ReduceOp::BXor};

// Small integers in the type's representation: sums and products of up to
// 9 ranks stay exact (products use -1, 1 and 2 only; integer types wrap
// alike in every order).
inline std::vector<uint8_t> inputOf(DataType type, ReduceOp op, size_t count, int rank, int salt) {
  std::mt19937 gen(static_cast<uint32_t>(rank * 7919 + salt));
  const int product[] = {-1, 1, 2};
  auto value = [&]() -> int {
    if (op == ReduceOp::Product) return product[gen() % 3];
    return static_cast<int>(gen() % 17) - 8;
  };
  std::vector<uint8_t> bytes(count * elementSize(type));
  for (size_t i = 0; i < count; ++i) {
    void* at = bytes.data() + i * elementSize(type);
    const int v = value();
    switch (type) {
      case DataType::Float32:
        *static_cast<float*>(at) = static_cast<float>(v);
        break;
      case DataType::Float64:
        *static_cast<double*>(at) = v;
        break;
      case DataType::Float16:
        *static_cast<uint16_t*>(at) = floatToHalf(static_cast<float>(v));
        break;
      case DataType::BFloat16:
        *static_cast<uint16_t*>(at) = floatToBFloat16(static_cast<float>(v));
        break;
      case DataType::Bool:
        *static_cast<uint8_t*>(at) = static_cast<uint8_t>(gen() % 2);
        break;
      case DataType::Complex64:
        static_cast<float*>(at)[0] = static_cast<float>(v);
        static_cast<float*>(at)[1] = static_cast<float>(value());
        break;
      case DataType::Complex128:
        static_cast<double*>(at)[0] = v;
        static_cast<double*>(at)[1] = value();
        break;
      default:  // integers: any bits for the bitwise ops, small values otherwise
        for (size_t b = 0; b < elementSize(type); ++b) {
          static_cast<uint8_t*>(at)[b] = b == 0 ? static_cast<uint8_t>(v) : (v < 0 ? 0xff : 0);
        }
        if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) {
          for (size_t b = 0; b < elementSize(type); ++b)
            static_cast<uint8_t*>(at)[b] = gen() & 0xff;
        }
        break;
    }
  }
  return bytes;
}

}  // namespace ringreduce::testing
