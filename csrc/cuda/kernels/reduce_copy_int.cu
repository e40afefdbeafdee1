// Instantiations for the integer types (bool arrives as uint8 with a logical op).
#include "cuda/kernels/reduce_copy_kernel.cuh"

namespace ringreduce::cuda {

void launchIntegerFamily(const ReduceCopyArgs& args, int device, cudaStream_t stream) {
  switch (args.srcType) {
    case DataType::Int8: return launchSameType<int8_t>(args, device, stream);
    case DataType::UInt8: return launchSameType<uint8_t>(args, device, stream);
    case DataType::Int16: return launchSameType<int16_t>(args, device, stream);
    case DataType::Int32: return launchSameType<int32_t>(args, device, stream);
    case DataType::Int64: return launchSameType<int64_t>(args, device, stream);
    default: break;
  }
  throw InvalidArgument(std::string("ringreduce: no integer device kernel for ") +
                        dataTypeName(args.srcType));
}

}  // namespace ringreduce::cuda
