// Element math of the fused reduce-copy kernels, shared by the device code
// and its host unit tests (the same templates, so a GPU-less CI still checks
// the arithmetic: wrapping integers, NaN-propagating MIN/MAX, float32
// accumulation of float16/bfloat16, AVG's division, wire casts).
//
// Semantics match the host loops (core/host_reduce.cpp) and torch: signed
// integers wrap (done in unsigned arithmetic, which C++ defines), MIN/MAX
// propagate NaN, integer AVG truncates toward zero, bool is stored as 0/1
// bytes and reduced with logical ops (mapped to BAND/BOR/BXOR by the caller).
#pragma once

#include <cuda_runtime_api.h>  // __host__ / __device__ (empty for a host compiler)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define RR_HD __host__ __device__ __forceinline__
#else
#define RR_HD inline
#endif

namespace ringreduce::cuda {

// The type values are accumulated in: float for the 16-bit floats (one
// rounding at the end, as the host path does), the type itself otherwise.
template <typename T>
struct AccumOf {
  using type = T;
};
template <>
struct AccumOf<__half> {
  using type = float;
};
template <>
struct AccumOf<__nv_bfloat16> {
  using type = float;
};

template <typename A, typename T>
RR_HD A toAccum(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<A>(__half2float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<A>(__bfloat162float(v));
  } else {
    return static_cast<A>(v);
  }
}

// Round to nearest even, as torch's conversions do.
template <typename T, typename A>
RR_HD T fromAccum(A v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename A>
RR_HD bool isNan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

// Unsigned arithmetic for integers: wraps like torch, defined in C++.
template <typename A, bool = std::is_integral_v<A>>
struct WrapTypeOf {
  using type = A;
};
template <typename A>
struct WrapTypeOf<A, true> {
  using type = std::make_unsigned_t<A>;
};
template <typename A>
using WrapOf = typename WrapTypeOf<A>::type;

struct SumOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    return static_cast<A>(static_cast<WrapOf<A>>(a) + static_cast<WrapOf<A>>(b));
  }
};
struct ProductOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    return static_cast<A>(static_cast<WrapOf<A>>(a) * static_cast<WrapOf<A>>(b));
  }
};
struct MinOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    if (isNan(a)) return a;
    if (isNan(b)) return b;
    return b < a ? b : a;
  }
};
struct MaxOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    if (isNan(a)) return a;
    if (isNan(b)) return b;
    return a < b ? b : a;
  }
};
struct BAndOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    return static_cast<A>(a & b);
  }
};
struct BOrOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    return static_cast<A>(a | b);
  }
};
struct BXorOp {
  template <typename A>
  RR_HD A operator()(A a, A b) const {
    return static_cast<A>(a ^ b);
  }
};

// AVG's last step, fused into the store. Integers truncate toward zero.
template <typename A>
RR_HD A divideBy(A v, int divisor) {
  return divisor > 1 ? static_cast<A>(v / static_cast<A>(divisor)) : v;
}

// One output element from `nsrc` inputs: load (widen), reduce in the
// accumulator type, divide for AVG, narrow to the destination type. Sources
// of type S, destination of type D (they differ only for wire casts).
template <typename S, typename D, typename Op>
RR_HD D reduceElement(const S* const* srcs, int nsrc, size_t i, int avgDivisor) {
  using A = typename AccumOf<S>::type;
  A acc = toAccum<A>(srcs[0][i]);
  for (int s = 1; s < nsrc; ++s) acc = Op()(acc, toAccum<A>(srcs[s][i]));
  return fromAccum<D>(divideBy(acc, avgDivisor));
}

}  // namespace ringreduce::cuda
