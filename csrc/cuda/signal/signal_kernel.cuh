// The device-flags kernel: one block per range, every block running
// runSignalBlock with the device memory policy. Included by the .cu files
// that instantiate it per type family, so the families compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/base/errors.h"
#include "cuda/kernels/operator_dispatch.h"
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
  const bool known = withOperator<T>(reduceOp, [&](auto functor) {
    launchSignalTyped<T, A, decltype(functor)>(view, op, stream);
  });
  if (!known) {
    throw InvalidArgument(std::string("ringreduce: no device-flags kernel for ") +
                          reduceOpName(reduceOp));
  }
}

// Per-family entry points (signal_kernels_float.cu, signal_kernels_int.cu).
void launchSignalFloat(const SignalView& view, const SignalOp& op, DataType type,
                       ReduceOp reduceOp, cudaStream_t stream);
void launchSignalInteger(const SignalView& view, const SignalOp& op, DataType type,
                         ReduceOp reduceOp, cudaStream_t stream);

}  // namespace ringreduce::cuda
