// Tagged point-to-point messaging between the ranks of one group: all that
// the algorithms and the engine see of the network.
//
// An implementation provides four primitives (post a send, post a receive,
// poll a request, cancel one) plus progress and sleep: UCX in transport/ucx,
// an in-process loopback for unit tests in transport/loopback. This class
// builds on them what must behave alike on every transport:
// - the collective's fingerprint in every tag, compared on arrival, so ranks
//   in different collectives get an error instead of each other's data;
// - receives of exactly the expected size;
// - waits bounded by the op's deadline, spinning briefly and then sleeping,
//   whose timeouts name the peer and the ranks not seen in the collective;
// - cancelling what a failed op left in flight.
//
// Threading: after construction one thread (the group's executor) drives it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/op_context.h"
#include "core/base/spin_budget.h"
#include "core/config/config.h"
#include "transport/rendezvous/progress_board.h"

namespace ringreduce {

// One posted send or receive. Plain data: the transport owns the request
// behind `handle` and releases it when it completes or is abandoned.
struct Request {
  void* handle = nullptr;  // the implementation's request while in flight
  int peer = -1;           // -1: a receive from any source
  size_t bytes = 0;
  uint64_t senderTag = 0;  // for receives, once done: who sent it (tagSourceRank)
  int fingerprint = -1;    // for collective receives: the fingerprint expected
  bool isRecv = false;
  bool done = false;
};

// What an implementation reports for a posted request.
struct Completion {
  enum class State { InProgress, Done, Truncated, Failed };
  State state = State::InProgress;
  size_t length = 0;       // receives: the bytes that arrived
  uint64_t senderTag = 0;  // receives: the tag the sender used
  std::string error;       // Failed: why, in the transport's words
};

class Transport {
 public:
  Transport(int rank, int size, const Config& config);
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }
  // Settings decided once the transport knew its peers (the defaults that
  // depend on how many ranks share this machine, Config::fromEnvironment);
  // only before the first operation, and before an Executor reads them.
  void adoptConfig(const Config& config);

  Request isend(int peer, uint64_t tag, const void* data, size_t bytes, const OpContext& op);
  // `mask` selects the tag bits that must match (kTagAnySourceMask: any sender).
  Request irecv(int peer, uint64_t tag, void* data, size_t bytes, const OpContext& op,
                uint64_t mask = ~0ull);

  // True once `request` finished; throws TransportError if it failed. Does
  // not progress the transport.
  bool test(Request& request, const OpContext& op);
  // Progresses until `request` finishes. Spins for as long as spinBudget()
  // says (a yield would hand the core to any background thread for a whole
  // time slice), then sleeps until an event. Throws TimeoutError at op.deadline naming
  // the peer.
  void wait(Request& request, const OpContext& op);
  void waitAll(std::vector<Request>& requests, const OpContext& op);
  // Like wait, but returns false at op.deadline instead of throwing.
  bool waitUntilDeadline(Request& request, const OpContext& op);

  // "send p2p#3 timed out after 100 ms on rank 0 (operation timeout reached):
  // still waiting to ..."
  std::string describeTimeout(const Request& request, const OpContext& op) const;

  // Whose waits follow: the thread that drives the transport says
  // (Executor). Each kind keeps its own account of whether spinning pays
  // (core/base/spin_budget.h): the worker's spins are short
  // (RINGREDUCE_SPIN_US at most: its caller computes meanwhile), a caller
  // blocked on the result anyway spins up to RINGREDUCE_WAIT_SPIN_US.
  // Worker until told otherwise. Only the driving thread touches either.
  enum class Waiter { Worker, Caller };
  void setWaiter(Waiter waiter) {
    activeSpin_ = waiter == Waiter::Caller ? &callerSpin_ : &workerSpin_;
  }
  // How long the current waiter's waits spin before they sleep.
  SpinBudget& spinBudget() { return *activeSpin_; }
  // The callers' account, for tests: touch it only while no caller drives.
  SpinBudget& callerSpinBudget() { return callerSpin_; }

  // Cancels and releases the requests of `op` still in flight (after an
  // error, so that no late message lands in a buffer the caller has given up).
  void abandonOutstanding(const OpContext& op);
  // The same for one request (a send/recv that timed out).
  void abandon(Request& request);
  // Keeps `memory` until the transport is gone. For the buffer of a request
  // abandoned in flight: UCX cannot take back a send it has accepted, so it
  // may still read the buffer after abandon() returned (and only UCX's
  // teardown, in the implementation's destructor, ends that). A transport
  // over another's messages (SubgroupTransport) hands it to that one.
  virtual void keepUntilClosed(std::shared_ptr<void> memory) {
    keptUntilClosed_.push_back(std::move(memory));
  }

  // Called by waits whenever a pass of progress brought nothing new, on the
  // thread that drives the transport; it may throw to end the wait (the
  // always-on collective check watches for its neighbour's fingerprint so).
  // One at a time; null clears it.
  void setWatch(std::function<void()> watch) { watch_ = std::move(watch); }

