// The torch-free heart of a process group: queue, numbering, failure (engine.h)
#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <optional>
#include <utility>

#include "algorithms/checks/neighbour_check.h"
#include "algorithms/host_channel/turn.h"
#include "algorithms/record_allgather.h"
#include "core/base/errors.h"
#include "core/observe/latency_probe.h"
#include "core/observe/log.h"
#include "core/base/core_yield.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// The 8 bits of a fingerprint that travel in every message tag, folded
// from its word (fingerprintWord).
uint8_t fingerprintByte(uint32_t hash) {
  return static_cast<uint8_t>(hash ^ (hash >> 8) ^ (hash >> 16) ^ (hash >> 24));
}

std::string errorMessage(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Records an operation's states in the flight recorder around the
// backend's callbacks.
class TracedCallbacks : public OperationCallbacks {
 public:
  TracedCallbacks(std::shared_ptr<OperationCallbacks> inner, OpTrace& trace, uint64_t id)
      : inner_(std::move(inner)), trace_(trace), id_(id) {}
  std::shared_ptr<void> enterDevice() override {
    if (!started_) {
      started_ = true;
      trace_.started(id_);
      inner_->started();
    }
    return inner_->enterDevice();
  }
  void started() override {}
  void heldInBlock(bool held) override { inner_->heldInBlock(held); }
  void stageIn(const OpContext& op) override { inner_->stageIn(op); }
  void stageOut() override { inner_->stageOut(); }
  void succeeded(int sourceRank) override {
    trace_.completed(id_);
    inner_->succeeded(sourceRank);
  }
  void failed(std::exception_ptr error) override {
    trace_.failed(id_, errorMessage(error));
    inner_->failed(error);
  }
  std::exception_ptr error() const override { return inner_->error(); }
  std::shared_ptr<OperationCallbacks> wrapped() const override { return inner_; }

 private:
  std::shared_ptr<OperationCallbacks> inner_;
  OpTrace& trace_;
  const uint64_t id_;
  bool started_ = false;
};

}  // namespace

Engine::Engine(std::unique_ptr<Transport> transport, const Config& config, std::string groupName,
               bool checkCollectives, Describe describe, std::shared_ptr<Timeline> timeline,
               MakeLabel label, std::unique_ptr<HostChannel> channel)
    : rank_(transport->rank()),
      size_(transport->size()),
      config_(config),
      groupName_(std::move(groupName)),
      checkCollectives_(checkCollectives),
      describe_(std::move(describe)),
      timeline_(std::move(timeline)),
      label_(std::move(label)),
      transport_(std::move(transport)),
      trace_(config.traceBufferSize),
      arrivalSpin_(kArrivalWait, config.adaptiveSpin),
      aheadArrivalSpin_(std::min(std::chrono::microseconds(config.callerGraceMicroseconds),
                                 kMostAheadArrivalWait),
                        config.adaptiveSpin) {
  // Passes that yield the core expect the peers' turns in between.
  if (config.spinYields) {
    arrivalSpin_.setDescheduledGap(kLongYield);
    aheadArrivalSpin_.setDescheduledGap(kLongYield);
  }
  adoptChannel(std::move(channel));
  executor_ = std::make_shared<Executor>(*transport_);
}

void Engine::adoptChannel(std::unique_ptr<HostChannel> channel) {
  if (!channel) return;
  channel->setDescribe([describe = describe_](const void* detail, size_t bytes) {
    CollectiveFingerprint fingerprint;
    std::memcpy(&fingerprint, detail, std::min(bytes, sizeof(fingerprint)));
    return describe ? describe(fingerprint) : std::string("a collective");
  });
  channel_ = std::move(channel);
  channelView_.store(channel_.get(), std::memory_order_release);
}

void Engine::openChannelWhenFirstNeeded(ChannelOpener opener) {
  std::lock_guard<std::mutex> lock(submitMutex_);
  opener_ = std::move(opener);
  channelRequested_ = opener_ == nullptr;
  channelSettled_.store(opener_ == nullptr, std::memory_order_release);
}

void Engine::needChannel() {
  if (channelSettled_.load(std::memory_order_acquire)) return;  // every call after the opening
  {
    std::unique_lock<std::mutex> lock(submitMutex_);
    awaitOnCaller(lock);
    if (!channelRequested_) {
      if (!accepting_) return;
      // Queued like a collective, so it runs after what this rank queued
      // before: every rank opens the channel at the same place in its
      // sequence, and no collective's body sees it appear.
      executor_->submit(
          [this, opener = std::move(opener_)] {
            try {
              std::unique_ptr<HostChannel> opened = opener(*transport_);
              // An abort that came while it was being opened reaches it too.
              if (opened && transport_->aborted()) opened->abort(transport_->abortReason());
              adoptChannel(std::move(opened));
            } catch (const std::exception& e) {
              // The ranks cannot agree on the channel (a setting differs, a
              // rank is missing): every rank fails here, saying why; the
              // caller waiting in needChannel raises it as it is.
              RR_LOG(Warn, rank_, e.what());
              channelError_ = std::current_exception();
              markUnusable(e.what());
            }
            channelSettled_.store(true, std::memory_order_release);
          },
          Runner::CallerOrWorker);
      opener_ = nullptr;
      channelRequested_ = true;
    }
    // Else another thread of this rank queued the opening and may still be
    // waiting for it: this one waits too, or it would choose its path
    // before the channel is there, where its peers chose after.
  }
  // Returns with the channel in its final state, alike on every rank (it
  // opens on all or on none), so that what the caller decides from it now
  // (run past the queue, or queue without the neighbour check) every rank
  // decides alike.
  waitForQueued();
  if (channelError_) std::rethrow_exception(channelError_);
}

