// The memory policy of the device-flags protocol on the GPU (see
// signal_barrier.h): a CUDA block's threads are its lanes; arrivals are
// system-scope release stores and acquire loads (the peers are other
// processes, possibly on other GPUs over NVLink or PCIe); the host's words
// (stop, status) live in pinned host memory mapped into the device and are
// reached through generic addresses; time is %globaltimer, in nanoseconds.
//
// Why a block barrier before the release store (syncBlock in
// signalBarrier): the data a block's other threads wrote must be visible to
// a peer that sees the arrival. bar.sync orders those writes before the
// lane's release, and a release is cumulative over what its thread has
// observed, so the peer's acquire sees them (the pattern vLLM's and PyTorch's
// symmetric-memory barriers use).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/signal/signal_pad.h"

namespace ringreduce::cuda {

struct DeviceSignalMemory {
  __device__ __forceinline__ int lane() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int lanes() const { return static_cast<int>(blockDim.x); }
  __device__ __forceinline__ void syncBlock() const { __syncthreads(); }
  __device__ __forceinline__ int syncBlockOr(int value) const { return __syncthreads_or(value); }
  __device__ __forceinline__ void jitter() const {}
  __device__ __forceinline__ void pause() const { __nanosleep(32); }

  __device__ __forceinline__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) const {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) const {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  // Generic addresses: these words may be in pinned host memory.
  __device__ __forceinline__ uint32_t loadRelaxed32(const uint32_t* p) const {
    uint32_t v;
    asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ void storeRelaxed32(uint32_t* p, uint32_t v) const {
    asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ __forceinline__ void storeStatus(SignalStatus* s, uint64_t word, uint64_t seen) const {
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(&s->seen), "l"(seen) : "memory");
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(&s->word), "l"(word) : "memory");
  }
  // The collective count: written by an earlier kernel of this rank, read
  // and advanced by this one (stream order makes it visible).
  __device__ __forceinline__ uint64_t loadPlain64(const uint64_t* p) const {
    return *reinterpret_cast<const volatile uint64_t*>(p);
  }
  __device__ __forceinline__ void storePlain64(uint64_t* p, uint64_t v) const {
    *reinterpret_cast<volatile uint64_t*>(p) = v;
  }
  __device__ __forceinline__ uint32_t fetchAddAcqRel32(uint32_t* p, uint32_t v) const {
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(p), "r"(v)
                 : "memory");
    return old;
  }
};

}  // namespace ringreduce::cuda
