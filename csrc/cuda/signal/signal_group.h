// The device-flags path of one process group (RINGREDUCE_CUDA_ALGO=flags):
// each rank's region (signal_pad.h) allocated and shared once, the peers'
// regions mapped once, and every collective after that enqueued on a stream
// with no host step: no message, no event, nothing the host waits for. So
// it runs from the caller's thread on the caller's stream, and a CUDA graph
// can capture it (flags mode).
//
// How ranks meet on the device (chosen at set-up, the same on every rank):
//   Flags         one kernel per collective; its blocks meet the peers' at
//                 barriers of flags in the pads (signal_barrier.h). Needs the
//                 ranks' kernels to run at once: one GPU per rank, or ranks
//                 sharing a GPU under MPS with every rank's grid resident
//                 together (maxBlocks <= SMs / ranks on the GPU).
//   StreamMemOps  ranks time-sliced on one GPU (no MPS): the barrier is
//                 stream memory operations between the copies and a
//                 reduce-copy kernel, so nothing spins on an SM.
//
// Failures are never silent and never hang the host: a kernel that times
// out, sees another collective (fingerprint) or a failed peer writes its
// reason to pinned host memory, which failure() reads (the backend's
// watchdog); stop() ends every wait of this rank. Memory is freed only
// after every rank has closed its mappings of it (close()); a group that
// cannot close keeps its memory for the life of the process.
//
// Not thread-safe: one caller at a time (the backend serialises the
// executor and the caller's thread), except failure() and stop(), which
// the watchdog calls from its own thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "core/config/cuda_choices.h"
#include "cuda/ipc/ipc_memory.h"
#include "cuda/ipc/tensor_sharing.h"
#include "cuda/signal/signal_collectives.h"
#include "cuda/stream_tracker.h"