void Engine::announce(uint64_t seq, uint32_t word, const CollectiveFingerprint& fingerprint,
                      Clock::time_point at) {
  static_assert(sizeof(CollectiveFingerprint) <= PositionLine::kDetailBytes,
                "a fingerprint must fit a position line");
  if (HostChannel* channel = channelView_.load(std::memory_order_relaxed)) {
    channel->announce(seq, word, &fingerprint, sizeof(fingerprint), at);
  }
}

Engine::~Engine() { shutdown(); }

uint64_t Engine::sequenceNumber() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return nextSeq_;
}

bool Engine::shutdown(const std::function<void()>& beforeRelease) {
  {
    std::unique_lock<std::mutex> lock(submitMutex_);
    awaitOnCaller(lock);  // it runs on the channel and the transport shutdown releases
    if (!accepting_ || executor_ == nullptr) return false;
    accepting_ = false;  // submits are refused from here on
  }
  // Runs what was queued (those tasks still use the executor and the
  // transport), fails pending sends/receives and joins the thread; only then
  // may the executor and the transport go.
  executor_->stop();
  executor_.reset();
  if (timeline_) timeline_->flush();  // every operation has run and is recorded
  if (beforeRelease) beforeRelease();
  channelView_.store(nullptr, std::memory_order_release);
  channel_.reset();  // says this rank left, to peers still waiting on it
  transport_.reset();
  return true;
}

void Engine::refuseIfShutDown(const char* name) const {
  if (!accepting_) {
    throw Error(std::string("ringreduce: ") + name + " on rank " + std::to_string(rank_) +
                ": process group '" + groupName_ + "' has been shut down");
  }
}

uint64_t Engine::submitCollective(const char* name, std::chrono::milliseconds timeout,
                                  Runner runner, const CollectiveFingerprint& fingerprint,
                                  uint64_t seqCount,
                                  const std::string& summary, Operation::Body body,
                                  const MakeCallbacks& makeCallbacks, bool neighbourCheck) {
  std::unique_lock<std::mutex> lock(submitMutex_);
  awaitOnCaller(lock);
  refuseIfShutDown(name);
  refuseWaitBehindHeld(name, runner);
  if (checkCollectives_) {
    // The check runs first with the op's own sequence number and a neutral
    // tag fingerprint (it must see the mismatch to name it); the body's
    // parts follow it.
    body = [this, fingerprint, inner = std::move(body)](const OpContext& ctx) {
      OpContext neutral = ctx;
      neutral.fingerprint = 0;
      neutral.fingerprintWord = 0;
      verifySameCollective(comm(), neutral, fingerprint, describe_);
      inner(ctx.part(1));
    };
    seqCount += 1;
  }
  const uint64_t seq = nextSeq_ + 1;
  nextSeq_ += seqCount;
  if (publishedWhole_ != 0) {
    if (publishedWhole_ == seq && runner == Runner::CallerOrWorker) {
      runner = Runner::CallerWhenWaited;
    }
    publishedWhole_ = 0;
  }
  const bool publishedAhead = publishedAhead_ == seq;
  publishedAhead_ = 0;
  RR_LOG(Info, rank_, groupName_ << " " << name << " #" << seq << ": " << summary);
  Operation operation;
  operation.fingerprintWord = fingerprintWord(fingerprint);
  operation.fingerprint = fingerprintByte(operation.fingerprintWord);
  operation.callbacks =
      traced(makeCallbacks(seq), seq, false, name, summary, operation.fingerprintWord,
             publishedAhead);
  operation.name = name;
  operation.seq = seq;
  operation.timeout = timeout;
  operation.runner = runner;
  operation.body = std::move(body);
  operation.seqCount = seqCount;
  operation.neighbourCheck = neighbourCheck;
  operation.identity = fingerprint;
  if (timeline_) operation.timeline = timelineOp(name, seq, fingerprint);
  submit(std::move(operation));
  return seq;
}

bool Engine::canRunOnCaller() const {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return accepting_ && executor_ != nullptr && !coalescing_ && !checkCollectives_ &&
         !onCallerActive_ && !unusable_ && !transport_->aborted() && !executor_->busy();
}

bool Engine::givenUp() const {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return unusable_ || (transport_ != nullptr && transport_->aborted());
}

