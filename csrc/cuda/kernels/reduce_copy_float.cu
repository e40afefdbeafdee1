// Instantiations for the floating-point types and the float32 wire casts.
#include "cuda/kernels/reduce_copy_kernel.cuh"

namespace ringreduce::cuda {

void launchFloatFamily(const ReduceCopyArgs& args, int device, cudaStream_t stream) {
  const DataType s = args.srcType;
  const DataType d = args.dstType;
  if (s == d) {
    switch (s) {
      case DataType::Float32: return launchSameType<float>(args, device, stream);
      case DataType::Float64: return launchSameType<double>(args, device, stream);
      case DataType::Float16: return launchSameType<__half>(args, device, stream);
      case DataType::BFloat16: return launchSameType<__nv_bfloat16>(args, device, stream);
      default: break;
    }
  }
  // Wire casts: float32 data sent as 16-bit floats and summed back in float32.
  if (s == DataType::Float32 && d == DataType::Float16) {
    return launchTyped<float, __half, SumOp>(args, device, stream);
  }
  if (s == DataType::Float32 && d == DataType::BFloat16) {
    return launchTyped<float, __nv_bfloat16, SumOp>(args, device, stream);
  }
  if (s == DataType::Float16 && d == DataType::Float32) {
    return launchTyped<__half, float, SumOp>(args, device, stream);
  }
  if (s == DataType::BFloat16 && d == DataType::Float32) {
    return launchTyped<__nv_bfloat16, float, SumOp>(args, device, stream);
  }
  throw InvalidArgument(std::string("ringreduce: no device kernel from ") + dataTypeName(s) +
                        " to " + dataTypeName(d));
}

}  // namespace ringreduce::cuda
