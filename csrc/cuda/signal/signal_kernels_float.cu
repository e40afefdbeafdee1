// Instantiations of the device-flags kernel for the floating-point types.
#include "cuda/signal/signal_kernel.cuh"

namespace ringreduce::cuda {

void launchSignalFloat(const SignalView& view, const SignalOp& op, DataType type,
                       ReduceOp reduceOp, cudaStream_t stream) {
  switch (type) {
    case DataType::Float32: return launchSignalForOp<float, float>(view, op, reduceOp, stream);
    case DataType::Float64: return launchSignalForOp<double, double>(view, op, reduceOp, stream);
    case DataType::Float16: return launchSignalForOp<__half, float>(view, op, reduceOp, stream);
    case DataType::BFloat16:
      return launchSignalForOp<__nv_bfloat16, float>(view, op, reduceOp, stream);
    default: break;
  }
  throw InvalidArgument(std::string("ringreduce: no device-flags kernel for ") +
                        dataTypeName(type));
}

}  // namespace ringreduce::cuda
