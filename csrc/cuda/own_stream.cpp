// A CUDA stream of the group's own, not one of torch's pooled streams (own_stream.h)
#include "cuda/own_stream.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_error.h"
#include "cuda/device_scope.h"

namespace ringreduce::cuda {

void* createOwnStream(int device) {
  DeviceScope scope(device);
  cudaStream_t stream;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags (the group's stream)");
  return stream;
}

void destroyOwnStream(int device, void* stream) {
  DeviceScope scope(device);
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

bool streamCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace ringreduce::cuda
