// Device memory and events shared between one node's processes by CUDA IPC (ipc_memory.h)
#include "cuda/ipc/ipc_memory.h"

#include <cuda.h>  // types of the driver entry point only; libcuda is reached through cudart
#include <cuda_runtime_api.h>

#include <cstring>

#include "cuda/cuda_error.h"
#include "cuda/device_scope.h"

namespace ringreduce::cuda {

namespace {

using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange through the runtime's entry-point query: the offset
// of a pointer in its allocation, without linking the driver library.
GetAddressRange addressRangeFunction() {
  static GetAddressRange fn = [] {
    void* symbol = nullptr;
    cudaDriverEntryPointQueryResult found{};
    checkCuda(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &symbol, 12000,
                                               cudaEnableDefault, &found),
              "cudaGetDriverEntryPointByVersion(cuMemGetAddressRange)");
    if (found != cudaDriverEntryPointSuccess || symbol == nullptr) {
      throw Error("ringreduce: the CUDA driver does not provide cuMemGetAddressRange");
    }
    return reinterpret_cast<GetAddressRange>(symbol);
  }();
  return fn;
}

}  // namespace

ExportedRange exportRange(int device, const void* ptr, std::string* why) {
  DeviceScope scope(device);
  ExportedRange range;
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult found =
      addressRangeFunction()(&base, &size, reinterpret_cast<CUdeviceptr>(ptr));
  if (found != CUDA_SUCCESS) {
    if (why) *why = "cuMemGetAddressRange failed (error " + std::to_string(found) + ")";
    return range;
  }
  cudaIpcMemHandle_t handle;
  const cudaError_t status = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it for the next call
    if (why) {
      *why = std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(status) +
             " (expandable segments and managed memory cannot be shared)";
    }
    return range;
  }
  static_assert(sizeof(handle) == kIpcHandleBytes, "unexpected cudaIpcMemHandle_t size");
  std::memcpy(range.handle.data(), &handle, kIpcHandleBytes);
  range.offset = reinterpret_cast<uintptr_t>(ptr) - static_cast<uintptr_t>(base);
  range.ok = 1;
  return range;
}

void copyOnStream(int device, void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  DeviceScope scope(device);
  checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                            static_cast<cudaStream_t>(stream)),
            "cudaMemcpyAsync (device to device)");
}

void fillOnStream(int device, void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return;
  DeviceScope scope(device);
  checkCuda(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
            "cudaMemsetAsync");
}

void synchronizeStream(int device, void* stream) {
  DeviceScope scope(device);
  checkCuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

PinnedMirror::PinnedMirror(int device, size_t bytes) {
  DeviceScope scope(device);
  checkCuda(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped), "cudaHostAlloc (mapped)");
  std::memset(host_, 0, bytes);
  checkCuda(cudaHostGetDevicePointer(&device_, host_, 0), "cudaHostGetDevicePointer");
}

PinnedMirror::~PinnedMirror() {
  if (host_ != nullptr) (void)cudaFreeHost(host_);
}

void* PeerMappings::map(const ExportedRange& range) {
  auto it = open_.find(range.handle);
  if (it == open_.end()) {
    DeviceScope scope(device_);
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, range.handle.data(), kIpcHandleBytes);
    void* base = nullptr;
    checkCuda(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess),
              "cudaIpcOpenMemHandle (a peer's buffer)");
    it = open_.emplace(range.handle, base).first;
  }
  return static_cast<uint8_t*>(it->second) + range.offset;
}

void PeerMappings::closeAll() {
  if (open_.empty()) return;
  DeviceScope scope(device_);
  for (auto& [handle, base] : open_) (void)cudaIpcCloseMemHandle(base);
  open_.clear();
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
  DeviceScope scope(device);
  checkCuda(cudaMalloc(&data_, bytes), "cudaMalloc (ringreduce scratch buffer)");
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr || shared_) return;
  DeviceScope scope(device_);
  (void)cudaFree(data_);
}

ExportedRange DeviceBuffer::exported() {
  std::string why;
  ExportedRange range = exportRange(device_, data_, &why);
  if (!range.ok) throw Error("ringreduce: cannot share the scratch buffer: " + why);
  shared_ = true;
  return range;
}

SharedEvent::SharedEvent(int device) : device_(device) {
  DeviceScope scope(device);
  cudaEvent_t event;
  checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventInterprocess),
            "cudaEventCreateWithFlags(interprocess)");
  event_ = event;
  cudaIpcEventHandle_t handle;
  checkCuda(cudaIpcGetEventHandle(&handle, event), "cudaIpcGetEventHandle");
  static_assert(sizeof(handle) == kIpcHandleBytes, "unexpected cudaIpcEventHandle_t size");
  std::memcpy(handle_.data(), &handle, kIpcHandleBytes);
}

// Deliberately not destroyed: a peer may still be about to wait on this
// event for the group's last operation when this rank tears the group down
// (it has sent its last record; the peer has received it but not yet made
// its stream wait), and waiting on a destroyed interprocess event is
// undefined. Two small events per group are left to the process.
SharedEvent::~SharedEvent() = default;

void SharedEvent::record(void* stream) {
  DeviceScope scope(device_);
  checkCuda(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
            "cudaEventRecord(interprocess event)");
}

PeerEvent::PeerEvent(int device, const IpcHandle& handle) : device_(device) {
  DeviceScope scope(device);
  cudaIpcEventHandle_t h;
  std::memcpy(&h, handle.data(), kIpcHandleBytes);
  cudaEvent_t event;
  checkCuda(cudaIpcOpenEventHandle(&event, h), "cudaIpcOpenEventHandle (a peer's event)");
  event_ = event;
}

PeerEvent::~PeerEvent() {
  DeviceScope scope(device_);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void PeerEvent::waitOn(void* stream) {
  DeviceScope scope(device_);
  checkCuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                static_cast<cudaEvent_t>(event_), 0),
            "cudaStreamWaitEvent(a peer's event)");
}

}  // namespace ringreduce::cuda
