// The Transport base class: sends, receives and bounded waits, failure reports (transport.h)
#include "transport/transport.h"

#include <algorithm>
#include <thread>

#include "core/base/errors.h"
#include "core/observe/latency_probe.h"
#include "core/observe/phase_recorder.h"
#include "core/base/core_yield.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

std::string peerName(int peer) {
  return peer < 0 ? std::string("any rank") : "rank " + std::to_string(peer);
}

}  // namespace

Transport::Transport(int rank, int size, const Config& config)
    : rank_(rank),
      size_(size),
      config_(config) {
  adoptConfig(config);
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size) {
    throw InvalidArgument("ringreduce: invalid rank " + std::to_string(rank) +
                          " for group of size " + std::to_string(size));
  }
}

void Transport::adoptConfig(const Config& config) {
  config_ = config;
  workerSpin_.setLimits(std::chrono::microseconds(config.spinMicroseconds), config.adaptiveSpin);
  callerSpin_.setLimits(std::chrono::microseconds(config.waitSpinMicroseconds),
                        config.adaptiveSpin);
  // Yielding waits let the peers on their core take turns: a yield that
  // comes back within kLongYield is that, not outside load.
  const auto gap = config.spinYields ? kLongYield : SpinBudget::kDescheduledGap;
  workerSpin_.setDescheduledGap(gap);
  callerSpin_.setDescheduledGap(gap);
}

std::string Transport::where(const OpContext& op) const {
  return "ringreduce: " + op.describe() + " on rank " + std::to_string(rank_);
}

Request Transport::isend(int peer, uint64_t tag, const void* data, size_t bytes,
                         const OpContext& op) {
  Request request;
  request.peer = peer;
  request.bytes = bytes;
  if (!op.pointToPoint) tag |= static_cast<uint64_t>(op.fingerprint) << kTagFingerprintShift;
  std::string error;
  request.handle = postSend(peer, tag, data, bytes, &error);
  if (!error.empty()) {
    explainFailure(peer, op);
    throw TransportError(where(op) + ": send to rank " + std::to_string(peer) +
                         " failed: " + error);
  }
  if (request.handle == nullptr) {
    request.done = true;
  } else {
    outstanding_.emplace(request.handle, Outstanding{op.owner(), peer, false});
  }
  probe::mark(ProbePoint::Posted);
  return request;
}

Request Transport::irecv(int peer, uint64_t tag, void* data, size_t bytes, const OpContext& op,
                         uint64_t mask) {
  Request request;
  request.peer = peer;
  request.bytes = bytes;
  request.isRecv = true;
  if (!op.pointToPoint) {
    // Match whatever fingerprint the sender put there; test() compares it.
    mask &= ~kTagFingerprintMask;
    request.fingerprint = op.fingerprint;
  }
  std::string error;
  request.handle = postRecv(tag, mask, data, bytes, &error);
  if (request.handle == nullptr) {
    explainFailure(peer, op);
    throw TransportError(where(op) + ": receive from " + peerName(peer) + " failed: " + error);
  }
  outstanding_.emplace(request.handle, Outstanding{op.owner(), peer, true});
  probe::mark(ProbePoint::Posted);
  return request;
}

