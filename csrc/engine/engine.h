// The torch-free heart of a process group: it owns the transport, the
// executor thread, the workspace and the group's state, and runs what the
// backend submits.
//
// - Collectives get consecutive sequence numbers in issue order (every rank
//   numbers them alike, with no store round trip) and run one at a time in
//   that order; sends and receives are numbered apart and polled between
//   them, so a pending recv never blocks the collectives behind it.
// - Every wait is bounded by the operation's timeout.
// - After a timeout or a transport failure the ranks are out of step: the
//   group refuses every later operation at once with the original reason,
//   and tells its peers, so they fail at once too.
// - Between startCoalescing and endCoalescing operations are held back and
//   then run as one (torch's coalescing manager, batch_isend_irecv).
// - With the collective check on, each collective first allgathers a full
//   fingerprint (op, dtype, size, reduce op, root) and mismatches raise on
//   every rank.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/checks/collective_check.h"
#include "algorithms/checks/neighbour_check.h"
#include "algorithms/comm.h"
#include "algorithms/workspace.h"
#include "core/base/record_exchange.h"
#include "core/config/config.h"
#include "engine/arrival_lesson.h"
#include "engine/executor.h"
#include "engine/function_ref.h"
#include "engine/op_fields.h"
#include "engine/op_trace.h"
#include "engine/operation.h"
#include "transport/host/host_channel.h"
#include "transport/transport.h"

namespace ringreduce {

class Engine {
 public:
  using Describe = std::function<std::string(const CollectiveFingerprint&)>;
  using MakeCallbacks = std::function<std::shared_ptr<OperationCallbacks>(uint64_t seq)>;
  // A collective's dtype name and bytes, for its timeline event.
  struct Label {
    std::string dtype;
    uint64_t bytes = 0;
  };
  using MakeLabel = std::function<Label(const CollectiveFingerprint&)>;

  // `describe` names a collective in mismatch errors, `label` its dtype and
  // size in the timeline (the backend knows the names and sizes of torch's
  // op types and dtypes). `timeline`: where every collective is recorded
  // (core/observe/timeline.h), or null (then nothing is timed).
  // `channel`: the group's shared memory between its ranks on this host
  // (transport/host/host_channel.h), or null; every collective announces
  // itself there, and the engine tells it when the group fails or is
  // aborted. It goes, saying this rank left, when the engine shuts down.
  Engine(std::unique_ptr<Transport> transport, const Config& config, std::string groupName,
         bool checkCollectives, Describe describe, std::shared_ptr<Timeline> timeline = nullptr,
         MakeLabel label = nullptr, std::unique_ptr<HostChannel> channel = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }
  const std::string& groupName() const { return groupName_; }

  // Caller's thread. Numbers and queues a collective that uses `seqCount`
  // sequence numbers; `makeCallbacks` receives the first. Throws Error once
  // the engine is shut down. `summary` is logged with the number.
  // `runner`: who is expected to run it (Executor::submit).
  // `neighbourCheck` false: the collective checks itself on the device (see
  // Operation::neighbourCheck), as it does when run by runOnCaller.
  uint64_t submitCollective(const char* name, std::chrono::milliseconds timeout,
                            Runner runner, const CollectiveFingerprint& fingerprint,
                            uint64_t seqCount,
                            const std::string& summary, Operation::Body body,
                            const MakeCallbacks& makeCallbacks, bool neighbourCheck = true);
  // The same for a send or recv (numbered apart from the collectives).
  uint64_t submitPointToPoint(const char* name, std::chrono::milliseconds timeout,
                              Runner runner, const OpFields& fields, Operation::Post post,
                              const MakeCallbacks& makeCallbacks);

