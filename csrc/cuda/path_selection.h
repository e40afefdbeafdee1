// The device collectives of one process group (allreduce; reduce-scatter,
// allgather and broadcast of single tensors), the state each device path
// keeps, and choose(): the one function that decides which path runs a
// collective. Paths, in the order RINGREDUCE_CUDA_ALGO=auto tries them:
//   IPC           all ranks on one node (any number of them per GPU): our
//                 kernels (ipc/ipc_collectives.h), one-shot up to
//                 cudaOneShotBytes, two-shot above, ranks ordered by
//                 interprocess events and host messages
//   NCCL          ranks on several nodes, one GPU each, NCCL loadable
//                 everywhere (nccl/nccl_communicator.h)
//   host staging  the caller stages through pinned host memory over UCX
// Across nodes, where every rank's UCX moves CUDA memory, the device ring
// comes before NCCL (DeviceRing: the caller runs algorithms/device/ring.h,
// which needs the transport). RINGREDUCE_CUDA_ALGO=flags asks for the
// device-flags path instead
// (signal/signal_group.h): ranks of one node synchronised on the device,
// launched from the caller's thread (allreduceOnCaller) when nothing is
// queued ahead, and capturable in CUDA graphs.
// Every rank makes the same choice from the same facts (exchanged once, at
// set-up), so no rank waits in a path the others did not take.
// Executor thread, or the caller's while the executor is idle (the backend
// serialises them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "core/config/config.h"
#include "core/plan/topology.h"
#include "core/config/cuda_choices.h"
#include "cuda/ipc/ipc_collectives.h"
#include "cuda/nccl/nccl_communicator.h"
#include "cuda/signal/signal_group.h"

namespace ringreduce::cuda {

// What a collective brings besides its data: the same on every rank.
struct CollectiveCall {
  uint32_t fingerprint = 0;  // op, dtype, size, reduce op, root
  std::chrono::milliseconds timeout{30 * 60 * 1000};
};

class PathSelection {
 public:
  // Collective: every rank of the group, on its first CUDA collective.
  // `carriesDevice`: this rank's transport moves device memory (the device
  // ring runs only where every rank's does).
  PathSelection(int rank, int size, int device, const Config& config,
                const RecordExchange& exchange, bool carriesDevice = false);
  ~PathSelection();

  // Runs the allreduce in place on the device when a device path applies
  // and returns the path that ran; HostStaging when the caller must stage
  // through the host. Throws InvalidArgument when the configured path
  // cannot run here.
  DevicePathTaken allreduce(void* data, size_t count, DataType type, ReduceOp op, void* stream,
                            const RecordExchange& exchange, const CollectiveCall& call);
  // Across nodes under RINGREDUCE_CUDA_ALGO=auto, where both the device
  // ring and NCCL can run this allreduce (NCCL set up on the first ask, by
  // every rank in the same collective): what the autotuner chooses between
  // (algorithms/tuning/autotune.h, AllreduceTuner::cudaPaths). The same answer on
  // every rank.
  bool ringOrNccl(DataType type, ReduceOp op, const RecordExchange& exchange,
                  const CollectiveCall& call);
  // That allreduce on `algorithm`: Ring answers DeviceRing (the caller runs
  // the ring), Nccl runs NCCL on `stream` and answers Nccl.
  DevicePathTaken allreduceAcross(CudaAlgorithm algorithm, void* data, size_t count,
                                  DataType type, ReduceOp op, void* stream);
  // The same contract for the others, which run as Ipc, Flags or Nccl
  // (RINGREDUCE_CUDA_ALGO=host or nccl applies to them too; the IPC
  // algorithm names do not).
  DevicePathTaken reduceScatter(const void* input, void* output, size_t countPerRank,
                                DataType type, ReduceOp op, void* stream,
                                const RecordExchange& exchange, const CollectiveCall& call);
  DevicePathTaken allgather(const void* input, void* output, size_t countPerRank, DataType type,
                            void* stream, const RecordExchange& exchange,
                            const CollectiveCall& call);
  DevicePathTaken broadcast(void* data, size_t count, DataType type, int root, void* stream,
                            const RecordExchange& exchange, const CollectiveCall& call);

