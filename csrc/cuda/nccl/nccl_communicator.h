// Our own NCCL communicator for one process group: the fallback for ranks on
// other nodes, for what our kernels do not cover, and on request
// (RINGREDUCE_CUDA_ALGO=nccl). Bootstrapped over the group's transport (rank
// 0's unique id reaches the others in a record exchange), so it needs no
// second rendezvous. NCCL refuses two ranks on one GPU: the backend never
// builds one then.
//
// Supervised like our own kernels: the init is non-blocking and bounded,
// and its verdict is exchanged, so a rank whose init failed or hung is named
// on every rank; NcclWatchdog (nccl_watchdog.h) polls NCCL's asynchronous
// error and aborts the communicator when NCCL or the group fails, which
// makes NCCL's kernels let go of the streams they hold.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "cuda/nccl/nccl_library.h"

namespace ringreduce::cuda {

class NcclCommunicator {
 public:
  // Collective. The init is given up (and aborted) after `limit`, which
  // must leave the exchange's own deadline room for one more round: the
  // verdicts (initLimit). Throws on every rank when it failed on any,
  // naming the ranks and why. `limit` also bounds each enqueue that NCCL
  // finishes in the background (ncclInProgress), and the finalize of a
  // close without one of its own (the destructor's). An NCCL older than
  // 2.14 has no bounded init: its blocking one is used, and the log says so.
  NcclCommunicator(const NcclLibrary& nccl, int rank, int size, int device,
                   const RecordExchange& exchange, std::chrono::milliseconds limit);
  // The limit for the init, from the timeout of the collective whose first
  // use of NCCL makes the communicator: half of it. That collective's
  // exchanges (the unique id before the init, the verdicts after it) run
  // under the same timeout, counted from the collective's start, so the
  // other half is theirs: a rank whose init hung is named by the verdicts
  // on every rank, not lost in an exchange that timed out first. Never the
  // timeout of an earlier collective (the group's first on CUDA may have
  // had a longer one) nor of the group (an op may ask for less).
  static std::chrono::milliseconds initLimit(std::chrono::milliseconds opTimeout) {
    return opTimeout / 2;
  }
  // close(limit_) for one still open; aborts one that failed or whose
  // watchdog saw an error (a destroy would wait for kernels that wait on a
  // dead peer).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Empty when NCCL reduces `type` with `op` (int16, bitwise ops and complex
  // products are not NCCL's); otherwise why not.
  static std::string unsupportedReason(DataType type, ReduceOp op);
  // Empty when NCCL can move `type` at all.
  static std::string unsupportedType(DataType type);

  // All on `stream`, device pointers, counts in elements of `type`.
  void allreduce(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                 void* stream);
  void broadcast(void* data, size_t count, DataType type, int root, void* stream);
  void allgather(const void* in, void* out, size_t countPerRank, DataType type, void* stream);
  void reduceScatter(const void* in, void* out, size_t countPerRank, DataType type, ReduceOp op,
                     void* stream);

  // Collective, at a clean shutdown (every rank, after its last NCCL op):
  // ncclCommFinalize, which flushes what was issued and waits with the
  // peers until the communicator is quiescent, then ncclCommDestroy, which
  // then frees without blocking; a destroy alone would drop pending work or
  // block in NCCL's own finalize, with no bound. A finalize that fails or
  // has not finished within `limit` (a peer that never closes) is given up
  // with a warning: the communicator is aborted instead. Where NCCL has no
  // finalize, or the init was the blocking one (whose finalize blocks too),
  // the destroy runs alone. A failed communicator is aborted; an aborted
  // one is left. Any thread; later collectives throw.
  void close(std::chrono::milliseconds limit);

  // NCCL's asynchronous error (any thread): empty while all is well; else
  // a reason naming NCCL's error, the last collective enqueued and this
  // rank, and from then on the communicator counts as failed.
  std::string asyncError();
  // Makes NCCL give up its kernels (which releases the streams they hold)
  // and free the communicator (any thread; the first call counts). Later
  // collectives throw, naming `why`.
  void abort(const std::string& why);
  bool aborted();
  int device() const { return device_; }

 private:
  // One NCCL call on the communicator, with its background part waited for.
  template <typename Enqueue>
  void enqueue(const char* what, std::string description, Enqueue call);
  // The non-blocking init (or the blocking one of an old NCCL): empty, or
  // why it failed (the communicator aborted then).
  std::string initialise(const NcclUniqueId& id, int size);
  // Polls until NCCL's background work on the communicator is over:
  // NCCL's verdict, or `timedOut` set at the deadline. Unlocks `lock`
  // while it sleeps, so that an abort can come in between.
  NcclLibrary::Result settle(std::unique_lock<std::mutex>& lock,
                             std::chrono::steady_clock::time_point deadline, bool* timedOut);
  void abortLocked(const std::string& why);
  void closeLocked(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds limit);
  std::string describe(const char* what, NcclLibrary::Result result) const;
  void check(NcclLibrary::Result result, const char* what);

  const NcclLibrary& nccl_;
  const int rank_;
  const int device_;
  const std::chrono::milliseconds limit_;
  // Guards the handle: no NCCL call on it races the abort that frees it.
  std::mutex mutex_;
  NcclLibrary::Comm comm_ = nullptr;
  bool failed_ = false;      // NCCL reported an error: abort, never destroy
  bool blocking_ = false;    // made by the blocking init: no bounded finalize
  std::string abortReason_;  // set by abort()
  std::string lastOp_;       // "allreduce of 1024 float32", for the reports
};

}  // namespace ringreduce::cuda
