// The device-flags kernel: one block per range, every block running
// runSignalBlock with the device memory policy. Included by the .cu files
// that instantiate it per type family, so the families compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/base/errors.h"
#include "cuda/signal/device_signal_memory.cuh"
#include "cuda/signal/signal_collectives.h"
#include "cuda/signal/signal_launch.h"

namespace ringreduce::cuda {

template <typename T, typename A, class Op>
__global__ void __launch_bounds__(kSignalThreads) signalKernel(SignalView view, SignalOp op) {
  DeviceSignalMemory m;
  runSignalBlock<DeviceSignalMemory, T, A, Op>(m, view, op, static_cast<int>(blockIdx.x));
}

template <typename T, typename A, class Op>
void launchSignalTyped(const SignalView& view, const SignalOp& op, cudaStream_t stream) {
  signalKernel<T, A, Op><<<op.nblocks, kSignalThreads, 0, stream>>>(view, op);
}

// The operator functor for `reduceOp` on T; bitwise ones for integers only.
template <typename T, typename A>
void launchSignalForOp(const SignalView& view, const SignalOp& op, ReduceOp reduceOp,
                       cudaStream_t stream) {
  switch (reduceOp) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return launchSignalTyped<T, A, SumOp>(view, op, stream);
    case ReduceOp::Product:
      return launchSignalTyped<T, A, ProductOp>(view, op, stream);
    case ReduceOp::Min:
      return launchSignalTyped<T, A, MinOp>(view, op, stream);
    case ReduceOp::Max:
      return launchSignalTyped<T, A, MaxOp>(view, op, stream);
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (reduceOp) {
      case ReduceOp::BAnd:
        return launchSignalTyped<T, A, BAndOp>(view, op, stream);
      case ReduceOp::BOr:
        return launchSignalTyped<T, A, BOrOp>(view, op, stream);
      case ReduceOp::BXor:
        return launchSignalTyped<T, A, BXorOp>(view, op, stream);
      default:
        break;
    }
  }
  throw InvalidArgument(std::string("ringreduce: no device-flags kernel for ") +
                        reduceOpName(reduceOp));
}

// Per-family entry points (signal_kernels_float.cu, signal_kernels_int.cu).
void launchSignalFloat(const SignalView& view, const SignalOp& op, DataType type,
                       ReduceOp reduceOp, cudaStream_t stream);
void launchSignalInteger(const SignalView& view, const SignalOp& op, DataType type,
                         ReduceOp reduceOp, cudaStream_t stream);

}  // namespace ringreduce::cuda
