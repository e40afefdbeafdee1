// Stream memory operations through the runtime's driver entry points (stream_memops.h)
#include "cuda/signal/stream_memops.h"

#include <cuda.h>  // types of the driver entry points only
#include <cuda_runtime_api.h>

#include "core/base/errors.h"
#include "cuda/cuda_error.h"

namespace ringreduce::cuda {

namespace {

using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct MemOps {
  WriteValue32 write = nullptr;
  WaitValue32 wait = nullptr;
  std::string why;
};

void* entryPoint(const char* name, std::string* why) {
  void* symbol = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(name, &symbol, 12000, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || symbol == nullptr) {
    (void)cudaGetLastError();
    if (why->empty()) *why = std::string("the CUDA driver does not provide ") + name;
    return nullptr;
  }
  return symbol;
}

const MemOps& memOps() {
  static const MemOps ops = [] {
    MemOps o;
    o.write = reinterpret_cast<WriteValue32>(entryPoint("cuStreamWriteValue32", &o.why));
    o.wait = reinterpret_cast<WaitValue32>(entryPoint("cuStreamWaitValue32", &o.why));
    return o;
  }();
  return ops;
}

void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    throw Error(std::string("ringreduce: ") + what + " failed (CUDA driver error " +
                std::to_string(static_cast<int>(result)) + ")");
  }
}

}  // namespace

bool streamMemOpsAvailable(std::string* why) {
  const MemOps& ops = memOps();
  if (ops.write != nullptr && ops.wait != nullptr) return true;
  if (why) *why = ops.why;
  return false;
}

void streamWriteValue32(void* stream, uint32_t* address, uint32_t value) {
  const MemOps& ops = memOps();
  if (ops.write == nullptr) throw Error("ringreduce: " + ops.why);
  check(ops.write(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address), value,
                  CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue32");
}

void streamWaitValue32(void* stream, const uint32_t* address, uint32_t value) {
  const MemOps& ops = memOps();
  if (ops.wait == nullptr) throw Error("ringreduce: " + ops.why);
  check(ops.wait(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address), value,
                 CU_STREAM_WAIT_VALUE_GEQ),
        "cuStreamWaitValue32");
}

void streamWaitValue32Equal(void* stream, const uint32_t* address, uint32_t value) {
  const MemOps& ops = memOps();
  if (ops.wait == nullptr) throw Error("ringreduce: " + ops.why);
  check(ops.wait(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address), value,
                 CU_STREAM_WAIT_VALUE_EQ),
        "cuStreamWaitValue32");
}

}  // namespace ringreduce::cuda
