// Argument checks and routing of launchReduceCopy (the kernel itself is in
// reduce_copy_kernel.cuh).
#include <array>
#include <mutex>

#include "cuda/cuda_error.h"
#include "cuda/device_scope.h"
#include "cuda/kernels/reduce_copy_kernel.cuh"

namespace ringreduce::cuda {

int multiprocessorCount(int device) {
  static std::mutex mutex;
  static std::array<int, 64> cached{};
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0 || device >= static_cast<int>(cached.size())) return 32;
  if (cached[device] == 0) {
    int count = 0;
    checkCuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
              "cudaDeviceGetAttribute(multiprocessor count)");
    cached[device] = count > 0 ? count : 1;
  }
  return cached[device];
}

void launchReduceCopy(const ReduceCopyArgs& given, int device, void* stream) {
  const std::string problem = reduceCopyArgsProblem(given);
  if (!problem.empty()) throw InvalidArgument("ringreduce: " + problem);
  if (given.count == 0 || given.ndst == 0) return;
  DeviceScope scope(device);
  ReduceCopyArgs args = given;
  // Complex SUM/AVG: interleaved (re, im) pairs reduce as twice as many reals.
  if (args.srcType == DataType::Complex64 || args.srcType == DataType::Complex128) {
    args.srcType = args.dstType =
        args.srcType == DataType::Complex64 ? DataType::Float32 : DataType::Float64;
    args.count *= 2;
  }
  // Bool holds 0/1 bytes: reduced as uint8 with its logical op.
  if (args.srcType == DataType::Bool) {
    args.srcType = args.dstType = DataType::UInt8;
    args.op = boolOperator(args.op);
  }
  auto cudaStream = static_cast<cudaStream_t>(stream);
  if (isIntegral(args.srcType) && args.srcType == args.dstType) {
    launchIntegerFamily(args, device, cudaStream);
  } else {
    launchFloatFamily(args, device, cudaStream);
  }
}

}  // namespace ringreduce::cuda