uint64_t Engine::runOnCaller(const char* name, std::chrono::milliseconds timeout,
                             const CollectiveFingerprint& fingerprint, const OpFields& fields,
                             LaunchRef launch, bool onlyWherePeersWait,
                             const LaunchRef* publishAhead, uint64_t seqCount) {
  // The lock orders the number with the queue; it is not held while the
  // collective runs, so abort(), givenUp() and busy() from another thread
  // (a watchdog, shrink_group(SHRINK_ABORT)) answer at once. What would
  // start a collective meanwhile waits for this one instead (onCallerActive_).
  uint64_t seq = 0;
  bool arriving = false;  // an asynchronous caller whose peers are not all here yet
  bool publishedFirst = false;  // its first turn went up before its peers came
  {
    std::unique_lock<std::mutex> lock(submitMutex_);
    awaitOnCaller(lock);
    refuseIfShutDown(name);
    // In a coalescing block: not past what is held, and not what would
    // raise as queued (startCoalescing).
    const bool held = coalescing_ && (!coalesced_.empty() ||
                                      (!onlyWherePeersWait && blockIssuedAsync_));
    if (held || checkCollectives_ || unusable_ || transport_->aborted() || executor_->busy()) {
      return 0;
    }
    if (onlyWherePeersWait && channel_ == nullptr) return 0;
    seq = nextSeq_ + 1;
    arriving = onlyWherePeersWait && !channel_->peersAnnounced(seq);
    // Numbered only once it is sure to run here; until then no other
    // thread numbers a collective either (onCallerActive_), so the queued
    // form, if it comes to that, takes this same number. It reserves the
    // numbers its queued form would (seqCount), or a peer that queued it
    // would number every later collective apart from this rank.
    if (!arriving) nextSeq_ = seq + seqCount - 1;
    if (coalescing_ && onlyWherePeersWait) blockIssuedAsync_ = true;
    onCallerActive_ = true;
  }
  struct EndOnCaller {  // however it ends, the next collective may start
    Engine& engine;
    ~EndOnCaller() {
      {
        std::lock_guard<std::mutex> lock(engine.submitMutex_);
        engine.onCallerActive_ = false;
      }
      engine.onCallerDone_.notify_all();
    }
  } endOnCaller{*this};
  const uint32_t word = fingerprintWord(fingerprint);
  // The op's one clock read: when it was announced (its peers' arrival
  // waits learn from it), its deadline and its time in the trace.
  const Clock::time_point now = Clock::now();
  announce(seq, word, fingerprint, now);
  if (arriving) {
    // This rank says it is in the collective (it will run it, here or
    // queued), then waits a moment for its peers to say the same: those
    // that arrive meanwhile see it and run theirs on their own threads, and
    // if all come this one runs here too, costing no queue, no Work to
    // complete across threads and no worker's alarm. Otherwise it goes to
    // the queue as before, under this number.
    //
    // Its first turn goes up before it waits (publishBeforeQueueing), as a
    // caller that waits puts its input up before it waits for its peers':
    // a peer that arrives meanwhile finds it there and completes its part at
    // once, instead of waiting for this rank to see it and fill its part
    // then; this rank's body adopts the turn (exchangeTurn). Where they do
    // not come, the queued form takes it from there.
    // Not where its first turn would wait first for peers that have not
    // come to a collective this rank left without waiting for them
    // (HostChannel::oweWait): a run that publishes ahead must not wait.
    applyArrivalLesson();
    const bool moreToCome = publishAhead != nullptr && !coalescing_ &&
                            !transport_->aborted() && !channel_->owesUnsettledWait() &&
                            publishBeforeQueueing(name, seq, word, timeout, fields, *publishAhead);
    // Where its peers will wait for it, it waits up to the worker's grace:
    // run here, it goes on as they come, instead of keeping them waiting for
    // its wait() or its worker. They wait for the rest of it where its first
    // turn went up ahead, and for all of it where its body cannot put a turn
    // up ahead (publishAhead null: it reads the peers' tensors in place, or
    // changes the caller's tensors first). The latter had waited only
    // arrivalSpin_: eager functional all-gathers of 1 MiB per rank (read in
    // place), whose torch code between calls lets the ranks drift further
    // apart, then went to the worker, beside the caller's own torch code on
    // 2 cores (collective_anchors.py, the two builds taking turns: the
    // slowest rank's p50 633-642 us back to back before, 477-535 after;
    // Open MPI's call reached through torch 437-493).
    const bool peersWaitForIt = moreToCome || (publishAhead == nullptr && !coalescing_);
    if (!awaitArrivals(seq, arrivalSpin_) &&
        (!peersWaitForIt || !awaitArrivals(seq, aheadArrivalSpin_))) {
      arrivalLesson_.gaveUp(seq, now);
      return 0;
    }
    std::lock_guard<std::mutex> lock(submitMutex_);
    publishedFirst = publishedAhead_ == seq;
    nextSeq_ = seq + seqCount - 1;
    publishedWhole_ = 0;  // nothing of it is queued
    publishedAhead_ = 0;
  }
  RR_LOG(Info, rank_, groupName_ << " " << name << " #" << seq << ": "
                                 << fields << " (direct)");
  OpContext op;
  op.opName = name;
  op.seq = seq;
  op.timeout = timeout;
  op.deadline = now + timeout;
  op.fingerprintWord = word;
  op.fingerprint = fingerprintByte(op.fingerprintWord);
  probe::mark(ProbePoint::OnCallerStarted);
  // The timeline (off by default) draws it with its phases, as a queued one.
  std::shared_ptr<TimelineOp> line;
  if (timeline_) {
    line = timelineOp(name, seq, fingerprint);
    op.phases = &line->phases;
  }
  const auto record = [&](const char* error) {
    if (trace_.enabled()) {
      trace_.onCaller(seq, name, fields, op.fingerprintWord, now, error, publishedFirst);
    }
    if (line) timeline_->record(*line, Clock::now(), error ? error : "");
  };
  try {
    PhaseScope transfer(op.phases, Phase::Transfer);
    launch(op);
  } catch (const std::exception& e) {
    record(e.what());
    if (dynamic_cast<const InvalidArgument*>(&e) == nullptr) failFromCaller(e.what());
    throw;
  }
  record(nullptr);
  if (channel_) channel_->finished(seq + seqCount - 1);  // as the queued form ends
  probe::mark(ProbePoint::OnCallerFinished);
  return seq;
}

