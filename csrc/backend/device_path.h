// The group's own device data path (csrc/cuda), behind an interface that
// compiles with or without it: without nvcc at build time, compiled() is
// false and every collective answers HostStaging.
//
// Besides running collectives it owns what must outlive them on the torch
// side: the tensors whose memory peers have mapped (held until the group's
// cross-rank close, so torch's caching allocator cannot free a segment a
// peer still maps), and the watchdog of the device-flags path.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "algorithms/tuning/autotune.h"
#include "algorithms/device/ring.h"
#include "core/plan/topology.h"
#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "core/config/config.h"
#include "core/config/cuda_choices.h"

namespace ringreduce {

class DevicePath {
 public:
  static bool compiled();
  // "runtime 13.0 (linked statically), driver ..., 1 device(s)", or why not compiled.
  static std::string describe();
  // Whether NCCL (loaded on first use) can be loaded here, and which one or
  // why not; loads it once for the process.
  static bool ncclAvailable(std::string* detail);
  // A stream of the group's own on `device` (not one of torch's pooled
  // ones, which two groups could share); torch's pool where the path is
  // not compiled or torch cannot take an external stream.
  static c10::Stream ownStream(c10::Device device);
  // Whether `stream` is being captured into a CUDA graph (false where the
  // path is not compiled: then nothing of ours can be captured anyway).
  static bool capturing(const c10::Stream& stream);

  // What a collective carries to the device besides its data, the same on
  // every rank: its fingerprint and its timeout.
  struct Call {
    uint32_t fingerprint = 0;
    std::chrono::milliseconds timeout{0};
  };
  // The watchdog's hands in the group: fail it with a reason; whether the
  // host has given up on it.
  struct Hooks {
    std::function<void(const std::string&)> fail;
    std::function<bool()> givenUp;
  };

  // Collective (every rank, on its first CUDA collective): learns the
  // group's topology. Executor thread, or the caller's while the group is
  // idle (the engine serialises them), like everything below.
  // `carriesDevice`: the group's transport moves device memory (the
  // device ring needs it on every rank).
  DevicePath(int rank, int size, c10::Device device, const Config& config,
             const RecordExchange& exchange, Hooks hooks, bool carriesDevice);
  ~DevicePath();

  c10::Device device() const { return device_; }
  // In place on a contiguous CUDA tensor, enqueued on `stream` (current).
  // Returns the path that ran, or HostStaging when the caller must stage
  // through the host (cuda/path_selection.h chooses).
  DevicePathTaken allreduce(const at::Tensor& tensor, DataType type, ReduceOp op,
                            const c10::Stream& stream, const RecordExchange& exchange,
                            const Call& call);
  // Across nodes, the autotuner's two candidates (cuda::PathSelection's
  // ringOrNccl and allreduceAcross): whether both can run this allreduce,
  // and the allreduce on one of them (Ring: DeviceRing, the caller runs the
  // ring; Nccl: ran on `stream`).
  bool ringOrNccl(DataType type, ReduceOp op, const RecordExchange& exchange, const Call& call);
  DevicePathTaken allreduceAcross(CudaAlgorithm algorithm, const at::Tensor& tensor,
                                  DataType type, ReduceOp op, const c10::Stream& stream);
  // How the autotuner times those two candidates alike: the device's time
  // on `stream` around each (backend/device_trial_clock.h). Null where the
  // CUDA path is not compiled.
  std::unique_ptr<TrialClock> trialClock(const c10::Stream& stream, const OpContext& op);
  // The same contract for single-tensor reduce-scatter, allgather and
  // broadcast (contiguous tensors; the caller copies around views).
  DevicePathTaken reduceScatter(const at::Tensor& input, const at::Tensor& output, DataType type,
                                ReduceOp op, const c10::Stream& stream,
                                const RecordExchange& exchange, const Call& call);
  DevicePathTaken allgather(const at::Tensor& input, const at::Tensor& output,
                            const c10::Stream& stream, const RecordExchange& exchange,
                            const Call& call);
  DevicePathTaken broadcast(const at::Tensor& tensor, int root, const c10::Stream& stream,
                            const RecordExchange& exchange, const Call& call);

  // The device-flags path with no host step (the caller's thread, the
  // group idle). The *Applies checks decide before anything is numbered;
  // the others then run it and say what ran.
  enum class OnCaller { Allreduce, Allgather, ReduceScatter };
  bool onCallerApplies(OnCaller kind, size_t bytes, DataType type, ReduceOp op) const;
  DevicePathTaken allreduceOnCaller(const at::Tensor& tensor, DataType type, ReduceOp op,
                                    const c10::Stream& stream, const Call& call);
  DevicePathTaken allgatherOnCaller(const at::Tensor& input, const at::Tensor& output,
                                    const c10::Stream& stream, const Call& call);
  DevicePathTaken reduceScatterOnCaller(const at::Tensor& input, const at::Tensor& output,
                                        DataType type, ReduceOp op, const c10::Stream& stream,
                                        const Call& call);
  // Whether the device-flags path runs this collective and checks it on
  // the device (its fingerprint in the flags), from the settings alone, so
  // every rank decides alike before anything is set up: then no host
  // neighbour check goes with it, queued or on caller. `bytes`: of the
  // tensor (allreduce), of each rank's block (the others).
  static bool flagsCheckIt(const Config& config, OnCaller kind, size_t bytes, int ranks,
                           DataType type, ReduceOp op);
  // Whether a CUDA graph can capture this group's collectives, and why not.
  bool capturable(std::string* why) const;
  // What the group's CUDA paths are (topology, peer access, each path set
  // up or why not): `python -m torch_ringreduce.info` under torchrun.
  std::string pathsDescription() const;

  // The device ring's device side (algorithms/device/ring.h) with its work
  // on `stream`, for a collective the paths answered DeviceRing; made on
  // first use. Null where the CUDA path is not compiled.
  DeviceSteps* ringSteps(const c10::Stream& stream);
  // Which ranks share a node, as set-up found (the device ring's two
  // levels). One node of every rank where the CUDA path is not compiled.
  const Topology& nodes() const;

  // One launch of the fused reduce-copy kernel on the current stream of the
  // tensors' device: every destination gets the reduction of every source.
  // For the kernel's own tests and benchmark, not part of the c10d API.
  // Raises ValueError for bad arguments, RuntimeError when not compiled.
  static void reduceCopy(const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& dsts,
                         const c10d::ReduceOp& op, int avgDivisor);

  // Collective, at shutdown (every rank): waits for the paths' work, closes
  // the mappings of peers' memory, meets the peers, frees; then lets go of
  // the tensors peers had mapped. False when it could not (resources kept).
  bool close(const RecordExchange& exchange, std::chrono::milliseconds limit);
  // After a failure: keep the device resources for the life of the process.
  // Freeing them would wait for device work that may wait on a dead peer.
  void abandon();

 private:
  struct State;
  const c10::Device device_;
  std::unique_ptr<State> state_;
};

}  // namespace ringreduce
