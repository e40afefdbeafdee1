// Element types the host data path understands (data_type.h)
#include "core/base/data_type.h"

namespace ringreduce {

size_t elementSize(DataType type) {
  switch (type) {
    case DataType::Float32: return 4;
    case DataType::Float64: return 8;
    case DataType::Float16: return 2;
    case DataType::BFloat16: return 2;
    case DataType::Int8: return 1;
    case DataType::UInt8: return 1;
    case DataType::Int16: return 2;
    case DataType::Int32: return 4;
    case DataType::Int64: return 8;
    case DataType::Bool: return 1;
    case DataType::Complex64: return 8;
    case DataType::Complex128: return 16;
  }
  return 0;
}

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Float16: return "float16";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Int8: return "int8";
    case DataType::UInt8: return "uint8";
    case DataType::Int16: return "int16";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
    case DataType::Bool: return "bool";
    case DataType::Complex64: return "complex64";
    case DataType::Complex128: return "complex128";
  }
  return "unknown";
}

}  // namespace ringreduce