  // Any thread: every wait from now on throws TransportError with `reason`
  // (ProcessGroup.abort()); a sleeping wait notices within 100 ms.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  std::string abortReason() const;

  // After a failure that leaves the group out of step: tell the peers.
  virtual void announceFailure(const std::string& reason) {}
  // Throws TransportError if `peer` (any peer when -1) is known to be dead,
  // or, for collectives, if a peer gave up on the group.
  virtual void checkPeersAlive(int peer, const OpContext& op) const {}
  // Whether `peer` said goodbye: it destroyed its group or exited, on purpose.
  virtual bool peerLeft(int peer) const { return false; }
  // For an open receive from one peer: throws TransportError if that peer
  // has left the group, since what it did not send before leaving never
  // comes. Its goodbye travels apart from the data, so the transport is
  // progressed a moment more first; returns quietly if the receive
  // completed meanwhile (test() then says so), or if the peer is still in
  // the group. Sends are not judged: a peer may leave once it has our data,
  // before our side has heard that it arrived.
  void throwIfSenderLeft(Request& request, const OpContext& op);
  // Whether sends and receives may name CUDA device memory (a UCX built
  // with CUDA transports); host memory only otherwise. The device ring
  // (algorithms/device/ring.h) needs it on every rank.
  virtual bool carriesDeviceMemory() const { return false; }

  // One pass of progress; returns the number of events handled.
  virtual unsigned progress() = 0;
  // Sleeps until the transport has an event, `extraFd` is readable, or
  // `timeoutMs` passes (-1: no limit). Returns at once if events are pending.
  virtual void sleepUntilEvent(int extraFd, int timeoutMs) {
    if (armForSleep()) sleepArmed(extraFd, timeoutMs);
  }
  // sleepUntilEvent in two halves, so that the thread driving the transport
  // can let another thread drive it while it sleeps (engine/executor.h):
  // armForSleep is a transport call (false: events are pending, progress
  // instead); sleepArmed touches nothing that the driving thread uses. A
  // transport must override either both halves (UCX, loopback: then an
  // Executor may run on it) or sleepUntilEvent alone (the decorators and the
  // simulated transport, which one thread drives).
  virtual bool armForSleep() { return true; }
  virtual void sleepArmed(int extraFd, int timeoutMs) { sleepUntilEvent(extraFd, timeoutMs); }
  // What sleepArmed polls, for a thread that drives the transport and must
  // sleep on other fds beside it (a wait on the host channel,
  // transport/host/host_channel.h): up to `room` fds into `fds`, readable
  // once armForSleep() returned true and an event came. None (the default):
  // the transport has no fd, and such a sleep is cut into short slices.
  virtual size_t eventFds(int* fds, size_t room) const { return 0; }
  // How the messages to `peer` travel (for logs).
  virtual std::string describeEndpoint(int peer) = 0;

 protected:
  // Posts a send; returns its handle, or null when it completed at once.
  // On failure returns null and sets *error.
  virtual void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                         std::string* error) = 0;
  // Posts a receive matching (tag & mask); always returns a handle, or null
  // with *error set.
  virtual void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                         std::string* error) = 0;
  // The state of a posted request; once it is not InProgress the handle is
  // released and must not be used again.
  virtual Completion poll(void* handle, bool isRecv) = 0;
  // Cancels and releases a posted request.
  virtual void cancel(void* handle) = 0;
  // The same for a send to, or a receive from, `peer` (-1: any source)
  // abandoned in flight. Where the implementation cannot take back a
  // message already under way, it returns only once its buffer is no
  // longer read or written (bounded).
  virtual void cancelInFlight(void* handle, int peer, bool isRecv) { cancel(handle); }

  // Collectives that wait long announce themselves here (transport/rendezvous/progress_board.h).
  void setProgressBoard(std::unique_ptr<ProgressBoard> board) { board_ = std::move(board); }
  // Implementations call this first in their destructor, while cancel() works.
  void abandonAll() { abandonWhere(true, 0); }

 private:
  [[noreturn]] void throwTimeout(const Request& request, const OpContext& op);
  void explainFailure(int peer, const OpContext& op);
  void announceIfStalled(const OpContext& op, Clock::time_point now);
  void abandonWhere(bool all, uint64_t owner);
  std::string where(const OpContext& op) const;

  const int rank_;
  const int size_;
  Config config_;
  SpinBudget workerSpin_;
  SpinBudget callerSpin_;
  SpinBudget* activeSpin_ = &workerSpin_;
  std::function<void()> watch_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abortMutex_;
  std::string abortReason_;  // guarded by abortMutex_
  std::unique_ptr<ProgressBoard> board_;
  struct Outstanding {
    uint64_t owner;  // OpContext::owner()
    int peer;
    bool isRecv;
  };
  std::unordered_map<void*, Outstanding> outstanding_;  // by handle
  void cancelOutstanding(void* handle, const Outstanding& what);
  // Destroyed after the implementation's destructor, so after UCX's teardown.
  std::vector<std::shared_ptr<void>> keptUntilClosed_;
};

}  // namespace ringreduce
