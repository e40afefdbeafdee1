// Instantiations of the device-flags kernel for the integer types (bool
// arrives as uint8 with its logical op; an allgather as uint8 bytes).
#include "cuda/signal/signal_kernel.cuh"

namespace ringreduce::cuda {

void launchSignalInteger(const SignalView& view, const SignalOp& op, DataType type,
                         ReduceOp reduceOp, cudaStream_t stream) {
  switch (type) {
    case DataType::Int8: return launchSignalForOp<int8_t, int8_t>(view, op, reduceOp, stream);
    case DataType::UInt8: return launchSignalForOp<uint8_t, uint8_t>(view, op, reduceOp, stream);
    case DataType::Int16: return launchSignalForOp<int16_t, int16_t>(view, op, reduceOp, stream);
    case DataType::Int32: return launchSignalForOp<int32_t, int32_t>(view, op, reduceOp, stream);
    case DataType::Int64: return launchSignalForOp<int64_t, int64_t>(view, op, reduceOp, stream);
    default: break;
  }
  throw InvalidArgument(std::string("ringreduce: no integer device-flags kernel for ") +
                        dataTypeName(type));
}

}  // namespace ringreduce::cuda
