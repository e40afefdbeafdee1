// What one block of the device-flags path does in each collective, written
// once over the memory policy `M` (signal_barrier.h) for the kernels and
// for the host model that ThreadSanitizer checks. Elements of type T are
// combined in A (float for float16/bfloat16) with Op (core/math/element_math.h).
//
// Every collective splits its elements into one contiguous range per block
// (blockRange: the same on every rank, since every rank launches the same
// grid for the same collective), and a block touches only its range: so a
// block meets only the same block of its peers, and needs no other.
//
//   OneShot        copy my range into in[p]; barrier; reduce every rank's
//                  in[p] range into my output. One barrier; N reads per element.
//   TwoShot        copy into in[p]; barrier; reduce my slice of the range from
//                  every rank's in[p] and write it into every rank's out[p];
//                  barrier; copy my out[p] range into my output.
//   InPlaceTwoShot the same on the ranks' own tensors, mapped (no copies):
//                  for tensors larger than the buffers.
//   Allgather      copy into in[p]; barrier; copy every rank's in[p] range
//                  into its block of my output.
//   ReduceScatter  copy every block of my input into in[p]; barrier; reduce
//                  my block of every rank's in[p] into my output.
// p is the collective's parity (signal_pad.h says why no closing barrier).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/reduce_element.cuh"
#include "cuda/kernels/vector_pack.h"
#include "cuda/signal/signal_barrier.h"

// Loops the device compiler unrolls (the host compiler has no such pragma).
#if defined(__CUDACC__)
#define RR_UNROLL _Pragma("unroll")
#else
#define RR_UNROLL
#endif

