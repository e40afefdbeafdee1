// The device half of launchSignalOp (signal_launch.cpp checks and routes):
// the kernel's launch for the type's family (signal_kernel.cuh).
#include "cuda/cuda_error.h"
#include "cuda/signal/signal_kernel.cuh"

namespace ringreduce::cuda {

void launchSignalKernel(const SignalView& view, const SignalOp& op, DataType type,
                        ReduceOp reduceOp, void* stream) {
  const auto cudaStream = static_cast<cudaStream_t>(stream);
  if (isIntegral(type)) {
    launchSignalInteger(view, op, type, reduceOp, cudaStream);
  } else {
    launchSignalFloat(view, op, type, reduceOp, cudaStream);
  }
  checkCuda(cudaGetLastError(), "device-flags kernel launch");
}

}  // namespace ringreduce::cuda
