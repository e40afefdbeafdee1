// Argument checks and routing of launchSignalOp: plain C++ around the one
// device call (launchSignalKernel, signal_launch.cu), so that the fake
// device's tests run this part as it is, device switch included.
#include "cuda/signal/signal_launch.h"

#include <string>

#include "core/base/errors.h"
#include "core/math/element_math.h"
#include "cuda/device_scope.h"
#include "cuda/kernels/reduce_copy.h"

namespace ringreduce::cuda {

void launchSignalOp(const SignalView& view, SignalOp op, DataType type, ReduceOp reduceOp,
                    int device, void* stream) {
  if (view.nranks < 1 || view.nranks > kSignalRanks || op.nblocks < 1 ||
      op.nblocks > kSignalBlocks) {
    throw InvalidArgument("ringreduce: device-flags collective of " +
                          std::to_string(view.nranks) + " ranks in " +
                          std::to_string(op.nblocks) + " blocks (at most " +
                          std::to_string(kSignalRanks) + " and " +
                          std::to_string(kSignalBlocks) + ")");
  }
  if (op.kind == SignalKind::Allgather) {
    // Data movement: bytes, whatever the dtype.
    op.count *= elementSize(type);
    type = DataType::UInt8;
    reduceOp = ReduceOp::Sum;
  } else {
    if (!kernelSupports(type, type, reduceOp)) {
      throw InvalidArgument("ringreduce: " + kernelUnsupportedReason(type, type, reduceOp));
    }
    // Complex SUM/AVG: interleaved (re, im) pairs reduce as twice as many reals.
    if (type == DataType::Complex64 || type == DataType::Complex128) {
      type = type == DataType::Complex64 ? DataType::Float32 : DataType::Float64;
      op.count *= 2;
    }
    // Bool holds 0/1 bytes: reduced as uint8 with its logical op.
    if (type == DataType::Bool) {
      type = DataType::UInt8;
      reduceOp = boolOperator(reduceOp);
    }
  }
  DeviceScope scope(device);
  launchSignalKernel(view, op, type, reduceOp, stream);
}

}  // namespace ringreduce::cuda