  // Caller's thread: runs a collective on this thread at once, past the
  // queue, when nothing is queued or running, nothing is being coalesced,
  // the full collective check is off and the group is usable. `launch`
  // only enqueues device work on the caller's stream (it never waits for a
  // peer: the device does). It is numbered like a queued collective, so
  // every rank numbers alike whichever way each ran it: `seqCount` must be
  // what its queued form reserves (submitCollective's). Returns its
  // sequence number, or 0 when it cannot run now (the caller queues it,
  // without the neighbour check: a peer that ran it directly sends none).
  // What `launch` throws reaches the caller and, unless InvalidArgument,
  // makes the group unusable, tells the peers and writes the trace, as a
  // queued failure does. abort() from any thread ends it at once: the
  // submit mutex is taken to number it and to say it ended, never held while
  // it waits for its peers.
  //
  // The hot path of a small device collective, so it costs the least it
  // can: the submit mutex is its one lock (the executor's busy state is an
  // atomic); one clock read serves its deadline and its trace entry, written
  // once after the launch; the fingerprint is hashed once and `launch` finds
  // the hash in OpContext::fingerprintWord (the word its device flags carry:
  // no need to hash again); `fields` stay plain fields until the trace is
  // read or an Info log line is written. Nothing is allocated unless Info
  // logging is on, the timeline is on, or the launch fails.
  using LaunchRef = FunctionRef<void(const OpContext&)>;
  //
  // `onlyWherePeersWait`: only where every peer has announced this
  // collective on the host channel (an asynchronous caller, which must not
  // wait here for a peer that may first wait for something this rank does
  // after the call), within kArrivalWait of this rank announcing it; 0
  // otherwise, and the caller queues it under the number announced (a peer
  // that saw the announcement may be waiting for it already).
  //
  // `publishAhead` (with onlyWherePeersWait; null: none): where the peers
  // have not all announced it yet, runs before this rank waits for them,
  // with OpContext::ahead set, to put this rank's input up on the host
  // channel (the same body as `launch`, returning after its first turn), so
  // that a peer that comes, while this rank waits or before the queued form
  // runs, completes its part at once instead of waiting for this rank to
  // fill it, for its worker or its wait(). Not inside a coalescing block (its
  // held collectives run as one). It must leave the caller's tensors as they
  // were: the queued form runs the body again from the start.
  uint64_t runOnCaller(const char* name, std::chrono::milliseconds timeout,
                       const CollectiveFingerprint& fingerprint, const OpFields& fields,
                       LaunchRef launch, bool onlyWherePeersWait = false,
                       const LaunchRef* publishAhead = nullptr, uint64_t seqCount = 1);
  // Whether runOnCaller would run now.
  bool canRunOnCaller() const;
  // Any thread: the group has failed or was aborted.
  bool givenUp() const;

  // Only inside shutdown()'s `beforeRelease` (the executor has stopped, the
  // transport is still up): an exchange of records among the ranks, for
  // the device paths' cross-rank close. Each call is one round; each
  // round is bounded by `limit`.
  RecordExchange closingExchange(std::chrono::milliseconds limit);

  // Caller's thread: hold operations back, then run them as one operation;
  // `combine` makes the callbacks of the whole from those of its parts.
  // Collectives run in issue order: nothing runs past what is held. An
  // asynchronous host collective may still run on the caller's thread where
  // every peer is in it already and nothing is held (torch's device
  // coalescing manager issues its one coalesced call so); otherwise it, a
  // CUDA collective, a send or a recv is held. A collective whose caller
  // waits for it at once runs as it would outside the block, if it comes
  // before any asynchronous operation of the block; after one (a choice
  // the same on every rank, unlike what happened to be held) it raises,
  // its wait could end only with the block, and the block ends, what it
  // held running as one. A block still open (torch's manager left it)
  // ends first, as endOpenBlock ends it.
  void startCoalescing();
  using Combine = std::function<std::shared_ptr<OperationCallbacks>(
      const std::vector<std::shared_ptr<OperationCallbacks>>& parts)>;
  // True, without calling `combine`: the block held and queued nothing
  // (what it issued ran on the caller's thread), so it is complete now.
  bool endCoalescing(const Combine& combine);
  // Caller's thread, where torch's coalescing manager will never end the
  // open block: a call inside it raised (the manager ends a block only after
  // its one call returns), or a call torch would have held in the block
  // reached the backend after the manager itself raised (see
  // ProcessGroupRing::endBlockTorchLeftOpen). Left open, the block would
  // hold every later operation. Ends it as an early end does: what it held
  // runs now; later operations run as outside a block. `cause` goes to the
  // log. Nothing where no block is open or the group is shut down.
  void endOpenBlock(const char* cause);
  // Any thread: a coalescing block is open (a device path that must not run
  // on the caller's thread inside one asks).
  bool coalescing() const;

  // The next collective's sequence number minus one (torch's
  // getSequenceNumberForGroup).
  uint64_t sequenceNumber();