// A post that fails often has a reason the group already knows: a peer that
// gave up on it (and may have left, taking its shared memory with it), died,
// or left on purpose (destroyed its group, exited). The news can still be on
// its way (the notice of the rank that gave up, the goodbye or the lost
// connection of the one that left), so progress for a short while; the
// liveness check then throws it, which says more than the transport's own
// error would. Only a failing post pays this wait.
void Transport::explainFailure(int peer, const OpContext& op) {
  constexpr auto kNewsWindow = std::chrono::milliseconds(200);
  const auto limit = std::min(Clock::now() + kNewsWindow, op.deadline);
  while (true) {
    progress();
    checkPeersAlive(op.groupWide() ? -1 : peer, op);
    if (aborted_.load()) return;
    if (Clock::now() >= limit) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Nothing worse heard: a peer that said goodbye explains a failed post.
  if (peer >= 0 && peerLeft(peer)) {
    throw TransportError(where(op) + ": rank " + std::to_string(peer) +
                         " has left the group (it destroyed its process group or exited)");
  }
}

void Transport::throwIfSenderLeft(Request& request, const OpContext& op) {
  // What a peer sent before it left reaches this rank within microseconds
  // on one machine and within a round trip across machines.
  constexpr auto kInFlightWindow = std::chrono::milliseconds(100);
  if (!request.isRecv || request.peer < 0 || request.done || !peerLeft(request.peer)) return;
  const auto limit = std::min(Clock::now() + kInFlightWindow, op.deadline);
  while (Clock::now() < limit) {
    progress();
    if (test(request, op)) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  throw TransportError(where(op) + ": rank " + std::to_string(request.peer) +
                       " has left the group (it destroyed its process group or exited) "
                       "without sending the " + std::to_string(request.bytes) +
                       " bytes this rank waits for (did it skip this call?)");
}

bool Transport::test(Request& request, const OpContext& op) {
  if (request.done) return true;
  const Completion completion = poll(request.handle, request.isRecv);
  if (completion.state == Completion::State::InProgress) return false;
  outstanding_.erase(request.handle);
  request.handle = nullptr;
  request.done = true;
  if (request.isRecv) request.senderTag = completion.senderTag;
  const std::string direction = request.isRecv ? "receive from " + peerName(request.peer)
                                               : "send to rank " + std::to_string(request.peer);
  if (completion.state == Completion::State::Truncated) {
    throw TransportError(where(op) + ": " + direction + " brought more than the expected " +
                         std::to_string(request.bytes) +
                         " bytes (do all ranks call the same collective with the same sizes?)");
  }
  if (completion.state == Completion::State::Failed) {
    // A transfer fails where its peer died, gave up or left mid-way (UCX's
    // "Input/output error" for a copy from a gone process): say which.
    explainFailure(request.peer, op);
    throw TransportError(where(op) + ": " + direction + " failed: " + completion.error);
  }
  if (request.fingerprint >= 0 &&
      ((completion.senderTag & kTagFingerprintMask) >> kTagFingerprintShift) !=
          static_cast<uint64_t>(request.fingerprint)) {
    throw TransportError(where(op) + ": rank " +
                         std::to_string(tagSourceRank(completion.senderTag)) +
                         " is in a different collective (the operation, dtype, size, reduce op "
                         "or root differ); RINGREDUCE_CHECK_COLLECTIVES=1 names the difference");
  }
  if (request.isRecv && completion.length != request.bytes) {
    throw TransportError(where(op) + ": received " + std::to_string(completion.length) +
                         " bytes from " + peerName(tagSourceRank(completion.senderTag)) +
                         ", expected " + std::to_string(request.bytes) +
                         " (do all ranks call the same collective with the same sizes?)");
  }
  return true;
}

void Transport::wait(Request& request, const OpContext& op) {
  if (!waitUntilDeadline(request, op)) throwTimeout(request, op);
}

bool Transport::waitUntilDeadline(Request& request, const OpContext& op) {
  if (test(request, op)) {
    probe::mark(ProbePoint::Arrived);
    return true;
  }
  // The timeline's "waiting for peers": from here on the data is late.
  PhaseScope waiting(op.phases, Phase::WaitPeers);
  // Oversubscribed, a big message is worth a sleep: its peer has copying or
  // reducing to do first, and ranks yielding to each other meanwhile only
  // evict each other's data from the caches (4 MiB at world 4 on 2 cores
  // took 1.4-2.7x as long with yielding spins).
  // And none while yielding costs whole time slices (core/base/core_yield.h).
  const bool noSpin =
      config_.spinYields && (request.bytes > kYieldSpinMaxBytes || !yieldingPays());
  SpinBudget& spin = *activeSpin_;
  spin.startWait();
  do {
    if (aborted_.load()) throw TransportError(where(op) + ": " + abortReason());
    // The pass's one clock read, before it looks: the budget judges the
    // time up to here, and a pass that brings something does its work
    // after it (core/base/spin_budget.h).
    const auto now = spin.now();
    if (progress() > 0) {
      spin.moved(now);
      continue;
    }
    if (watch_) watch_();
    // Nothing more arrived. A collective cannot finish without every rank,
    // so any death ends it; a send/recv only needs its peer.
    checkPeersAlive(op.groupWide() ? -1 : request.peer, op);
    if (now >= op.deadline) return false;  // before a departure: the timeout came first
    throwIfSenderLeft(request, op);
    if (request.done) break;
    announceIfStalled(op, now);
    if (noSpin) {
      spin.abandon();  // not the budget's choice: nothing to learn
    } else if (spin.keepSpinning(now)) {
      if (config_.spinYields) yieldCore();  // oversubscribed: let the peer run
      continue;
    }
    // Sleep until the peer's progress signals this rank (UCX: the worker's
    // event fd, armed), or the deadline, or 100 ms to notice abort().
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - now).count() + 1;
    sleepUntilEvent(-1, static_cast<int>(std::min<long long>(remaining, 100)));
    spin.startWait();  // what is left of the message may follow at once
  } while (!test(request, op));
  // Found while spinning: paid, unless the thread was away when it came.
  spin.finishWait();
  probe::mark(ProbePoint::Arrived);
  return true;
}

void Transport::waitAll(std::vector<Request>& requests, const OpContext& op) {
  for (Request& request : requests) wait(request, op);
}

std::string Transport::describeTimeout(const Request& request, const OpContext& op) const {
  // The neighbour check's record is not the user's data: its size would
  // read as a wrong count ("32 bytes" in a 5 MiB broadcast).
  const std::string what = op.partOfCollective ? "the collective's check record"
                                               : std::to_string(request.bytes) + " bytes";
  const std::string waiting = request.isRecv
                                  ? "still waiting to receive " + what + " from " +
                                        peerName(request.peer)
                                  : "still waiting to send " + what + " to rank " +
                                        std::to_string(request.peer);
  // "operation timeout reached": the words torch's tests and users' tooling
  // look for (" (Timed out|closed|timeout) "), beside our own detail.
  return "ringreduce: " + op.describe() + " timed out after " + std::to_string(op.timeout.count()) +
         " ms on rank " + std::to_string(rank_) + " (operation timeout reached): " + waiting +
         " (is that rank alive and calling the same collective?)";
}

// A collective that waits for a tenth of its timeout (at most 2 s) says so
// on the progress board; healthy collectives never touch the store.
void Transport::announceIfStalled(const OpContext& op, Clock::time_point now) {
  if (!board_ || !op.groupWide()) return;
  const auto threshold = std::min<Clock::duration>(op.timeout / 10, std::chrono::seconds(2));
  if (now - (op.deadline - op.timeout) >= threshold) board_->announce(op.seq);
}

void Transport::throwTimeout(const Request& request, const OpContext& op) {
  std::string message = describeTimeout(request, op);
  // The neighbour check's message is the collective's (groupWide): a chain
  // broadcast's root waits there for the rank that never came, and should
  // name it as the collective's own waits do.
  if (board_ && op.groupWide()) {
    board_->announce(op.seq);
    const auto behind = board_->ranksBehind(op.seq);
    message += behind.empty() ? "; every rank was seen waiting in " + op.describe() +
                                    ", so one is stuck inside it or the network stalled"
                              : "; rank(s) not seen in " + op.describe() + ": " +
                                    ProgressBoard::describe(behind);
  }
  throw TimeoutError(message);
}

void Transport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    abortReason_ = reason;
  }
  aborted_ = true;
}

std::string Transport::abortReason() const {
  std::lock_guard<std::mutex> lock(abortMutex_);
  return abortReason_;
}

void Transport::abandonOutstanding(const OpContext& op) { abandonWhere(false, op.owner()); }

void Transport::abandonWhere(bool all, uint64_t owner) {
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (all || it->second.owner == owner) {
      cancelOutstanding(it->first, it->second);
      it = outstanding_.erase(it);
    } else {
      ++it;
    }
  }
}

void Transport::cancelOutstanding(void* handle, const Outstanding& what) {
  cancelInFlight(handle, what.peer, what.isRecv);
}

void Transport::abandon(Request& request) {
  if (request.handle == nullptr) return;
  const auto it = outstanding_.find(request.handle);
  if (it != outstanding_.end()) {
    cancelOutstanding(request.handle, it->second);
    outstanding_.erase(it);
  } else {
    cancel(request.handle);
  }
  request.handle = nullptr;
  request.done = true;
}

}  // namespace ringreduce
