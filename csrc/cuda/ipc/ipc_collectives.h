// Collectives among the ranks of one node, on our own kernels, with buffers
// shared through CUDA IPC (ipc_memory.h): allreduce, and the reduce-scatter,
// allgather and broadcast that FSDP and DDP's start-up use.
//
// No kernel ever waits for another process's kernel: without MPS, kernels of
// different processes on one GPU are time-sliced, so a spin-wait on a flag
// written by a peer's kernel could stall for whole time slices or deadlock.
// Instead each cross-process step is a stream barrier:
//   record my interprocess event on my stream  ->  host message to every peer
//   (an allgather of a small record)  ->  make my stream wait on every peer's
//   event, which the peer recorded before it sent its message.
// The host never waits on the GPU. An event is re-recorded only after every
// peer has issued its wait on the previous record: its next record comes
// after the next message round, which peers join only after waiting.
//
// Algorithms (all ranks of a call pick the same one):
//   one-shot   copy my data into my scratch, barrier, every rank reduces all
//              ranks' scratch into its own tensor, barrier. Latency: one
//              kernel; traffic N reads per element: for small messages.
//   two-shot   rank r reduces slice r of every rank's tensor, read in place
//              through IPC, and writes the result into slice r of every
//              tensor: each byte read once and written once (2NS for N ranks
//              on one GPU, the least possible), barrier before and after.
//   staged     two-shot through the scratch buffers, for tensors that cannot
//              be shared (expandable segments): copy in, reduce, copy out.
// The staged forms can carry float32 as float16/bfloat16 (the wire dtype):
// cast on the copy in, float32 accumulation, cast back with AVG fused.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/cuda_choices.h"
#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "cuda/ipc/ipc_memory.h"
#include "cuda/ipc/tensor_sharing.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/stream_tracker.h"

namespace ringreduce::cuda {

class IpcCollectives {
 public:
  // Collective: allocates this rank's scratch (scratchBytes, split in an
  // input and an output half) and its two events, exchanges their handles
  // and opens the peers'. Null (and `why`) on every rank when any rank
  // failed, so the ranks fall back together instead of waiting on each other.
  static std::unique_ptr<IpcCollectives> setUp(int rank, int size, int device,
                                             size_t scratchBytes, const RecordExchange& exchange,
                                             std::string* why);
  ~IpcCollectives();

  // In place on `count` elements at `data` (device memory of `device`),
  // enqueued on `stream`. `wanted` is OneShot, TwoShot or Staged. `wire` is
  // float16/bfloat16 to carry float32 data narrowed in the staged forms
  // (type otherwise). Returns the algorithm that ran (one-shot becomes
  // staged when the data does not fit the scratch buffer, two-shot when
  // some rank's tensor cannot be shared or a wire dtype is asked for).
  DevicePathTaken allreduce(void* data, size_t count, DataType type, ReduceOp op, DataType wire,
                            DevicePathTaken wanted, void* stream, const RecordExchange& exchange);

  // The other collectives read the peers' tensors in place (a copy, or the
  // kernel) between a stream barrier before and one after. They return
  // false, on every rank alike, when some rank's tensor cannot be shared
  // (expandable segments): the caller then stages through the host.
  //   reduceScatter  rank r reduces block r of every input into its output
  //   allgather      every rank copies every input into its output
  //   broadcast      every rank copies the root's tensor
  bool reduceScatter(const void* input, void* output, size_t countPerRank, DataType type,
                     ReduceOp op, void* stream, const RecordExchange& exchange);
  bool allgather(const void* input, void* output, size_t countPerRank, DataType type,
                 void* stream, const RecordExchange& exchange);
  bool broadcast(void* data, size_t count, DataType type, int root, void* stream,
                 const RecordExchange& exchange);

  // Elements of `type` one staged round can carry.
  size_t stagedCapacity(DataType wire) const;

  // Asked before a caller's tensor is exported to the peers: true when the
  // caller holds that memory until close() (torch's caching allocator
  // could otherwise free a segment peers still map). False makes every
  // rank stage that collective instead. Unset: every tensor may be shared.
  using ExportGuard = std::function<bool(const void* ptr)>;
  void setExportGuard(ExportGuard guard) { exportGuard_ = std::move(guard); }

  // Collective (every rank, at shutdown): waits (to `limit`) for the work
  // this group queued, closes its mappings of the peers' memory, meets the
  // peers, and only then frees its scratch. False when that could not be
  // done safely: the scratch is then kept for the life of the process.
  bool close(const RecordExchange& exchange, std::chrono::milliseconds limit);

 private:
  IpcCollectives(int rank, int size, int device, size_t scratchBytes);
  void openPeers(const void* setupRecords);
  void barrier(SharedEvent& mine, std::vector<std::unique_ptr<PeerEvent>>& theirs, void* stream,
               const RecordExchange& exchange, const void* record, void* all, size_t bytes);
  void oneShot(void* data, size_t count, DataType type, ReduceOp op, DataType wire, void* stream,
               const RecordExchange& exchange);
  // Exports `ptr`, records the "before" event, exchanges, and (when every
  // rank could share) waits on the peers' events and maps their pointers
  // into `peers` (mine: ptr). False on every rank when one could not share.
  bool shareBefore(const void* ptr, void* stream, const RecordExchange& exchange,
                   std::vector<void*>& peers);
  void afterBarrier(void* stream, const RecordExchange& exchange);
  bool twoShotInPlace(void* data, size_t count, DataType type, ReduceOp op, void* stream,
                      const RecordExchange& exchange);
  void staged(void* data, size_t count, DataType type, ReduceOp op, DataType wire, void* stream,
              const RecordExchange& exchange);
  void copyCast(const void* src, DataType from, void* dst, DataType to, size_t count,
                int avgDivisor, void* stream);

  const int rank_;
  const int size_;
  const int device_;
  DeviceBuffer scratch_;
  std::vector<void*> peerScratch_;  // every rank's scratch, mapped (mine: scratch_.data())
  SharedEvent before_;
  SharedEvent after_;
  std::vector<std::unique_ptr<PeerEvent>> peersBefore_;  // null at my own index
  std::vector<std::unique_ptr<PeerEvent>> peersAfter_;
  PeerMappings mappings_;
  TensorSharing sharing_{rank_, size_, mappings_};  // the peers' tensors, agreed mappings
  StreamTracker streams_;
  ExportGuard exportGuard_;
};

}  // namespace ringreduce::cuda