  // The executor, for a caller about to wait on a result (Executor::helpUntil);
  // empty once the engine is shut down.
  std::weak_ptr<Executor> executor() const { return executor_; }

  // Executor thread only: what the algorithms run on, and whether the group
  // is unusable after an earlier failure.
  Comm comm() {
    Comm c{*transport_, config_, workspace_};
    c.channel = channelView_.load(std::memory_order_relaxed);
    return c;
  }
  // What a launch given to runOnCaller runs on: comm() with the caller's own
  // spin budget (it does not drive the transport, and must not touch it).
  Comm callerComm() {
    Comm c = comm();
    if (c.channel != nullptr) c.waitBudget = &c.channel->callerSpin();
    return c;
  }
  // The group's host channel, or null (the constructor's `channel`, or what
  // the opener made). Any thread.
  const HostChannel* channel() const { return channelView_.load(std::memory_order_acquire); }

  // The group's host channel is made by `opener` when a collective first
  // asks for it (needChannel), not before: a group that never runs a host
  // collective (a CUDA group, a mesh dimension left unused) takes no shared
  // memory. `opener` runs on the thread that runs the queue, given the
  // transport to keep moving while it waits for the other ranks (messages
  // of earlier operations may need it); null from it: no channel, for good.
  // Its exceptions make the group unusable with their message (a setting
  // the ranks disagree on).
  using ChannelOpener = std::function<std::unique_ptr<HostChannel>(Transport& driven)>;
  void openChannelWhenFirstNeeded(ChannelOpener opener);
  // Caller's thread, before a collective whose data is in host memory is
  // run or queued: the first such call queues the channel's opening, in
  // sequence on every rank (every rank issues the same collectives), and
  // returns once it (and what was queued before it) has run; raises what
  // the opening raised (the group is then unusable). One atomic load after
  // the first.
  void needChannel();
  bool failed() const { return !failure_.empty(); }

  // The flight recorder as JSON (engine/op_trace.h); any thread.
  std::string traceJson(const std::string& reason) const;
  // Writes it to RINGREDUCE_TRACE_DIR (if set); returns the path or "".
  std::string dumpTrace(const std::string& reason) const;

  // Any thread: makes the running collective and every later one fail at
  // once with `reason` (ProcessGroup.abort()), tells the peers, and dumps
  // the trace. shutdown() may follow.
  void abort(const std::string& reason);

  // Any thread: operations are queued or running.
  bool busy() const;

  // Caller's thread: returns once everything queued before it has run.
  void waitForQueued();

  // Runs what is queued, fails pending sends/receives and stops the
  // executor; `beforeRelease` runs on the caller's thread before the
  // transport goes. Later submits throw. Idempotent: true the first time.
  bool shutdown(const std::function<void()>& beforeRelease = nullptr);

