// One rank of a device-flags group on the fake device (fake_device.h), set
// up as the backend sets it up and warmed by one collective, for what the
// steady state of an on-caller collective costs: the counting tests
// (test_on_caller_call_counts.cpp) and the host-cost benchmark
// (benchmarks/cpp/on_caller_host_cost.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "core/base/errors.h"
#include "cuda/current_device.h"
#include "cuda/path_selection.h"
#include "fake_device_context.h"
#include "rank_threads.h"

namespace ringreduce::testing {

// Small enough for one block (so the fake runs the kernel on the calling
// thread) and for the one-shot.
constexpr size_t kOnCallerCount = 256;

class OnCallerRank {
 public:
  // Rank `rank` of `n` on device `rank`, current on this thread (as torch
  // makes the tensor's device current); the flags path asked for, so it
  // runs or the set-up throws. `sync`: how ranks meet (RINGREDUCE_CUDA_SYNC;
  // Auto: flags, one GPU per rank).
  OnCallerRank(Transport& t, int rank, int n, CudaSync sync = CudaSync::Auto)
      : transport_(t), rank_(rank) {
    fakeProcess(rank);
    cuda::makeCurrent(rank);
    Config config;
    config.cudaAlgorithm = CudaAlgorithm::Flags;
    config.cudaSync = sync;
    config.resolveDeviceFlags(true, n);
    config.cudaBufferBytes = 64 * 1024;
    paths_ = std::make_unique<cuda::PathSelection>(rank, n, rank, config, exchangeFor(t, 1));
    // The first collective sets the group up (every rank, collectively).
    std::vector<float> warm(kOnCallerCount, 1.f);
    const DevicePathTaken ran =
        paths_->allreduce(warm.data(), warm.size(), DataType::Float32, ReduceOp::Sum, stream(),
                          exchangeFor(t, 2), call(1));
    if (ran != DevicePathTaken::FlagsOneShot) {
      throw Error("the device-flags path did not set up: " + paths_->describe());
    }
  }
  ~OnCallerRank() {
    try {
      paths_->close(exchangeFor(transport_, 3), std::chrono::seconds(10));
    } catch (...) {
      // A test that failed already says why.
    }
  }

  cuda::PathSelection& paths() { return *paths_; }
  // An on-caller allreduce of kOnCallerCount floats on stream().
  DevicePathTaken allreduce(const float* input, float* output, ReduceOp op,
                            uint32_t fingerprint) {
    return paths_->allreduceOnCaller(input, output, kOnCallerCount, DataType::Float32, op, stream(),
                                     call(fingerprint));
  }
  int rank() const { return rank_; }
  // The caller's stream: the fake never runs anything on it.
  static void* stream() { return reinterpret_cast<void*>(0x5eed); }
  static cuda::CollectiveCall call(uint32_t fingerprint) {
    cuda::CollectiveCall c;
    c.fingerprint = fingerprint;
    c.timeout = std::chrono::seconds(20);
    return c;
  }

 private:
  Transport& transport_;
  const int rank_;
  std::unique_ptr<cuda::PathSelection> paths_;
};

}  // namespace ringreduce::testing
