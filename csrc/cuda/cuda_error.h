// CUDA runtime status -> ringreduce::Error with a message a user can act on.
// Only .cu/.cpp files of csrc/cuda include this (it needs the toolkit).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/base/errors.h"

namespace ringreduce::cuda {

[[noreturn]] inline void throwCudaError(cudaError_t status, const char* what) {
  throw Error(std::string("ringreduce: CUDA ") + what + " failed: " + cudaGetErrorName(status) +
              " (" + cudaGetErrorString(status) + ")");
}

inline void checkCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throwCudaError(status, what);
}

}  // namespace ringreduce::cuda
