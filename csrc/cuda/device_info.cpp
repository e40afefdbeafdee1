#include "cuda/device_info.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "cuda/cuda_error.h"

namespace ringreduce::cuda {

namespace {

std::string versionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

int visibleDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = cudaGetErrorString(status);
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device";
  return count;
}

std::string runtimeDescription() {
  std::string text = "runtime " + versionText(CUDART_VERSION) + " (linked statically)";
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    text += ", driver " + versionText(driver);
  } else {
    (void)cudaGetLastError();
    text += ", no driver";
    return text;
  }
  std::string why;
  const int count = visibleDeviceCount(&why);
  text += ", " + std::to_string(count) + " device(s)";
  if (count == 0) text += " (" + why + ")";
  return text;
}

std::array<uint8_t, 16> deviceUuid(int device) {
  cudaDeviceProp prop;
  checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::array<uint8_t, 16> uuid{};
  static_assert(sizeof(prop.uuid) == 16, "unexpected cudaUUID_t size");
  std::memcpy(uuid.data(), &prop.uuid, 16);
  return uuid;
}

}  // namespace ringreduce::cuda
