// Each rank's last word to its peers in a cross-memory collective (stop_words.h)
#include "algorithms/cross_memory/stop_words.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {
// How long a rank that failed keeps driving its "failed" words out after it
// stopped waiting for the peers' (a word still queued behind the transport's
// flow control would be dropped with the collective's other requests).
constexpr auto kSendGrace = std::chrono::milliseconds(100);
}  // namespace

StopWords::StopWords(Transport& transport, const OpContext& op, uint32_t slot)
    : t_(transport),
      op_(op),
      slot_(slot),
      mine_(std::make_shared<Message>()),
      theirs_(static_cast<size_t>(transport.size())),
      receives_(static_cast<size_t>(transport.size())) {
  for (int q = 0; q < t_.size(); ++q) {
    if (q == t_.rank()) continue;
    receives_[q] = t_.irecv(q, makeTag(q, op_.seq, slot_), &theirs_[q], sizeof(Message), op_);
  }
}

StopWords::~StopWords() {
  for (Request& r : receives_) t_.abandon(r);
  bool inFlight = false;
  for (Request& r : sends_) {
    inFlight = inFlight || r.handle != nullptr;
    t_.abandon(r);
  }
  if (inFlight) t_.keepUntilClosed(mine_);
}

void StopWords::say(Word word, const char* reason) {
  Message& mine = *mine_;
  if (mine.word != kNone) return;
  mine.word = word;
  std::strncpy(mine.reason, reason, sizeof(mine.reason) - 1);
  for (int q = 0; q < t_.size(); ++q) {
    if (q == t_.rank()) continue;
    try {
      sends_.push_back(
          t_.isend(q, makeTag(t_.rank(), op_.seq, slot_), &mine, sizeof(Message), op_));
    } catch (const std::exception&) {
      // "failed" goes to every peer that can still hear it: one that cannot
      // (dead, leaving) is not copying either.
      if (word != kFailed) throw;
    }
  }
}

void StopWords::throwIfFailed(int q) const {
  const Message& theirs = theirs_[static_cast<size_t>(q)];
  if (theirs.word != kFailed) return;
  const std::string reason(theirs.reason, strnlen(theirs.reason, sizeof(theirs.reason)));
  throw TransportError("ringreduce: " + op_.describe() + " on rank " + std::to_string(t_.rank()) +
                       " failed: rank " + std::to_string(q) +
                       " failed in it, so its part of the result is missing (" + reason + ")");
}

void StopWords::throwIfAPeerFailed() {
  t_.progress();
  for (int q = 0; q < t_.size(); ++q) {
    if (q == t_.rank()) continue;
    if (t_.test(receives_[q], op_)) throwIfFailed(q);
  }
}

void StopWords::finish() {
  say(kFinished);
  for (int q = 0; q < t_.size(); ++q) {
    if (q == t_.rank()) continue;
    t_.wait(receives_[q], op_);
    throwIfFailed(q);
  }
  t_.waitAll(sends_, op_);
}

void StopWords::stopAfterFailure(const std::vector<bool>& waitFor, Clock::time_point until,
                                 const char* reason) noexcept {
  say(kFailed, reason);
  // Only the peer's own death or departure ends waiting for it: news of a
  // rank giving up does not mean that this peer stopped copying, but one
  // that destroyed its group or exited copies nothing any more.
  OpContext alone = op_;
  alone.pointToPoint = true;
  alone.partOfCollective = false;
  // Our own words are driven out too, for a moment: the caller abandons
  // whatever is still posted once this returns, and a peer that never
  // hears "failed" would wait for it to its deadline.
  const auto sendsUntil = std::min(until, Clock::now() + kSendGrace);
  while (!t_.aborted() && Clock::now() < until) {
    bool waiting = false;
    for (int q = 0; q < t_.size(); ++q) {
      Request& r = receives_[q];
      if (q == t_.rank() || !waitFor[static_cast<size_t>(q)] || r.done) continue;
      if (!settled(r, alone)) waiting = true;
    }
    if (!waiting && (wordsSent(alone) || Clock::now() >= sendsUntil)) return;
    try {
      t_.progress();
    } catch (const std::exception&) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool StopWords::settled(Request& r, const OpContext& alone) noexcept {
  try {
    if (t_.test(r, op_)) return true;
    if (t_.peerLeft(r.peer)) {
      t_.abandon(r);  // it left: it no longer copies, nor hears us
      return true;
    }
    t_.checkPeersAlive(r.peer, alone);
    return false;
  } catch (const std::exception&) {
    t_.abandon(r);  // failed or dead: it no longer copies, nor hears us
    return true;
  }
}

bool StopWords::wordsSent(const OpContext& alone) noexcept {
  bool sent = true;
  for (Request& r : sends_) {
    if (!r.done && !settled(r, alone)) sent = false;
  }
  return sent;
}

}  // namespace ringreduce