 private:
  void submit(Operation operation);  // with submitMutex_ held
  // With submitMutex_ held, for a collective issued inside a coalescing
  // block: raises (and ends the block) where its caller would wait on it
  // behind operations held until the block ends.
  void refuseWaitBehindHeld(const char* name, Runner runner);
  // With submitMutex_ held, a block open: ends it before torch's end call
  // (which then finds blockEndedEarly_), submitting what it held to run as
  // one. The count of those operations.
  size_t endBlockEarly();
  std::shared_ptr<OperationCallbacks> traced(std::shared_ptr<OperationCallbacks> callbacks,
                                             uint64_t seq, bool pointToPoint, const char* name,
                                             const std::string& summary, uint32_t fingerprint,
                                             bool publishedAhead = false);
  // `callbacks` as they are, or recording their op under trace entry `id`.
  std::shared_ptr<OperationCallbacks> tracedAs(std::shared_ptr<OperationCallbacks> callbacks,
                                               uint64_t id);
  void runCollective(const Operation& operation);
  std::shared_ptr<TimelineOp> timelineOp(const char* name, uint64_t seq,
                                         const CollectiveFingerprint& fingerprint);
  void recordTimeline(const Operation& operation);
  void startPointToPoint(const Operation& operation);
  // `alreadyQueued`: operations of the block queued ahead of it, finished
  // by now (queue order); the whole fails with the first of their errors.
  void runCoalesced(std::vector<Operation>& operations, OperationCallbacks& combined,
                    const std::vector<std::shared_ptr<OperationCallbacks>>& alreadyQueued = {});
  // A block's sends and receives, posted (a post never waits) and then
  // completed in the order they were issued; the first error is the whole's.
  struct PostedBatch {
    struct Posted {
      Operation* operation;
      OpContext op;  // its deadline counts from the post
      PostedMessage message;
    };
    std::vector<Posted> posted;
    size_t finished = 0;
    std::exception_ptr firstError;
  };
  void postInto(Operation& operation, PostedBatch& batch);
  // True once every message of the batch is complete either way.
  bool pollBatch(PostedBatch& batch, bool abandon);
  // A block of host sends and receives only, on the thread that claimed the
  // executor at the block's end: posted here, completed by the next wait's
  // drive or the worker's (a poller), as a lone send is.
  void startHeldMessages(std::shared_ptr<std::vector<Operation>> operations,
                         std::shared_ptr<OperationCallbacks> combined);
  PostedMessage post(const Operation& operation, const OpContext& op);
  bool pollMessage(OperationCallbacks& callbacks, const OpContext& op, PostedMessage& message,
                   bool abandon);
  std::exception_ptr unusableError(const OpContext& op) const;
  void refuseIfShutDown(const char* name) const;
  void markUnusable(const std::string& reason, bool traceWritten = false);
  void adoptChannel(std::unique_ptr<HostChannel> channel);
  // runOnCaller's failure: the group unusable, the peers told, the trace written.
  void failFromCaller(const std::string& reason);
  // How long an asynchronous caller past the queue waits for its peers to
  // arrive at a collective before it queues it: about what the queued form
  // costs over running it here (a Work completed across threads, the
  // worker's alarm set and cleared: 20-25 us on the 2-core VMs measured in
  // benchmarks/RESULTS.md), so waiting longer than that cannot pay.
  static constexpr std::chrono::microseconds kArrivalWait{25};
  // runOnCaller, for an asynchronous collective whose peers have not all
  // announced it: its publish-ahead, before it waits for them.
  // True where its peers will wait for more of this rank than that first
  // turn (a later turn, a second phase: PublishedAhead::lastTurn false).
  bool publishBeforeQueueing(const char* name, uint64_t seq, uint32_t word,
                             std::chrono::milliseconds timeout, const OpFields& fields,
                             LaunchRef publishAhead);
  // runOnCaller, after announcing collective `seq`: whether every peer has
  // announced it too within `spin`'s budget (false also once aborted).
  bool awaitArrivals(uint64_t seq, SpinBudget& spin);
  // runOnCaller, before an arrival wait: where its last give-up's peers came
  // within arrivalSpin_'s ceiling (arrivalLesson_), it spins long enough again.
  void applyArrivalLesson();
  // runCollective, after the body of collective `seq`, the one given up:
  // tells arrivalLesson_ when its peers came.
  void noteWhenPeersCame(uint64_t seq);
  // With submitMutex_ held: until no collective runs past the queue.
  void awaitOnCaller(std::unique_lock<std::mutex>& lock);
  // Where this rank is, for the peers' waits on the host channel.
  // `at`: when it started (its peers' arrival waits learn from it:
  // arrival_lesson.h).
  void announce(uint64_t seq, uint32_t word, const CollectiveFingerprint& fingerprint,
                Clock::time_point at);

