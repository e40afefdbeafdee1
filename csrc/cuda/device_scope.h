// Makes `device` current for a scope and restores the caller's device after
// it: our calls run on the caller's thread (torch's, in the fast path), and
// changing its current device under it would move the user's next tensor.
// Only .cu/.cpp files of csrc/cuda include this (it needs the toolkit).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/cuda_error.h"

namespace ringreduce::cuda {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) {
      checkCuda(cudaSetDevice(device), "cudaSetDevice");
      changed_ = previous_ >= 0;
    }
  }
  ~DeviceScope() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace ringreduce::cuda