namespace ringreduce::cuda {

enum class SignalKind : uint8_t { OneShot, TwoShot, InPlaceTwoShot, Allgather, ReduceScatter };

// One collective: a kernel argument beside the SignalView.
struct SignalOp {
  SignalKind kind = SignalKind::OneShot;
  const void* input = nullptr;
  void* output = nullptr;
  void* tensors[kSignalRanks] = {};  // InPlaceTwoShot: every rank's tensor, mapped
  // Elements: of the tensor (allreduce), of each rank's block (allgather,
  // reduce-scatter).
  size_t count = 0;
  int avgDivisor = 0;  // > 1: AVG
  int nblocks = 1;
  // Every pointer the user side of the copies touches is 16-byte aligned
  // (the buffers always are): the copies then move 16-byte packs.
  bool aligned = false;
};

struct ElementRange {
  size_t begin = 0;
  size_t end = 0;
};

// Part `index` of `parts` of [0, count), each part's start a multiple of
// `align` elements, so that vector loads of every part stay aligned.
RR_HOST_DEVICE ElementRange alignedPart(size_t count, int parts, int index, size_t align) {
  const size_t units = (count + align - 1) / align;
  const size_t base = units / parts;
  const size_t extra = units % parts;
  const size_t i = static_cast<size_t>(index);
  const size_t first = i * base + (i < extra ? i : extra);
  const size_t n = base + (i < extra ? 1 : 0);
  ElementRange r;
  r.begin = first * align < count ? first * align : count;
  r.end = (first + n) * align < count ? (first + n) * align : count;
  return r;
}

// dst[i] = src[i] for i in [range), each lane a stride of packs.
template <class M, typename T>
RR_HOST_DEVICE void copyRange(M& m, T* dst, const T* src, ElementRange range, bool aligned) {
  constexpr int V = packElements<T>();
  size_t i = range.begin;
  if (aligned) {
    using P = Pack<T, V>;
    const size_t first = range.begin / V;
    const size_t last = range.end / V;
    for (size_t k = first + m.lane(); k < last; k += m.lanes()) {
      reinterpret_cast<P*>(dst)[k] = reinterpret_cast<const P*>(src)[k];
    }
    i = last * V > range.begin ? last * V : range.begin;
  }
  for (size_t k = i + m.lane(); k < range.end; k += m.lanes()) dst[k] = src[k];
}

// Every destination gets the reduction of every source, element by element,
// accumulated in A and, for AVG, divided once.
template <class M, typename T, typename A, class Op>
RR_HOST_DEVICE void reduceRange(M& m, T* const* dsts, int ndst, const T* const* srcs, int nsrc,
                                ElementRange range, bool aligned, int avgDivisor) {
  constexpr int V = packElements<T>();
  size_t i = range.begin;
  if (aligned) {
    using P = Pack<T, V>;
    const size_t first = range.begin / V;
    const size_t last = range.end / V;
    for (size_t k = first + m.lane(); k < last; k += m.lanes()) {
      P in[kSignalRanks] = {};
RR_UNROLL
      for (int s = 0; s < kSignalRanks; ++s) {
        if (s < nsrc) in[s] = reinterpret_cast<const P*>(srcs[s])[k];
      }
      P out;
RR_UNROLL
      for (int e = 0; e < V; ++e) {
        A acc = toAccum<A>(in[0].v[e]);
RR_UNROLL
        for (int s = 1; s < kSignalRanks; ++s) {
          if (s < nsrc) acc = Op()(acc, toAccum<A>(in[s].v[e]));
        }
        out.v[e] = fromAccum<T>(applyAvgDivisor(acc, avgDivisor));
      }
RR_UNROLL
      for (int d = 0; d < kSignalRanks; ++d) {
        if (d < ndst) reinterpret_cast<P*>(dsts[d])[k] = out;
      }
    }
    i = last * V > range.begin ? last * V : range.begin;
  }
  for (size_t k = i + m.lane(); k < range.end; k += m.lanes()) {
    const T value = reduceElement<T, T, Op>(srcs, nsrc, k, avgDivisor);
    for (int d = 0; d < ndst; ++d) dsts[d][k] = value;
  }
}

template <typename T>
RR_HOST_DEVICE T* bufferOf(const SignalView& v, int rank, SignalBuffer kind, uint32_t parity) {
  return signalBuffer<T>(v.regions[rank], v.bufferBytes, kind, parity);
}

template <typename T>
RR_HOST_DEVICE T* offsetBy(T* p, size_t elements) {
  return p + elements;
}

// One block's part of collective `op`. Every lane of the block calls it.
template <class M, typename T, typename A, class Op>
RR_HOST_DEVICE void runSignalBlock(M& m, const SignalView& v, const SignalOp& op, int block) {
  constexpr int V = packElements<T>();
  const uint64_t collective64 = beginSignalCollective(m, v, block);
  if (collective64 == 0) return;
  const auto collective = static_cast<uint32_t>(collective64);
  const uint32_t parity = collective & 1;
  const ElementRange range = alignedPart(op.count, op.nblocks, block, V);
  const T* input = static_cast<const T*>(op.input);
  T* output = static_cast<T*>(op.output);
  T* mine = bufferOf<T>(v, v.rank, SignalBuffer::In, parity);
  T* srcs[kSignalRanks];
  T* dsts[kSignalRanks];
  const int n = v.nranks;

  switch (op.kind) {
    case SignalKind::OneShot: {
      copyRange(m, mine, input, range, op.aligned);
      if (!signalBarrier(m, v, 0, block, collective)) break;
      for (int p = 0; p < n; ++p) srcs[p] = bufferOf<T>(v, p, SignalBuffer::In, parity);
      dsts[0] = output;
      reduceRange<M, T, A, Op>(m, dsts, 1, srcs, n, range, op.aligned, op.avgDivisor);
      break;
    }
    case SignalKind::TwoShot:
    case SignalKind::InPlaceTwoShot: {
      const bool inPlace = op.kind == SignalKind::InPlaceTwoShot;
      if (!inPlace) copyRange(m, mine, input, range, op.aligned);
      if (!signalBarrier(m, v, 0, block, collective)) break;
      // My slice of the block's range.
      const ElementRange part = alignedPart(range.end - range.begin, n, v.rank, V);
      const ElementRange slice{range.begin + part.begin, range.begin + part.end};
      for (int p = 0; p < n; ++p) {
        srcs[p] = inPlace ? static_cast<T*>(op.tensors[p])
                          : bufferOf<T>(v, p, SignalBuffer::In, parity);
        dsts[p] = inPlace ? static_cast<T*>(op.tensors[p])
                          : bufferOf<T>(v, p, SignalBuffer::Out, parity);
      }
      reduceRange<M, T, A, Op>(m, dsts, n, srcs, n, slice, inPlace ? op.aligned : true,
                               op.avgDivisor);
      m.jitter();
      if (!signalBarrier(m, v, 1, block, collective)) break;
      if (!inPlace) {
        copyRange(m, output, bufferOf<T>(v, v.rank, SignalBuffer::Out, parity), range,
                  op.aligned);
      }
      break;
    }
    case SignalKind::Allgather: {
      copyRange(m, mine, input, range, op.aligned);
      if (!signalBarrier(m, v, 0, block, collective)) break;
      for (int p = 0; p < n; ++p) {
        copyRange(m, offsetBy(output, static_cast<size_t>(p) * op.count),
                  bufferOf<T>(v, p, SignalBuffer::In, parity), range, op.aligned);
      }
      break;
    }
    case SignalKind::ReduceScatter: {
      for (int q = 0; q < n; ++q) {
        const size_t at = static_cast<size_t>(q) * op.count;
        copyRange(m, offsetBy(mine, at), offsetBy(input, at), range, op.aligned);
      }
      if (!signalBarrier(m, v, 0, block, collective)) break;
      const size_t at = static_cast<size_t>(v.rank) * op.count;
      for (int p = 0; p < n; ++p) {
        srcs[p] = offsetBy(bufferOf<T>(v, p, SignalBuffer::In, parity), at);
      }
      dsts[0] = output;
      reduceRange<M, T, A, Op>(m, dsts, 1, srcs, n, range, op.aligned, op.avgDivisor);
      break;
    }
  }
  endSignalCollective(m, v, op.nblocks, collective64);
}

}  // namespace ringreduce::cuda