bool Engine::publishBeforeQueueing(const char* name, uint64_t seq, uint32_t word,
                                   std::chrono::milliseconds timeout, const OpFields& fields,
                                   LaunchRef publishAhead) {
  OpContext op(name, seq, timeout);
  op.fingerprintWord = word;
  op.fingerprint = fingerprintByte(word);
  PublishedAhead published;
  op.ahead = &published;
  try {
    publishAhead(op);
  } catch (const std::exception& e) {
    // Nothing of it is queued: as a failed launch, under its number.
    {
      std::lock_guard<std::mutex> lock(submitMutex_);
      nextSeq_ = seq;
    }
    if (trace_.enabled()) trace_.onCaller(seq, name, fields, word, op.started(), e.what());
    if (dynamic_cast<const InvalidArgument*>(&e) == nullptr) failFromCaller(e.what());
    throw;
  }
  if (!published.published) return false;  // no turn to take (nothing to move): all queued
  // Its first turn is up: the queued form takes it from there. Where that
  // was all the peers wait for, the queued form may wait for its caller.
  std::lock_guard<std::mutex> lock(submitMutex_);
  publishedWhole_ = published.lastTurn ? seq : 0;
  publishedAhead_ = seq;
  return !published.lastTurn;
}

void Engine::noteWhenPeersCame(uint64_t seq) {
  // The peers' own announcements say when they came; where one has moved on
  // already, the body's end bounds it.
  const HostChannel* channel = channelView_.load(std::memory_order_acquire);
  std::optional<Clock::time_point> came;
  if (channel != nullptr) came = channel->peersAnnouncedAt(seq);
  arrivalLesson_.ran(seq, came.value_or(Clock::now()));
}

void Engine::applyArrivalLesson() {
  const std::optional<std::chrono::nanoseconds> late = arrivalLesson_.take();
  // Peers late for want of a core (cpu_contention.h): a longer spin would
  // hold one they need.
  if (late && !executor_->cpuContended()) teachArrivalWaits(*late, arrivalSpin_, aheadArrivalSpin_);
}

bool Engine::awaitArrivals(uint64_t seq, SpinBudget& spin) {
  spin.startWait();
  while (!channel_->peersAnnounced(seq)) {
    // An abort from another thread ends the wait: the queued form then
    // fails with its reason.
    if (transport_->aborted()) {
      spin.abandon();
      return false;
    }
    if (!spin.keepSpinning(spin.now())) return false;
    if (config_.spinYields) yieldCore();
  }
  spin.finishWait();
  return true;
}

void Engine::awaitOnCaller(std::unique_lock<std::mutex>& lock) {
  onCallerDone_.wait(lock, [this] { return !onCallerActive_; });
}

// The ranks are out of step now: what markUnusable does for a queued
// collective, from the caller's thread. The peers waiting on the channel
// fail at once (its Failed state), those in a UCX wait through the
// announcement, which the thread that drives the transport sends (the
// transport is not for two threads at once); the trace is written here, so
// it exists by the time the caller sees the error.
void Engine::failFromCaller(const std::string& reason) {
  unusable_ = true;  // no later collective runs past the queue
  transport_->abort(reason);
  if (channel_) channel_->fail(reason);
  dumpTrace(reason);
  executor_->submit([this, reason] { markUnusable(reason, /*traceWritten=*/true); },
                    Runner::Worker);
}

RecordExchange Engine::closingExchange(std::chrono::milliseconds limit) {
  const OpContext op("shutdown", nextSeq_ + 1, limit);
  auto round = std::make_shared<uint32_t>(0);
  return [this, op, round](const void* mine, void* all, size_t bytes) {
    exchangeRecords(comm(), op, (*round)++, mine, all, bytes);
  };
}

uint64_t Engine::submitPointToPoint(const char* name, std::chrono::milliseconds timeout,
                                    Runner runner, const OpFields& fields, Operation::Post post,
                                    const MakeCallbacks& makeCallbacks) {
  std::unique_lock<std::mutex> lock(submitMutex_);
  awaitOnCaller(lock);
  refuseIfShutDown(name);
  const uint64_t seq = ++nextP2PSeq_;
  RR_LOG(Info, rank_, groupName_ << " " << name << " p2p#" << seq << ": " << fields);
  Operation operation;
  operation.callbacks = tracedAs(makeCallbacks(seq), trace_.queued(seq, true, name, fields));
  operation.name = name;
  operation.seq = seq;
  operation.timeout = timeout;
  operation.post = std::move(post);
  operation.runner = runner;
  // A host send or receive that nothing queued precedes starts here: a
  // post never waits, and queued it would arm the worker's grace alarm (a
  // hypervisor trip on a VM) and cost the next wait a trip through the
  // queue. Claimed under this lock (what is submitted next queues behind
  // it), run after it (a completion may issue more).
  if (runner == Runner::CallerOrWorker && !coalescing_ && executor_->claimIdle()) {
    lock.unlock();
    executor_->runClaimed([this, &operation] { startPointToPoint(operation); });
    return seq;
  }
  submit(std::move(operation));
  return seq;
}

