// How two elements combine, written once for the host loops
// (core/math/host_reduce.cpp) and the device kernels (cuda/kernels/), so a CPU
// tensor and a GPU tensor reduce to the same bits, and both as torch does:
//   signed integers wrap: the arithmetic is done unsigned, which C++ defines
//     (signed overflow is undefined behaviour)
//   MIN/MAX propagate NaN, as torch.minimum and torch.maximum do
//   AVG sums, then divides once; integers truncate toward zero, as NCCL's
//     integer average does
//   bool tensors hold 0/1 bytes and reduce with a logical op (boolOperator)
// Scalar functions only, so that callers keep loops the compiler can
// vectorise. No CUDA header: the 16-bit float types and their conversions
// stay on the CUDA side (cuda/kernels/reduce_element.cuh).
#pragma once

#include <cmath>
#include <type_traits>

#include "core/base/reduce_op.h"

// Callable from device code when nvcc compiles the includer.
#if defined(__CUDACC__)
#define RR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define RR_HOST_DEVICE inline
#endif

namespace ringreduce {

// The type integer arithmetic is done in: unsigned, so that it wraps.
template <typename T, bool = std::is_integral_v<T>>
struct WrapTypeOf {
  using type = T;
};
template <typename T>
struct WrapTypeOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapOf = typename WrapTypeOf<T>::type;

template <typename T>
RR_HOST_DEVICE bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
#if defined(__CUDA_ARCH__)
    return v != v;  // std::isnan is a host function
#else
    return std::isnan(v);
#endif
  } else {
    return false;
  }
}

// The second operand of a host float sum or product: `a` itself where `a`
// is NaN, so that a (op) a keeps a's NaN (quieted) whatever order the
// instruction takes its operands in. x86 keeps the first operand's NaN where
// both are NaN, but a compiler may swap the operands of a commutative add or
// multiply: GCC did in the AVX2 loops' scalar tail and in the baseline
// float64 product, so an element's bits depended on where a chunk began (on
// an AVX2-only EPYC, the same two tensors reduced whole and in a two-phase
// allreduce's chunks kept different NaNs at a chunk's edge). One compare and
// blend per vector; the device keeps its own rule (a canonical NaN). No
// -ffast-math anywhere: it would fold `a != a` away.
template <typename T>
RR_HOST_DEVICE T nanKeepingOperand(T a, T b) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_floating_point_v<T>) return a != a ? a : b;  // NaN: unequal to itself
#endif
  return b;
}

struct SumOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a + nanKeepingOperand(a, b);
    return static_cast<T>(static_cast<WrapOf<T>>(a) + static_cast<WrapOf<T>>(b));
  }
};
struct ProductOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return a * nanKeepingOperand(a, b);
    return static_cast<T>(static_cast<WrapOf<T>>(a) * static_cast<WrapOf<T>>(b));
  }
};
// MIN (kLarger false) and MAX: a NaN wins; otherwise the smaller (larger)
// value, `a` on a tie.
template <bool kLarger>
struct ExtremeOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    if (isNan(a)) return a;
    if (isNan(b)) return b;
    return (kLarger ? a < b : b < a) ? b : a;
  }
};
using MinOp = ExtremeOp<false>;
using MaxOp = ExtremeOp<true>;
struct BAndOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct BOrOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct BXorOp {
  template <typename T>
  RR_HOST_DEVICE T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

// AVG's last step: integers truncate toward zero (C++ division does).
template <typename T>
RR_HOST_DEVICE T divideBy(T v, T divisor) {
  return static_cast<T>(v / divisor);
}

// The logical op a bool reduction runs on its 0/1 bytes: SUM, MAX and BOR
// are OR; PRODUCT, MIN and BAND are AND; BXOR is XOR. AVG (which bool does
// not have) comes back unchanged, for the caller's error.
constexpr ReduceOp boolOperator(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Max:
    case ReduceOp::BOr:
      return ReduceOp::BOr;
    case ReduceOp::Product:
    case ReduceOp::Min:
    case ReduceOp::BAnd:
      return ReduceOp::BAnd;
    default:
      return op;
  }
}

}  // namespace ringreduce