namespace ringreduce::cuda {

struct SignalGroupOptions {
  size_t bufferBytes = 8u << 20;  // each of in[0], in[1], out[0], out[1]
  CudaSync sync = CudaSync::Flags;
  int maxBlocks = kSignalBlocks;  // the most blocks of one collective (MPS: residency)
  size_t oneShotBytes = 256 * 1024;  // one-shot up to this size, two-shot above
  // How long set-up's peer-access probe (peer_probe.h) may take.
  std::chrono::milliseconds probeLimit{30000};
};

class SignalGroup {
 public:
  // Collective (every rank): allocates and shares the region. Null (and
  // `why`) on every rank when any rank failed, so that all fall back alike.
  static std::unique_ptr<SignalGroup> setUp(int rank, int size, int device,
                                            const SignalGroupOptions& options,
                                            const RecordExchange& exchange, std::string* why);
  ~SignalGroup();
  SignalGroup(const SignalGroup&) = delete;
  SignalGroup& operator=(const SignalGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  CudaSync sync() const { return options_.sync; }
  size_t bufferBytes() const { return options_.bufferBytes; }
  // Whether collectives can be captured in a CUDA graph (flags only: the
  // stream memory operations carry values the host counts).
  bool capturable() const { return options_.sync == CudaSync::Flags; }

  // What one collective brings: its fingerprint (the same on every rank
  // for the same collective) and its deadline.
  struct Call {
    uint32_t fingerprint = 0;
    std::chrono::milliseconds timeout{0};
    void* stream = nullptr;
  };

  // Allreduce of `count` elements through the buffers (count * size of
  // `type` <= bufferBytes()); `input` may be `output`. One-shot up to
  // oneShotBytes, two-shot above. Returns the algorithm that ran.
  DevicePathTaken allreduce(const void* input, void* output, size_t count, DataType type,
                            ReduceOp op, const Call& call);
  // The same on the ranks' own tensors, mapped: tensors[p] is rank p's
  // (mine at rank()), all `count` elements long; `aligned` when every one
  // is 16-byte aligned.
  void allreduceInPlace(void* const* tensors, size_t count, DataType type, ReduceOp op,
                        bool aligned, const Call& call);
  // countPerRank * size of `type` <= bufferBytes().
  void allgather(const void* input, void* output, size_t countPerRank, DataType type,
                 const Call& call);
  // size() * countPerRank * size of `type` <= bufferBytes().
  void reduceScatter(const void* input, void* output, size_t countPerRank, DataType type,
                     ReduceOp op, const Call& call);

  // The first failure this rank's kernels reported, or a stream-memops
  // collective past its deadline; "" while none. Any thread.
  std::string failure();
  // Every wait of this rank ends and no later kernel of it runs: after a
  // failure, an abort or a dead peer. Any thread; idempotent.
  void stop();

  // Collective (every rank, each at shutdown): waits (to `limit`) for this
  // rank's collectives to finish, closes its mappings of the peers'
  // regions and tensors, meets the peers, and only then frees its own
  // region. False when that could not be done safely: the memory is then
  // kept for the life of the process.
  bool close(const RecordExchange& exchange, std::chrono::milliseconds limit);

  // Shares the ranks' own tensors (for the in-place form), the mappings
  // agreed by every rank before any launch (ipc/tensor_sharing.h).
  TensorSharing& sharing() { return sharing_; }

 private:
  SignalGroup(int rank, int size, int device, const SignalGroupOptions& options);
  // What every kernel of the group is given, but for the call's deadline
  // and fingerprint: filled once, at set-up (view() adds those two).
  void cacheView();
  SignalView view(const Call& call) const;
  int blocksFor(size_t bytes) const;
  void launch(SignalOp op, DataType type, ReduceOp reduceOp, const Call& call);
  // Stream memory operations.
  void memOpsBarrier(void* stream, int barrier, uint32_t collective, uint32_t fingerprint);
  void memOpsAllreduce(const void* input, void* output, size_t count, DataType type, ReduceOp op,
                       bool twoShot, const Call& call);
  void memOpsInPlace(void* const* tensors, size_t count, DataType type, ReduceOp op,
                     const Call& call);
  void memOpsAllgather(const void* input, void* output, size_t countPerRank, DataType type,
                       const Call& call);
  void memOpsReduceScatter(const void* input, void* output, size_t countPerRank, DataType type,
                           ReduceOp op, const Call& call);
  // A stream-memops collective's end, for its deadline (failure()).
  void watchMemOps(const Call& call);
  void* bufferOf(int rank, SignalBuffer kind, uint32_t parity) const;
  void noteStream(void* stream);

  const int rank_;
  const int size_;
  const int device_;
  const SignalGroupOptions options_;
  std::unique_ptr<DeviceBuffer> region_;   // mine
  std::unique_ptr<PinnedMirror> status_;   // the kernels' reports (SignalStatus x blocks)
  void* sideStream_ = nullptr;             // for stop(): beside a stream that may be stuck
  std::vector<void*> regions_;             // every rank's, mapped (mine: region_)
  SignalView view_;                        // cacheView()
  PeerMappings mappings_;
  TensorSharing sharing_{rank_, size_, mappings_};
  uint32_t hostCollectives_ = 0;           // stream memops: collectives so far
  StreamTracker streams_;                  // every stream a collective ran on

  std::mutex watchMutex_;  // guards what follows (failure() runs on the watchdog)
  struct Pending {
    void* mark;
    std::chrono::steady_clock::time_point deadline;
    uint32_t collective;
  };
  // Stream-memops collectives not known finished, oldest first (a vector:
  // few at a time, and no allocation per collective once it has grown).
  std::vector<Pending> pending_;
  std::vector<void*> spareMarks_;          // reached marks, recorded again by the next
  // The oldest pending marks the device has passed go to spareMarks_.
  void retireReached();
  std::string memOpsFailure_;
  uint32_t fingerprints_[2] = {};  // of the last stream-memops collective of each parity
  bool stopped_ = false;
};

}  // namespace ringreduce::cuda