std::shared_ptr<OperationCallbacks> Engine::traced(std::shared_ptr<OperationCallbacks> callbacks,
                                                   uint64_t seq, bool pointToPoint,
                                                   const char* name, const std::string& summary,
                                                   uint32_t fingerprint, bool publishedAhead) {
  return tracedAs(std::move(callbacks),
                  trace_.queued(seq, pointToPoint, name, summary, fingerprint, publishedAhead));
}

std::shared_ptr<OperationCallbacks> Engine::tracedAs(std::shared_ptr<OperationCallbacks> callbacks,
                                                     uint64_t id) {
  if (id == 0) return callbacks;  // the trace is off
  return std::make_shared<TracedCallbacks>(std::move(callbacks), trace_, id);
}

std::string Engine::traceJson(const std::string& reason) const {
  return trace_.toJson(rank_, size_, groupName_, reason);
}

std::string Engine::dumpTrace(const std::string& reason) const {
  if (!trace_.enabled()) return "";
  const std::string path = writeTraceFile(groupName_, rank_, traceJson(reason));
  if (!path.empty()) RR_LOG(Warn, rank_, "trace of group '" << groupName_ << "' written to " << path);
  return path;
}

// Executor side: the group's ranks are out of step from here on.
void Engine::markUnusable(const std::string& reason, bool traceWritten) {
  if (!failure_.empty()) return;
  failure_ = reason;
  unusable_ = true;
  // The peers may be waiting on this rank: let them fail now too.
  transport_->announceFailure(failure_);
  if (channel_) channel_->fail(failure_);
  if (!traceWritten) dumpTrace(failure_);
}

void Engine::abort(const std::string& reason) {
  // shutdown() cannot release the transport meanwhile; a collective running
  // past the queue does not hold this lock, so this never waits for it.
  std::lock_guard<std::mutex> lock(submitMutex_);
  if (!accepting_ || transport_ == nullptr) return;
  transport_->abort(reason);
  // The channel may be opening on the executor meanwhile: then the opening
  // sees the transport's abort and passes it on.
  if (HostChannel* channel = channelView_.load(std::memory_order_acquire)) channel->abort(reason);
}

bool Engine::busy() const {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return accepting_ && executor_ != nullptr && (onCallerActive_ || executor_->busy());
}

void Engine::waitForQueued() {
  // A marker task: once it has run, so has everything queued before it (the
  // executor runs tasks in order, and stop() runs what is queued).
  auto ran = std::make_shared<std::promise<void>>();
  std::future<void> marker = ran->get_future();
  std::shared_ptr<Executor> executor;
  {
    std::unique_lock<std::mutex> lock(submitMutex_);
    awaitOnCaller(lock);
    if (!accepting_ || executor_ == nullptr) return;
    executor = executor_;
    executor->submit([ran] { ran->set_value(); });
  }
  const auto ready = [&] {
    return marker.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  // Runs the queue here if no thread drives it; otherwise blocks until the
  // worker reaches the marker (each task before it is bounded by its own deadline).
  if (!executor->helpUntil(ready)) marker.wait();
}

// Called with submitMutex_ held.
void Engine::submit(Operation operation) {
  // A collective its caller waits for reaches here in a block only before
  // any asynchronous one (refuseWaitBehindHeld): it runs as outside the
  // block (startCoalescing); held, its wait would never end.
  const bool waitedFor = operation.runner == Runner::Caller && !operation.post;
  if (coalescing_ && !waitedFor) blockIssuedAsync_ = true;
  if (coalescing_ && !(waitedFor && coalesced_.empty())) {
    operation.callbacks->heldInBlock(true);
    coalesced_.push_back(std::move(operation));
    return;
  }
  if (coalescing_) blockQueued_.push_back(operation.callbacks);
  const Runner runner = operation.runner;
  // A host send or receive only starts on its task (startPointToPoint); a
  // CUDA one's staging may wait for its stream.
  const bool posts = operation.post && runner != Runner::Worker;
  // A published-ahead collective: once every peer is in it, a poll of its
  // Work may run it (Executor::runIfReady), as nothing it waits for then
  // depends on this rank's caller.
  Executor::Ready ready;
  if (runner == Runner::CallerWhenWaited) {
    ready = [this, seq = operation.seq] {
      const HostChannel* channel = channelView_.load(std::memory_order_acquire);
      return channel != nullptr && channel->peersAnnounced(seq);
    };
  }
  executor_->submit(
      [this, operation = std::move(operation)] {
        if (operation.post) {
          startPointToPoint(operation);
        } else {
          runCollective(operation);
        }
      },
      runner, posts, std::move(ready));
}

std::exception_ptr Engine::unusableError(const OpContext& op) const {
  return std::make_exception_ptr(
      TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                     " was not run: process group '" + groupName_ +
                     "' is unusable after an earlier failure: " + failure_));
}

