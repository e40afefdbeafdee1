// Enqueues one collective of the device-flags path (signal_collectives.h)
// on a stream: plain pointers and a stream handle, so the caller needs no
// CUDA header.
#pragma once

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"
#include "cuda/signal/signal_collectives.h"

namespace ringreduce::cuda {

constexpr int kSignalThreads = 512;

// `op.count` counts elements of `type`; complex numbers travel as pairs of
// reals, bool as bytes with its logical op, and an allgather as bytes.
// Throws InvalidArgument for a (type, op) the kernels do not reduce and
// Error for a CUDA failure. The current device is left as it was.
void launchSignalOp(const SignalView& view, SignalOp op, DataType type, ReduceOp reduceOp,
                    int device, void* stream);

// Its device half (signal_launch.cu; the fake device's in the host tests):
// launches the kernel for a type it serves as it is (complex and bool
// already mapped to reals and bytes) on `stream`, on the current device.
void launchSignalKernel(const SignalView& view, const SignalOp& op, DataType type,
                        ReduceOp reduceOp, void* stream);

}  // namespace ringreduce::cuda
