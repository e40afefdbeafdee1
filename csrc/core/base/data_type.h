// Element types the host data path understands. Kept free of torch so the
// algorithms and their tests build without it; csrc/backend maps at::ScalarType.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringreduce {

enum class DataType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int8,
  UInt8,
  Int16,
  Int32,
  Int64,
  Bool,
  Complex64,
  Complex128,
};

size_t elementSize(DataType type);
const char* dataTypeName(DataType type);

inline bool isHalfPrecision(DataType t) {
  return t == DataType::Float16 || t == DataType::BFloat16;
}
inline bool isComplex(DataType t) {
  return t == DataType::Complex64 || t == DataType::Complex128;
}
inline bool isIntegral(DataType t) {
  return t == DataType::Int8 || t == DataType::UInt8 || t == DataType::Int16 ||
         t == DataType::Int32 || t == DataType::Int64;
}

}  // namespace ringreduce