// Caller's thread, as the collective is queued.
std::shared_ptr<TimelineOp> Engine::timelineOp(const char* name, uint64_t seq,
                                               const CollectiveFingerprint& fingerprint) {
  auto line = std::make_shared<TimelineOp>();
  line->name = name;
  line->seq = seq;
  line->group = groupName_;
  if (label_) {
    Label label = label_(fingerprint);
    line->dtype = std::move(label.dtype);
    line->bytes = label.bytes;
  }
  line->row = timeline_->takeRow(groupName_);
  line->queued = Clock::now();
  return line;
}

// After the callbacks completed the operation either way.
void Engine::recordTimeline(const Operation& operation) {
  if (!operation.timeline) return;
  const std::exception_ptr error = operation.callbacks->error();
  timeline_->record(*operation.timeline, Clock::now(), error ? errorMessage(error) : "");
}

void Engine::runCollective(const Operation& operation) {
  probe::mark(ProbePoint::Claimed);
  OpContext op = operation.context();
  announce(op.seq, op.fingerprintWord, operation.identity, op.started());
  if (operation.timeline) {
    operation.timeline->phases.add(Phase::Queued, operation.timeline->queued, Clock::now());
    op.phases = &operation.timeline->phases;
  }
  OperationCallbacks& callbacks = *operation.callbacks;
  if (transport_->aborted()) markUnusable(transport_->abortReason());
  if (!failure_.empty()) {
    callbacks.failed(unusableError(op));
    recordTimeline(operation);
    return;
  }
  try {
    std::shared_ptr<void> onDevice = callbacks.enterDevice();
    {
      PhaseScope copyIn(op.phases, Phase::CopyIn);
      callbacks.stageIn(op);
    }
    // The full check, when on, already compared everything first.
    std::optional<NeighbourCheck> check;
    if (!checkCollectives_ && operation.neighbourCheck) {
      check.emplace(*transport_, op, operation.identity, describe_, &checkSpare_);
    }
    probe::mark(ProbePoint::BodyStarted);
    {
      PhaseScope transfer(op.phases, Phase::Transfer);
      operation.body(op);
    }
    probe::mark(ProbePoint::BodyFinished);
    if (arrivalLesson_.awaits(op.seq)) noteWhenPeersCame(op.seq);
    if (check) check->verify();
    {
      PhaseScope copyOut(op.phases, Phase::CopyOut);
      callbacks.stageOut();
    }
    onDevice.reset();
    if (channel_) channel_->finished(op.seq + operation.seqCount - 1);
    callbacks.succeeded(-1);
    probe::mark(ProbePoint::Completed);
  } catch (const std::exception& e) {
    // Abandon what is still posted so no late message lands in the caller's
    // tensors, and stop using a group whose ranks are out of step.
    for (uint64_t i = 0; i < operation.seqCount; ++i) transport_->abandonOutstanding(op.part(i));
    RR_LOG(Warn, rank_, e.what());
    const bool outOfStep = dynamic_cast<const InvalidArgument*>(&e) == nullptr;
    // The peers learn it before the caller does: a caller that frees its
    // tensors would have a peer still reading them fail on their absence
    // (EFAULT) rather than on this reason.
    if (outOfStep && channel_) channel_->fail(e.what());
    callbacks.failed(std::current_exception());  // before the trace, so it shows it failed
    if (outOfStep) markUnusable(e.what());
  }
  recordTimeline(operation);
}

void Engine::startPointToPoint(const Operation& operation) {
  const OpContext op = operation.context();
  const std::shared_ptr<OperationCallbacks>& callbacks = operation.callbacks;
  if (!failure_.empty()) {
    callbacks->failed(unusableError(op));
    return;
  }
  PostedMessage posted;
  try {
    posted = post(operation, op);
  } catch (...) {
    transport_->abandonOutstanding(op);
    callbacks->failed(std::current_exception());
    return;
  }
  if (pollMessage(*callbacks, op, posted, false)) return;  // a send that went at once
  auto message = std::make_shared<PostedMessage>(std::move(posted));
  executor_->addPoller([this, callbacks, op, message](bool abandon) {
    return pollMessage(*callbacks, op, *message, abandon);
  });
}

PostedMessage Engine::post(const Operation& operation, const OpContext& op) {
  std::shared_ptr<OperationCallbacks> callbacks = operation.callbacks;
  std::shared_ptr<void> onDevice = callbacks->enterDevice();
  callbacks->stageIn(op);  // a send's data reaches its host copy first
  return operation.post(op);  // its end: pollMessage's finish, then the callbacks' stage-out
}

