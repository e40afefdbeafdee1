#include "core/host_reduce.h"

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/element_math.h"
#include "core/errors.h"
#include "core/half_reduce.h"

namespace ringreduce {

namespace {

// `Fn` is a stateless functor (core/element_math.h); the loop is simple
// enough for GCC to vectorise.
template <typename T, typename Fn>
void apply(void* dst, const void* src, size_t count, Fn fn) {
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = fn(d[i], s[i]);
}

template <typename T>
void reduceReal(ReduceOp op, void* dst, const void* src, size_t count) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return apply<T>(dst, src, count, SumOp());
    case ReduceOp::Product:
      return apply<T>(dst, src, count, ProductOp());
    case ReduceOp::Min:
      return apply<T>(dst, src, count, MinOp());
    case ReduceOp::Max:
      return apply<T>(dst, src, count, MaxOp());
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::BAnd:
        return apply<T>(dst, src, count, BAndOp());
      case ReduceOp::BOr:
        return apply<T>(dst, src, count, BOrOp());
      case ReduceOp::BXor:
        return apply<T>(dst, src, count, BXorOp());
      default:
        break;
    }
  }
  throw InvalidArgument(std::string("reduce: operator ") + reduceOpName(op) +
                        " has no host loop for this type");
}

// Booleans hold 0/1 bytes; any nonzero byte reads as true and the result is
// stored as 0 or 1.
void reduceBool(ReduceOp op, void* dst, const void* src, size_t count) {
  switch (boolOperator(op)) {
    case ReduceOp::BOr:
      return apply<uint8_t>(dst, src, count,
                            [](uint8_t a, uint8_t b) { return uint8_t(BOrOp()(a, b) != 0); });
    case ReduceOp::BAnd:
      return apply<uint8_t>(dst, src, count,
                            [](uint8_t a, uint8_t b) { return uint8_t(BAndOp()(a, b) != 0); });
    case ReduceOp::BXor:
      return apply<uint8_t>(dst, src, count,
                            [](uint8_t a, uint8_t b) { return uint8_t(BXorOp()(a, b) != 0); });
    default:
      break;
  }
  throw InvalidArgument(unsupportedReason(DataType::Bool, op));
}

template <typename T>
void reduceComplex(ReduceOp op, void* dst, const void* src, size_t count) {
  // Interleaved (re, im) pairs: a sum is an element-wise sum of 2*count reals.
  if (op == ReduceOp::Sum || op == ReduceOp::Avg) {
    return apply<T>(dst, src, 2 * count, SumOp());
  }
  throw InvalidArgument(unsupportedReason(
      sizeof(T) == 4 ? DataType::Complex64 : DataType::Complex128, op));
}

template <typename T>
void divideAll(void* data, size_t count, int divisor) {
  T* d = static_cast<T*>(data);
  const T div = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] = divideBy(d[i], div);
}

// Integers: there is no vector integer division, and a scalar one costs tens
// of cycles per element. Through a float type that holds every value of T
// exactly, the quotient rounds to within |v|/divisor * 2^-p of the true one,
// less than the 1/divisor that separates a non-integer quotient from the
// next integer while |v| < 2^p: truncating it gives exactly v / divisor.
// float (p = 24) serves 8- and 16-bit integers, double (p = 53) 32-bit ones.
template <typename T, typename Wide>
void divideAllThrough(void* data, size_t count, int divisor) {
  static_assert(sizeof(T) * 8 <= std::numeric_limits<Wide>::digits);
  T* __restrict d = static_cast<T*>(data);
  const Wide div = static_cast<Wide>(divisor);
  for (size_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<Wide>(d[i]) / div);
}

// AVG's last step in one pass: d = (d + s) / divisor, the sum wrapping or
// rounding exactly as SumOp does and the quotient as divideAllThrough
// (integers) or a plain division (floats) does, so the bits are those of
// the two-pass form while the data is read once.
template <typename T, typename Wide>
void sumAndDivide(void* dst, const void* src, size_t count, int divisor) {
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict s = static_cast<const T*>(src);
  const Wide div = static_cast<Wide>(divisor);
  for (size_t i = 0; i < count; ++i) {
    d[i] = static_cast<T>(static_cast<Wide>(SumOp()(d[i], s[i])) / div);
  }
}

}  // namespace

void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  const std::string reason = unsupportedReason(type, op);
  if (!reason.empty()) throw InvalidArgument(reason);
  switch (type) {
    case DataType::Float32: return reduceReal<float>(op, dst, src, count);
    case DataType::Float64: return reduceReal<double>(op, dst, src, count);
    case DataType::Int8: return reduceReal<int8_t>(op, dst, src, count);
    case DataType::UInt8: return reduceReal<uint8_t>(op, dst, src, count);
    case DataType::Int16: return reduceReal<int16_t>(op, dst, src, count);
    case DataType::Int32: return reduceReal<int32_t>(op, dst, src, count);
    case DataType::Int64: return reduceReal<int64_t>(op, dst, src, count);
    case DataType::Bool: return reduceBool(op, dst, src, count);
    case DataType::Complex64: return reduceComplex<float>(op, dst, src, count);
    case DataType::Complex128: return reduceComplex<double>(op, dst, src, count);
    case DataType::Float16:
    case DataType::BFloat16:
      return reduceHalfInto(type == DataType::Float16, op, static_cast<uint16_t*>(dst),
                            static_cast<const uint16_t*>(src), count);
  }
  throw InvalidArgument(std::string("reduce: no loop for ") + dataTypeName(type));
}

void reduceAndAverage(DataType type, void* dst, const void* src, size_t count, int divisor) {
  if (isHalfPrecision(type)) {
    return reduceHalfInto(type == DataType::Float16, ReduceOp::Avg, static_cast<uint16_t*>(dst),
                          static_cast<const uint16_t*>(src), count, divisor);
  }
  switch (type) {
    case DataType::Float32: return sumAndDivide<float, float>(dst, src, count, divisor);
    case DataType::Float64: return sumAndDivide<double, double>(dst, src, count, divisor);
    case DataType::Int8: return sumAndDivide<int8_t, float>(dst, src, count, divisor);
    case DataType::UInt8: return sumAndDivide<uint8_t, float>(dst, src, count, divisor);
    case DataType::Int16: return sumAndDivide<int16_t, float>(dst, src, count, divisor);
    case DataType::Int32: return sumAndDivide<int32_t, double>(dst, src, count, divisor);
    default:
      break;
  }
  reduceInto(type, ReduceOp::Avg, dst, src, count);
  finishAverage(type, dst, count, divisor);
}

void finishAverage(DataType type, void* data, size_t count, int divisor) {
  switch (type) {
    case DataType::Float32: return divideAll<float>(data, count, divisor);
    case DataType::Float64: return divideAll<double>(data, count, divisor);
    case DataType::Complex64: return divideAll<float>(data, 2 * count, divisor);
    case DataType::Complex128: return divideAll<double>(data, 2 * count, divisor);
    case DataType::Int8: return divideAllThrough<int8_t, float>(data, count, divisor);
    case DataType::UInt8: return divideAllThrough<uint8_t, float>(data, count, divisor);
    case DataType::Int16: return divideAllThrough<int16_t, float>(data, count, divisor);
    case DataType::Int32: return divideAllThrough<int32_t, double>(data, count, divisor);
    case DataType::Int64: return divideAll<int64_t>(data, count, divisor);
    default:
      break;
  }
  throw InvalidArgument(std::string("AVG: cannot average ") + dataTypeName(type));
}

}  // namespace ringreduce
