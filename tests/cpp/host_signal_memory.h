// The host memory policy of the device-flags protocol
// (csrc/cuda/signal/signal_barrier.h): one thread stands for a CUDA block
// (one lane), the flag accesses are std::atomic_ref with the orders the PTX
// uses, and everything else is a plain access, so ThreadSanitizer reports a
// data race wherever the protocol fails to order a peer's access to a
// buffer. jitter() and pause() sleep for random short times, so ranks and
// blocks drift apart (one a collective ahead, one late to every barrier).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

#include "cuda/signal/signal_pad.h"

namespace ringreduce::testing {

class HostSignalMemory {
 public:
  // `jitterUs`: the longest random pause at each jitter point (0: none).
  HostSignalMemory(uint32_t seed, int jitterUs) : rng_(seed), jitterUs_(jitterUs) {}

  int lane() const { return 0; }
  int lanes() const { return 1; }
  void syncBlock() {}
  int syncBlockOr(int value) { return value; }
  void jitter() {
    if (jitterUs_ <= 0) return;
    const int us = static_cast<int>(rng_() % static_cast<uint32_t>(jitterUs_ + 1));
    if (us < jitterUs_ / 4) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
  }
  void pause() { std::this_thread::yield(); }

  uint64_t nowNs() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  void storeRelease(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  uint64_t loadAcquire(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  uint32_t loadRelaxed32(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
  }
  void storeRelaxed32(uint32_t* p, uint32_t v) {
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed);
  }
  void storeStatus(cuda::SignalStatus* s, uint64_t word, uint64_t seen) {
    std::atomic_ref<uint64_t>(s->seen).store(seen, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(s->word).store(word, std::memory_order_relaxed);
  }
  // Plain, as on the device: ThreadSanitizer checks that the count is
  // ordered by the blocks' acquire-release chain and the kernels' order.
  uint64_t loadPlain64(const uint64_t* p) { return *p; }
  void storePlain64(uint64_t* p, uint64_t v) { *p = v; }
  uint32_t fetchAddAcqRel32(uint32_t* p, uint32_t v) {
    return std::atomic_ref<uint32_t>(*p).fetch_add(v, std::memory_order_acq_rel);
  }

 private:
  std::mt19937 rng_;
  int jitterUs_;
};

}  // namespace ringreduce::testing