// Completes the operation when its message is done, its deadline passed, or
// the group is shutting down. True once it is completed either way.
bool Engine::pollMessage(OperationCallbacks& callbacks, const OpContext& op, PostedMessage& message,
                         bool abandon) {
  try {
    if (abandon) {
      transport_->abandon(message.request);
      // Where an abort shut the group down (ProcessGroup.abort), the abort is
      // the reason, whether the shutdown or the caller's wait reaches the
      // message first.
      const std::string why = transport_->aborted()
                                  ? transport_->abortReason()
                                  : "process group '" + groupName_ + "' was shut down";
      callbacks.failed(std::make_exception_ptr(
          TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                         " was abandoned: " + why)));
      return true;
    }
    if (!transport_->test(message.request, op)) {
      // An abort (ProcessGroup.abort, SHRINK_ABORT) ends a message in
      // flight as it ends a collective's wait (Transport::waitUntilDeadline).
      if (transport_->aborted()) {
        throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                             ": " + transport_->abortReason());
      }
      transport_->checkPeersAlive(message.request.peer, op);
      if (Clock::now() >= op.deadline) {  // before a departure: the timeout came first
        const std::string reason = transport_->describeTimeout(message.request, op);
        transport_->abandon(message.request);
        callbacks.failed(std::make_exception_ptr(TimeoutError(reason)));
        return true;
      }
      transport_->throwIfSenderLeft(message.request, op);  // may complete it meanwhile
      if (!message.request.done) return false;
    }
    if (message.finish) message.finish();
    {
      std::shared_ptr<void> onDevice = callbacks.enterDevice();
      callbacks.stageOut();  // a receive's data goes back to the device
    }
    callbacks.succeeded(message.request.isRecv ? tagSourceRank(message.request.senderTag) : -1);
  } catch (...) {
    transport_->abandon(message.request);
    callbacks.failed(std::current_exception());
  }
  return true;
}

void Engine::startCoalescing() {
  std::unique_lock<std::mutex> lock(submitMutex_);
  awaitOnCaller(lock);
  // A block still open here is one torch's manager left: it ends a block
  // only where the block's body and its own checks did not raise (mixed
  // collectives in one block raise), and nested managers fail in torch
  // itself (the inner one takes the outer one's list). That block ends now,
  // as an early end does, alike on every rank; what it held runs first.
  if (coalescing_ && accepting_ && executor_ != nullptr) {
    const size_t held = endBlockEarly();
    RR_LOG(Info, rank_, groupName_ << " coalescing block left open ended by the next one ("
                                   << held << " held operation(s) run now)");
  }
  coalescing_ = true;
  blockIssuedAsync_ = false;
  blockQueued_.clear();
  blockEndedEarly_ = false;
}

namespace {
// The whole of a block ended early (endBlockEarly): its parts
// report to their own Works; nobody holds the whole.
class UnclaimedBlock : public OperationCallbacks {
 public:
  void succeeded(int) override {}
  void failed(std::exception_ptr error) override { error_ = error; }
  std::exception_ptr error() const override { return error_; }

 private:
  std::exception_ptr error_;
};
}  // namespace

void Engine::refuseWaitBehindHeld(const char* name, Runner runner) {
  if (!coalescing_ || runner != Runner::Caller || !blockIssuedAsync_) return;
  // Every rank holds the same operations (startCoalescing), so every rank
  // raises here alike; what was held runs now, as the block's end would have
  // run it, and later operations run as outside a block.
  const size_t held = endBlockEarly();
  throw InvalidArgument(
      std::string("ringreduce: ") + name + " on rank " + std::to_string(rank_) +
      " waits for its result inside a coalescing block after an asynchronous operation of the "
      "block; the block may hold that until it ends, so the wait could not end: issue it with "
      "async_op=True, or outside the block. The block has ended here (the " +
      std::to_string(held) + " operation(s) it held run now)");
}

void Engine::endOpenBlock(const char* cause) {
  std::unique_lock<std::mutex> lock(submitMutex_);
  awaitOnCaller(lock);
  // Shut down, nothing runs any more: what the block held stays held.
  if (!coalescing_ || !accepting_ || executor_ == nullptr) return;
  const size_t held = endBlockEarly();
  RR_LOG(Info, rank_, groupName_ << " coalescing block ended: " << cause << " (" << held
                                 << " held operation(s) run now)");
}

size_t Engine::endBlockEarly() {
  coalescing_ = false;
  blockIssuedAsync_ = false;
  blockQueued_.clear();
  blockEndedEarly_ = true;
  std::shared_ptr<std::vector<Operation>> operations = takeHeld();
  if (!operations->empty()) {
    executor_->submit([this, operations] {
      UnclaimedBlock whole;
      runCoalesced(*operations, whole);
    });
  }
  return operations->size();
}

bool Engine::coalescing() const { return coalescing_.load(std::memory_order_acquire); }

std::shared_ptr<std::vector<Operation>> Engine::takeHeld() {
  auto operations = std::make_shared<std::vector<Operation>>(std::move(coalesced_));
  coalesced_.clear();
  for (Operation& operation : *operations) operation.callbacks->heldInBlock(false);
  return operations;
}

