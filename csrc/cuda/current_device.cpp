// The runtime calls that decide which device a thread uses (current_device.h)
#include "cuda/current_device.h"

#include <cuda.h>  // types of the driver entry points only
#include <cuda_runtime_api.h>

#include "cuda/cuda_error.h"

namespace ringreduce::cuda {

namespace {

using DeviceGet = CUresult (*)(CUdevice*, int);
using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);

// The driver's own answer, reached through the runtime (which we link
// statically), so that nothing links libcuda: torch's hasPrimaryContext
// asks the same function.
struct PrimaryContextQuery {
  DeviceGet deviceGet = nullptr;
  PrimaryCtxGetState getState = nullptr;
};

void* driverEntryPoint(const char* name) {
  void* symbol = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &symbol, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return symbol;
}

const PrimaryContextQuery& primaryContextQuery() {
  static const PrimaryContextQuery query = [] {
    PrimaryContextQuery q;
    q.deviceGet = reinterpret_cast<DeviceGet>(driverEntryPoint("cuDeviceGet"));
    q.getState = reinterpret_cast<PrimaryCtxGetState>(driverEntryPoint("cuDevicePrimaryCtxGetState"));
    return q;
  }();
  return query;
}

}  // namespace

int currentDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

void makeCurrent(int device) { checkCuda(cudaSetDevice(device), "cudaSetDevice"); }

bool hasPrimaryContext(int device) {
  const PrimaryContextQuery& query = primaryContextQuery();
  if (query.deviceGet == nullptr || query.getState == nullptr || device < 0) return false;
  CUdevice handle = 0;
  if (query.deviceGet(&handle, device) != CUDA_SUCCESS) return false;
  unsigned int flags = 0;
  int active = 0;
  return query.getState(handle, &flags, &active) == CUDA_SUCCESS && active != 0;
}

}  // namespace ringreduce::cuda
