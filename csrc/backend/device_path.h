// The group's own device data path for allreduce (csrc/cuda), behind an
// interface that compiles with or without it: without nvcc at build time,
// compiled() is false and allreduce() always answers HostStaging.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "core/config/config.h"
#include "core/config/cuda_choices.h"
#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

class DevicePath {
 public:
  static bool compiled();
  // "runtime 13.0 (linked statically), driver ..., 1 device(s)", or why not compiled.
  static std::string describe();
  // Whether NCCL (loaded on first use) can be loaded here, and which one or
  // why not; loads it once for the process.
  static bool ncclAvailable(std::string* detail);

  // Collective (every rank, on its first CUDA allreduce): learns the group's
  // topology. Executor thread only, like everything below.
  DevicePath(int rank, int size, c10::Device device, const Config& config,
             const RecordExchange& exchange);
  ~DevicePath();

  c10::Device device() const { return device_; }
  // In place on a contiguous CUDA tensor, enqueued on `stream` (current).
  // Returns the path that ran (TwoShot, Nccl, ...), or HostStaging when the
  // caller must stage through the host (cuda/path_selection.h chooses).
  DevicePathTaken allreduce(const at::Tensor& tensor, DataType type, ReduceOp op,
                            const c10::Stream& stream, const RecordExchange& exchange);
  // One launch of the fused reduce-copy kernel on the current stream of the
  // tensors' device: every destination gets the reduction of every source.
  // For the kernel's own tests and benchmark, not part of the c10d API.
  // Raises ValueError for bad arguments, RuntimeError when not compiled.
  static void reduceCopy(const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& dsts,
                         const c10d::ReduceOp& op, int avgDivisor);

  // The same contract for single-tensor reduce-scatter, allgather and
  // broadcast (contiguous tensors; the caller copies around views).
  DevicePathTaken reduceScatter(const at::Tensor& input, const at::Tensor& output, DataType type,
                                ReduceOp op, const c10::Stream& stream,
                                const RecordExchange& exchange);
  DevicePathTaken allgather(const at::Tensor& input, const at::Tensor& output,
                            const c10::Stream& stream, const RecordExchange& exchange);
  DevicePathTaken broadcast(const at::Tensor& tensor, int root, const c10::Stream& stream,
                            const RecordExchange& exchange);

  // After a failure: keep the device resources for the life of the process.
  // Freeing them would wait for device work that may wait on a dead peer.
  void abandon();

 private:
  struct State;
  const c10::Device device_;
  std::unique_ptr<State> state_;
};

}  // namespace ringreduce
