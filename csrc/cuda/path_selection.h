// The device collectives of one process group (allreduce; reduce-scatter,
// allgather and broadcast of single tensors), the state each device path
// keeps, and choose(): the one function that decides which path runs a
// collective. Paths, in the order RINGREDUCE_CUDA_ALGO=auto tries them:
//   IPC           all ranks on one node (any number of them per GPU): our
//                 kernels (ipc/ipc_collectives.h), one-shot up to
//                 cudaOneShotBytes, two-shot above
//   NCCL          ranks on several nodes, one GPU each, NCCL loadable
//                 everywhere (nccl/nccl_communicator.h)
//   host staging  the caller stages through pinned host memory over UCX
// Every rank makes the same choice from the same facts (exchanged once, at
// set-up), so no rank waits in a path the others did not take.
// Executor thread only.
#pragma once

#include <memory>
#include <string>

#include "core/config/config.h"
#include "core/config/cuda_choices.h"
#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "cuda/ipc/ipc_collectives.h"
#include "cuda/nccl/nccl_communicator.h"

namespace ringreduce::cuda {

class PathSelection {
 public:
  // Collective: every rank of the group, on its first CUDA allreduce.
  PathSelection(int rank, int size, int device, const Config& config,
                const RecordExchange& exchange);
  ~PathSelection();

  // Runs the allreduce in place on the device when a device path applies
  // and returns the path that ran (OneShot, TwoShot, Staged or Nccl);
  // HostStaging when the caller must stage through the host. Throws
  // InvalidArgument when the configured path cannot run here.
  DevicePathTaken allreduce(void* data, size_t count, DataType type, ReduceOp op, void* stream,
                            const RecordExchange& exchange);
  // The same contract for the others, which run as Ipc or Nccl
  // (RINGREDUCE_CUDA_ALGO=host or nccl applies to them too; the IPC
  // algorithm names do not).
  DevicePathTaken reduceScatter(const void* input, void* output, size_t countPerRank,
                                DataType type, ReduceOp op, void* stream,
                                const RecordExchange& exchange);
  DevicePathTaken allgather(const void* input, void* output, size_t countPerRank, DataType type,
                            void* stream, const RecordExchange& exchange);
  DevicePathTaken broadcast(void* data, size_t count, DataType type, int root, void* stream,
                            const RecordExchange& exchange);

  // What set-up found, for the log: "4 rank(s) on 1 node(s), 1 GPU(s)".
  const std::string& topology() const { return topology_; }

 private:
  // What a collective brings to the choice.
  struct Request {
    // Allreduce picks among the IPC algorithms, and a forced one
    // (RINGREDUCE_CUDA_ALGO=oneshot, twoshot, staged) must run or fail.
    bool allreduce = false;
    size_t bytes = 0;  // of the allreduce: one-shot up to cudaOneShotBytes
    std::string ncclCannot;  // why NCCL cannot run it; empty when it can
  };
  // The path a collective takes: for allreduce OneShot, TwoShot or Staged
  // (what the IPC path is asked for; it may fall back to Staged), for the
  // others Ipc; Nccl or HostStaging for both. Sets up IPC or NCCL on first
  // need (a collective step: every rank reaches it alike). Throws
  // InvalidArgument when the configured path cannot run.
  DevicePathTaken choose(const Request& request, const RecordExchange& exchange);
  bool ipcUsable(const RecordExchange& exchange);
  bool ncclUsable(const RecordExchange& exchange);

  const int rank_;
  const int size_;
  const int device_;
  const Config config_;
  bool sameNode_ = false;
  bool gpuShared_ = false;
  std::string topology_;
  // Set up on first use; "tried" keeps a failed set-up from being retried.
  bool ipcTried_ = false;
  std::string ipcFailure_;
  std::unique_ptr<IpcCollectives> ipc_;
  bool ncclTried_ = false;
  std::string ncclFailure_;
  std::unique_ptr<NcclCommunicator> nccl_;
};

}  // namespace ringreduce::cuda
