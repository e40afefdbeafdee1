// The device collectives of one process group (allreduce; reduce-scatter,
// allgather and broadcast of single tensors): which path runs them and the
// state each path keeps. Paths, in the order RINGREDUCE_CUDA_ALGO=auto
// tries them:
//   IPC   all ranks on one node (any number of them per GPU): our kernels
//         (ipc/ipc_collectives.h), one-shot up to cudaOneShotBytes, two-shot above
//   NCCL  ranks on several nodes, one GPU each, NCCL loadable everywhere
//   none  the caller stages through pinned host memory over UCX
// Every rank makes the same choice from the same facts (exchanged once, at
// set-up), so no rank waits in a path the others did not take.
// Executor thread only.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/data_type.h"
#include "core/reduce_op.h"
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
  // and returns that path's name ("one-shot", "two-shot", "staged two-shot",
  // "nccl"); returns "" when the caller must stage through the host. Throws
  // InvalidArgument when the configured path cannot run here.
  std::string allreduce(void* data, size_t count, DataType type, ReduceOp op, void* stream,
                        const RecordExchange& exchange);
  // The same contract for the others (RINGREDUCE_CUDA_ALGO=host or nccl
  // applies to them too; the IPC algorithm names do not).
  std::string reduceScatter(const void* input, void* output, size_t countPerRank, DataType type,
                            ReduceOp op, void* stream, const RecordExchange& exchange);
  std::string allgather(const void* input, void* output, size_t countPerRank, DataType type,
                        void* stream, const RecordExchange& exchange);
  std::string broadcast(void* data, size_t count, DataType type, int root, void* stream,
                        const RecordExchange& exchange);

  // What set-up found, for the log: "4 ranks on one node, 1 GPU shared".
  const std::string& topology() const { return topology_; }

 private:
  bool ncclUsable(const RecordExchange& exchange);
  // "ipc", "nccl" or "" for the ops other than allreduce; throws when a
  // forced NCCL cannot run.
  std::string pathForOthers(DataType type, const RecordExchange& exchange);
  bool ipcUsable(const RecordExchange& exchange);

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