  // The device-flags path with no host step, for the caller's thread: runs
  // the collective when the path is set up and it fits the buffers, and
  // returns what ran; HostStaging (nothing ran) otherwise.
  DevicePathTaken allreduceOnCaller(const void* input, void* output, size_t count, DataType type,
                                    ReduceOp op, void* stream, const CollectiveCall& call);
  DevicePathTaken allgatherOnCaller(const void* input, void* output, size_t countPerRank,
                                    DataType type, void* stream, const CollectiveCall& call);
  DevicePathTaken reduceScatterOnCaller(const void* input, void* output, size_t countPerRank,
                                        DataType type, ReduceOp op, void* stream,
                                        const CollectiveCall& call);
  // Whether the device-flags path is set up, and whether its collectives
  // can be captured in a CUDA graph (and if not, why).
  bool flagsReady() const { return signalGroup() != nullptr; }
  bool capturable(std::string* why) const;
  // The device-flags group, once set up (null before): any thread, since
  // the caller's thread asks whether a collective may run on the caller while the
  // executor may be setting it up.
  SignalGroup* signalGroup() const { return signalReady_.load(std::memory_order_acquire); }

  // Asked before a caller's tensor is shared with the peers (see
  // IpcCollectives::setExportGuard); applies to every path.
  void setExportGuard(IpcCollectives::ExportGuard guard);

  // NCCL supervision (issue 43): the communicator once set up, for its
  // watchdog (null before; executor thread). Its init is bounded by the
  // timeout of the collective that first needs it
  // (NcclCommunicator::initLimit).
  NcclCommunicator* ncclCommunicator() const { return nccl_.get(); }

  // Collective, at shutdown: every path closes its cross-rank memory
  // (waits for its work, closes mappings, meets the peers, frees), and
  // NCCL finalizes within `limit` (or is aborted). False when a path could
  // not: its memory is kept.
  bool close(const RecordExchange& exchange, std::chrono::milliseconds limit);

  // Every path's state, for `python -m torch_ringreduce.info` under
  // torchrun: topology, the peer-access verdict, each path set up or why
  // not. Read after a collective completed (the executor sets them up).
  std::string describe() const;
  // What set-up found, for the log: "4 rank(s) on 1 node(s), 1 GPU(s)".
  const std::string& topology() const { return topology_; }
  // Which ranks share a node (from the host identities set-up exchanged):
  // the device ring's two levels (algorithms/device/two_level.h).
  const Topology& nodes() const { return nodes_; }
  // How the device-flags path would synchronise, and why.
  CudaSync flagsSync() const { return sync_; }
  const std::string& flagsSyncReason() const { return syncReason_; }

 private:
  // What a collective brings to the choice.
  struct Request {
    explicit Request(const CollectiveCall& call) : timeout(call.timeout) {}
    // Allreduce picks among the IPC algorithms, and a forced one
    // (RINGREDUCE_CUDA_ALGO=oneshot, twoshot, staged) must run or fail.
    bool allreduce = false;
    // The device ring runs it (allreduce, reduce-scatter, allgather).
    bool ringable = false;
    size_t bytes = 0;  // of the allreduce: one-shot up to cudaOneShotBytes
    std::string ncclCannot;  // why NCCL cannot run it; empty when it can
    // The collective's own timeout: bounds NCCL's init when this is the
    // first collective that needs NCCL.
    std::chrono::milliseconds timeout;
  };
  DevicePathTaken choose(const Request& request, const RecordExchange& exchange);
  bool ipcUsable(const RecordExchange& exchange);
  bool ncclUsable(const RecordExchange& exchange, std::chrono::milliseconds opTimeout);
  bool signalUsable(const RecordExchange& exchange);
  // The device-flags path for an allreduce larger than the buffers.
  DevicePathTaken allreduceLarge(void* data, size_t count, DataType type, ReduceOp op,
                                 void* stream, const RecordExchange& exchange,
                                 const CollectiveCall& call);
  SignalGroup::Call signalCall(void* stream, const CollectiveCall& call) const;

  const int rank_;
  const int size_;
  const int device_;
  const Config config_;
  bool sameNode_ = false;
  bool gpuShared_ = false;
  std::string topology_;
  Topology nodes_;
  CudaSync sync_ = CudaSync::Auto;  // Auto here: the flags path cannot run
  std::string syncReason_;
  int maxBlocks_ = kSignalBlocks;
  IpcCollectives::ExportGuard exportGuard_;
  // Set up on first use; "tried" keeps a failed set-up from being retried.
  // Why the one-node paths may not use peer access (RINGREDUCE_CUDA_P2P=off
  // on some rank, or set-up's probe failed on some pair); "" while allowed.
  std::string peerAccessFailure_;
  bool ipcTried_ = false;
  std::string ipcFailure_;
  std::unique_ptr<IpcCollectives> ipc_;
  bool ncclTried_ = false;
  std::string ncclFailure_;
  std::unique_ptr<NcclCommunicator> nccl_;
  bool ringUsable_ = false;  // every rank's transport moves device memory
  std::string ringFailure_;
  bool signalTried_ = false;
  std::string signalFailure_;
  std::unique_ptr<SignalGroup> signal_;
  std::atomic<SignalGroup*> signalReady_{nullptr};  // signal_, published once set up
};

}  // namespace ringreduce::cuda
