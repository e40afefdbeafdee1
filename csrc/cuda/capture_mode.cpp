// Event queries made harmless to a CUDA graph another thread captures (capture_mode.h)
#include "cuda/capture_mode.h"

#include <cuda_runtime_api.h>

namespace ringreduce::cuda {

ThreadLocalCaptureMode::ThreadLocalCaptureMode() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) {
    previous_ = static_cast<int>(mode);
  } else {
    (void)cudaGetLastError();
  }
}

ThreadLocalCaptureMode::~ThreadLocalCaptureMode() {
  if (previous_ < 0) return;
  auto mode = static_cast<cudaStreamCaptureMode>(previous_);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace ringreduce::cuda