  const int rank_;
  const int size_;
  const Config config_;
  const std::string groupName_;
  const bool checkCollectives_;
  const Describe describe_;
  const std::shared_ptr<Timeline> timeline_;  // null: off
  const MakeLabel label_;
  std::unique_ptr<Transport> transport_;
  // The always-on check's buffers, from one collective to the next (runCollective).
  NeighbourCheck::Spare checkSpare_;
  std::unique_ptr<HostChannel> channel_;  // null: the group spans hosts, or has none (yet)
  // channel_ for readers on any thread: set once, on the thread that runs
  // the queue, while no collective runs past it.
  std::atomic<HostChannel*> channelView_{nullptr};
  ChannelOpener opener_;  // guarded by submitMutex_; null once queued
  std::exception_ptr channelError_;  // why opening it failed (set before waitForQueued returns)
  bool channelRequested_ = true;  // guarded by submitMutex_: no opener waits to be queued
  // The opening has run (or there is none): needChannel returns at once.
  std::atomic<bool> channelSettled_{true};
  OpTrace trace_;
  std::shared_ptr<Executor> executor_;
  Workspace workspace_;      // executor thread only
  std::string failure_;      // executor thread only: why the group is unusable
  std::atomic<bool> unusable_{false};  // any thread: failure_ is set
  mutable std::mutex submitMutex_;  // orders sequence numbers with queue order; guards below
  uint64_t nextSeq_ = 0;     // collectives: every rank numbers them alike
  uint64_t nextP2PSeq_ = 0;  // send/recv: numbered apart, they involve two ranks
  bool accepting_ = true;    // false once shutdown() began
  // The collective whose every publication runOnCaller put up before it
  // was queued (publishBeforeQueueing), until submitCollective queues it; 0: none.
  uint64_t publishedWhole_ = 0;
  // The collective whose first turn runOnCaller put up before its peers
  // came, whole or not (its trace entry says so); 0: none.
  uint64_t publishedAhead_ = 0;
  // How long an asynchronous caller waits for its peers to arrive
  // (awaitArrivals), learnt from how its recent waits ended
  // (core/base/spin_budget.h): where the peers come later than kArrivalWait
  // call after call (the eager functional collectives' Python between
  // calls differs by more than that from rank to rank), each wait costs
  // the whole of it and then the queue anyway, while the caller's part is
  // put up for them at once (publishBeforeQueueing). Used by the one caller
  // that runs past the queue at a time (onCallerActive_).
  SpinBudget arrivalSpin_;
  // When the peers of its last give-up did come, told by the queued form
  // that ran it (runCollective): its next wait learns from that.
  ArrivalLesson arrivalLesson_;
  // How much longer it waits once it has put up its first turn of a
  // collective whose peers will wait for more of it (publishBeforeQueueing
  // true: a 2-rank allreduce from 512 KiB, whose second phase is each
  // rank's half of the result): queued, that rest would wait for this
  // rank's wait() or for its worker's grace (RINGREDUCE_CALLER_GRACE_US), a
  // peer arriving meanwhile waiting with it; run here, it goes on as the
  // peer comes. So it waits up to that grace, learnt as arrivalSpin_ is.
  // Eager functional allreduces of 512 KiB-1 MiB at world 2 on the 2-core
  // EPYC VM, both forms in the same processes taking turns: the slowest
  // rank's p50 48-113 us lower (of 200-450), as the early rank stopped
  // queueing most of them (benchmarks/RESULTS.md, "Every collective").
  // Likewise where its body cannot put a turn up ahead (it reads the
  // peers' tensors in place, or scales the caller's first): its peers wait
  // for all of it.
  SpinBudget aheadArrivalSpin_;
  // Its ceiling, whatever the grace: an asynchronous caller (DDP's backward
  // between two buckets) must get back to its work; a grace set long for the
  // worker's sake (RINGREDUCE_CALLER_GRACE_US of 10 ms) would otherwise hold
  // it that long in the call.
  static constexpr std::chrono::microseconds kMostAheadArrivalWait{1000};
  // Written under submitMutex_; atomic so that coalescing() reads it without
  // the lock (the device-flags path asks on every call).
  std::atomic<bool> coalescing_{false};
  std::vector<Operation> coalesced_;
  // With submitMutex_ held: what the block holds, taken out of it, no longer
  // flagged as held (its end, or a refusal that ends it early).
  std::shared_ptr<std::vector<Operation>> takeHeld();
  // The open block has had an operation its caller does not wait for
  // (startCoalescing): a waited-for one after it raises.
  bool blockIssuedAsync_ = false;
  // What the open block queued without holding it (waited-for collectives):
  // the block's Work completes behind them and fails with them (torch waits
  // on that Work, not theirs, for the device coalescing manager's call).
  std::vector<std::shared_ptr<OperationCallbacks>> blockQueued_;
  // A waited-for call ended the block early (refuseWaitBehindHeld): the
  // block's own end, if the caller caught the error inside it, finds
  // nothing left to run instead of raising.
  bool blockEndedEarly_ = false;
  // A collective runs past the queue (runOnCaller), without holding the lock;
  // what would start another one meanwhile waits on onCallerDone_.
  bool onCallerActive_ = false;
  std::condition_variable onCallerDone_;
};

}  // namespace ringreduce
