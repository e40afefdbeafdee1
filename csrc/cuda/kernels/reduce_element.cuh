// One element of the fused reduce-copy kernel: widen each source to the
// accumulation type, combine with the rules of core/math/element_math.h (the ones
// the host loops use), finish AVG, narrow to the destination type. Shared by
// the device code and its host unit tests (the same templates, so a GPU-less
// CI still checks the arithmetic: float32 accumulation of float16/bfloat16,
// AVG's division, wire casts). Bool arrives as uint8 with the logical op of
// boolOperator() (the launcher maps it).
#pragma once

#include <cuda_runtime_api.h>  // __host__ / __device__ (empty for a host compiler)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "core/math/element_math.h"

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
RR_HOST_DEVICE A toAccum(T v) {
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
RR_HOST_DEVICE T fromAccum(A v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// AVG's division fused into the store; avgDivisor <= 1 means no AVG.
template <typename A>
RR_HOST_DEVICE A applyAvgDivisor(A v, int avgDivisor) {
  return avgDivisor > 1 ? divideBy(v, static_cast<A>(avgDivisor)) : v;
}

// One output element from `nsrc` inputs: load (widen), reduce in the
// accumulator type, divide for AVG, narrow to the destination type. Sources
// of type S, destination of type D (they differ only for wire casts).
template <typename S, typename D, typename Op>
RR_HOST_DEVICE D reduceElement(const S* const* srcs, int nsrc, size_t i, int avgDivisor) {
  using A = typename AccumOf<S>::type;
  A acc = toAccum<A>(srcs[0][i]);
  for (int s = 1; s < nsrc; ++s) acc = Op()(acc, toAccum<A>(srcs[s][i]));
  return fromAccum<D>(applyAvgDivisor(acc, avgDivisor));
}

}  // namespace ringreduce::cuda