bool Engine::endCoalescing(const Combine& combine) {
  std::unique_lock<std::mutex> lock(submitMutex_);
  awaitOnCaller(lock);
  if (!coalescing_ && !std::exchange(blockEndedEarly_, false)) {
    throw Error("ringreduce: endCoalescing on rank " + std::to_string(rank_) +
                " without startCoalescing");
  }
  // Ended early, what the block issued since ran as outside it: the whole
  // completes behind it, in queue order.
  const bool endedEarly = !coalescing_;
  coalescing_ = false;
  blockIssuedAsync_ = false;
  refuseIfShutDown("endCoalescing");
  if (coalesced_.empty() && blockQueued_.empty() && !endedEarly) {
    // Nothing held or queued (the block's one call ran on the caller's
    // thread): done, without a Work to complete across threads. Otherwise
    // the whole completes in queue order, behind what the block queued.
    return true;
  }
  auto queued = std::make_shared<std::vector<std::shared_ptr<OperationCallbacks>>>(
      std::exchange(blockQueued_, {}));
  const bool onlyHostMessages =
      std::all_of(coalesced_.begin(), coalesced_.end(), [](const Operation& operation) {
        return operation.post && operation.runner == Runner::CallerOrWorker;
      });
  std::shared_ptr<std::vector<Operation>> operations = takeHeld();
  std::vector<std::shared_ptr<OperationCallbacks>> parts;
  // The combine step sees the backend's own callbacks, not the trace's wrappers.
  for (const Operation& operation : *operations) {
    std::shared_ptr<OperationCallbacks> own = operation.callbacks->wrapped();
    parts.push_back(own ? own : operation.callbacks);
  }
  std::shared_ptr<OperationCallbacks> combined = combine(parts);
  RR_LOG(Info, rank_, groupName_ << " coalesced " << operations->size() << " operation(s)");
  // batch_isend_irecv's block, with nothing queued ahead: posted here, as a
  // lone send is (submitPointToPoint), not handed to the worker, whose
  // wake-up alarm alone costs more than the posts on a VM.
  if (onlyHostMessages && !endedEarly && queued->empty() && executor_->claimIdle()) {
    lock.unlock();
    executor_->runClaimed(
        [this, operations, combined] { startHeldMessages(operations, combined); });
    return false;
  }
  executor_->submit([this, operations, combined, queued] {
    runCoalesced(*operations, *combined, *queued);
  });
  return false;
}

void Engine::postInto(Operation& operation, PostedBatch& batch) {
  const OpContext op = operation.context();
  try {
    if (!failure_.empty()) std::rethrow_exception(unusableError(op));
    batch.posted.push_back({&operation, op, post(operation, op)});
  } catch (...) {
    transport_->abandonOutstanding(op);
    operation.callbacks->failed(std::current_exception());
    if (!batch.firstError) batch.firstError = operation.callbacks->error();
  }
}

bool Engine::pollBatch(PostedBatch& batch, bool abandon) {
  while (batch.finished < batch.posted.size()) {
    PostedBatch::Posted& posted = batch.posted[batch.finished];
    OperationCallbacks& callbacks = *posted.operation->callbacks;
    if (!pollMessage(callbacks, posted.op, posted.message, abandon)) return false;
    if (!batch.firstError) batch.firstError = callbacks.error();
    ++batch.finished;
  }
  return true;
}

namespace {
void complete(OperationCallbacks& combined, std::exception_ptr error) {
  if (error) {
    combined.failed(error);
  } else {
    combined.succeeded(-1);
  }
}
}  // namespace

void Engine::startHeldMessages(std::shared_ptr<std::vector<Operation>> operations,
                               std::shared_ptr<OperationCallbacks> combined) {
  auto batch = std::make_shared<PostedBatch>();
  for (Operation& operation : *operations) postInto(operation, *batch);
  Executor::Poller poll = [this, operations, batch, combined](bool abandon) {
    if (!pollBatch(*batch, abandon)) return false;
    complete(*combined, batch->firstError);
    return true;
  };
  if (!poll(false)) executor_->addPoller(std::move(poll));
}

// Collectives run in order; sends and receives are all posted first and then
// waited for together, so a batch (batch_isend_irecv) never deadlocks on the
// order of its parts.
void Engine::runCoalesced(std::vector<Operation>& operations, OperationCallbacks& combined,
                          const std::vector<std::shared_ptr<OperationCallbacks>>& alreadyQueued) {
  PostedBatch batch;
  for (const auto& callbacks : alreadyQueued) {
    if (!batch.firstError) batch.firstError = callbacks->error();
  }
  for (Operation& operation : operations) {
    if (operation.post) {
      postInto(operation, batch);
      continue;
    }
    runCollective(operation);
    if (!batch.firstError) batch.firstError = operation.callbacks->error();
  }
  // Waited for as the executor waits for a lone receive (driveUntil): spin
  // while the spin pays, then sleep on the transport's events. (Sleeping at
  // the first empty pass cost a wake-up, 30-100 us here, per batch.)
  SpinBudget& spin = transport_->spinBudget();
  spin.startWait();
  bool spinning = true;
  while (!pollBatch(batch, false)) {
    const auto passStart = spin.now();
    if (transport_->progress() > 0) {
      if (spinning) spin.moved(passStart);
      continue;
    }
    if (spinning && spin.keepSpinning(passStart)) continue;
    spinning = false;
    transport_->sleepUntilEvent(-1, 1);
  }
  if (spinning) spin.finishWait();
  complete(combined, batch.firstError);
}

}  // namespace ringreduce
