// The fused reduce-copy kernel template (see reduce_copy.h) and its
// launcher. Included by the .cu files that instantiate it per type family,
// so the two families compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "cuda/cuda_error.h"
#include "cuda/kernels/operator_dispatch.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/kernels/reduce_element.cuh"
#include "cuda/kernels/vector_pack.h"

namespace ringreduce::cuda {

constexpr int kReduceThreads = 512;


template <typename S, typename D>
struct KernelParams {
  const S* srcs[kMaxFanout];
  D* dsts[kMaxFanout];
  int nsrc;
  int ndst;
  size_t count;
  int avgDivisor;
  bool vectorized;
  const uint32_t* stop;
};

template <typename S, typename D, typename Op>
__global__ void __launch_bounds__(kReduceThreads) reduceCopyKernel(KernelParams<S, D> p) {
  using A = typename AccumOf<S>::type;
  constexpr int V = 16 / sizeof(S);
  if (p.stop != nullptr && *reinterpret_cast<const volatile uint32_t*>(p.stop) != 0) return;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (p.vectorized) {
    const size_t nvec = p.count / V;
    for (size_t i = first; i < nvec; i += stride) {
      // All loads first: up to kMaxFanout 16-byte loads in flight per thread.
      Pack<S, V> in[kMaxFanout];
#pragma unroll
      for (int s = 0; s < kMaxFanout; ++s) {
        if (s < p.nsrc) in[s] = reinterpret_cast<const Pack<S, V>*>(p.srcs[s])[i];
      }
      Pack<D, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        A acc = toAccum<A>(in[0].v[e]);
#pragma unroll
        for (int s = 1; s < kMaxFanout; ++s) {
          if (s < p.nsrc) acc = Op()(acc, toAccum<A>(in[s].v[e]));
        }
        out.v[e] = fromAccum<D>(applyAvgDivisor(acc, p.avgDivisor));
      }
#pragma unroll
      for (int d = 0; d < kMaxFanout; ++d) {
        if (d < p.ndst) reinterpret_cast<Pack<D, V>*>(p.dsts[d])[i] = out;
      }
    }
    done = nvec * V;
  }
  // The tail (or everything, for unaligned pointers): one element a thread.
  for (size_t i = done + first; i < p.count; i += stride) {
    const D value = reduceElement<S, D, Op>(p.srcs, p.nsrc, i, p.avgDivisor);
    for (int d = 0; d < p.ndst; ++d) p.dsts[d][i] = value;
  }
}

int multiprocessorCount(int device);  // cached per device (reduce_copy_launch.cu)

template <typename S, typename D, typename Op>
void launchTyped(const ReduceCopyArgs& args, int device, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(S);
  KernelParams<S, D> p{};
  bool aligned = true;
  for (int s = 0; s < args.nsrc; ++s) {
    p.srcs[s] = static_cast<const S*>(args.srcs[s]);
    aligned = aligned && reinterpret_cast<uintptr_t>(args.srcs[s]) % alignof(Pack<S, V>) == 0;
  }
  for (int d = 0; d < args.ndst; ++d) {
    p.dsts[d] = static_cast<D*>(args.dsts[d]);
    aligned = aligned && reinterpret_cast<uintptr_t>(args.dsts[d]) % alignof(Pack<D, V>) == 0;
  }
  p.nsrc = args.nsrc;
  p.ndst = args.ndst;
  p.count = args.count;
  p.avgDivisor = args.avgDivisor;
  p.vectorized = aligned;
  p.stop = args.stop;
  const size_t work = aligned ? args.count / V + args.count % V : args.count;
  // Enough blocks to fill every SM a few times over; the grid-stride loop
  // covers the rest. More would only add scheduling overhead.
  const size_t wanted = (work + kReduceThreads - 1) / kReduceThreads;
  const size_t limit = static_cast<size_t>(multiprocessorCount(device)) * 4;
  const unsigned blocks = static_cast<unsigned>(wanted < limit ? (wanted > 0 ? wanted : 1) : limit);
  reduceCopyKernel<S, D, Op><<<blocks, kReduceThreads, 0, stream>>>(p);
  checkCuda(cudaGetLastError(), "reduce-copy kernel launch");
}

// Picks the operator functor for a same-type reduction.
template <typename T>
void launchSameType(const ReduceCopyArgs& args, int device, cudaStream_t stream) {
  const bool known = withOperator<T>(args.op, [&](auto functor) {
    launchTyped<T, T, decltype(functor)>(args, device, stream);
  });
  if (!known) {
    throw InvalidArgument(std::string("ringreduce: no device kernel for ") +
                          reduceOpName(args.op));
  }
}

// Per-family entry points (reduce_copy_float.cu, reduce_copy_int.cu).
void launchFloatFamily(const ReduceCopyArgs& args, int device, cudaStream_t stream);
void launchIntegerFamily(const ReduceCopyArgs& args, int device, cudaStream_t stream);

}  // namespace ringreduce::cuda
