// A Transport over another one that writes what it is asked to do into a
// ScheduleLog (posts, completed receives), for the device ring's schedule
// tests. It can also carry the news of a rank that gave up on the group
// (announceFailure) to the others' checkPeersAlive, as UCX's peer monitor
// does: the loopback transport has no monitor of its own.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/base/errors.h"
#include "schedule_log.h"
#include "transport/tag.h"
#include "transport/transport.h"

namespace ringreduce::testing {

// Who gave up on a group first, and why; shared by its ranks' transports.
class GroupNews {
 public:
  void gaveUp(int rank, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rank_ >= 0) return;
    rank_ = rank;
    reason_ = reason;
  }
  // -1: nobody.
  int who(std::string* reason) const {
    std::lock_guard<std::mutex> lock(mutex_);
    *reason = reason_;
    return rank_;
  }

 private:
  mutable std::mutex mutex_;
  int rank_ = -1;
  std::string reason_;
};

class RecordingTransport : public Transport {
 public:
  // `log` and `news` may be null.
  RecordingTransport(Transport& inner, ScheduleLog* log, std::shared_ptr<GroupNews> news)
      : Transport(inner.rank(), inner.size(), inner.config()),
        inner_(inner),
        log_(log),
        news_(std::move(news)) {
    below_.opName = "recorded";
    below_.pointToPoint = true;  // the tags carry the fingerprint already
  }
  ~RecordingTransport() override { abandonAll(); }

  void announceFailure(const std::string& reason) override {
    inner_.announceFailure(reason);
    if (news_) news_->gaveUp(rank(), reason);
  }
  void checkPeersAlive(int peer, const OpContext& op) const override {
    inner_.checkPeersAlive(peer, op);
    std::string reason;
    const int who = news_ ? news_->who(&reason) : -1;
    if (who >= 0 && who != rank() && op.groupWide()) {  // the words of UCX's monitor
      throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank()) +
                           " failed: rank " + std::to_string(who) +
                           " gave up on the group: " + reason);
    }
  }
  unsigned progress() override { return inner_.progress(); }
  void sleepUntilEvent(int extraFd, int timeoutMs) override {
    inner_.sleepUntilEvent(extraFd, timeoutMs);
  }
  std::string describeEndpoint(int peer) override { return inner_.describeEndpoint(peer); }

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override {
    note(ScheduleEvent::Kind::SendPosted, data, tag);
    auto posted =
        std::make_unique<Posted>(Posted{inner_.isend(peer, tag, data, bytes, below_), data});
    return posted->request.done ? nullptr : posted.release();
  }
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override {
    note(ScheduleEvent::Kind::RecvPosted, data, tag);
    return new Posted{inner_.irecv(-1, tag, data, bytes, below_, mask), data};
  }
  Completion poll(void* handle, bool isRecv) override {
    auto* posted = static_cast<Posted*>(handle);
    Completion completion;
    if (!inner_.test(posted->request, below_)) return completion;
    completion.state = Completion::State::Done;
    completion.length = posted->request.bytes;  // the transport below checked the size
    completion.senderTag = posted->request.senderTag;
    if (isRecv) note(ScheduleEvent::Kind::RecvDone, posted->data, posted->request.senderTag);
    delete posted;
    return completion;
  }
  void cancel(void* handle) override {
    auto* posted = static_cast<Posted*>(handle);
    inner_.abandon(posted->request);
    delete posted;
  }

 private:
  struct Posted {
    Request request;
    const void* data;
  };
  void note(ScheduleEvent::Kind kind, const void* data, uint64_t tag) {
    if (log_) log_->push_back({kind, data, static_cast<uint32_t>(tag & kMaxSlot), 0});
  }

  Transport& inner_;
  ScheduleLog* log_;
  std::shared_ptr<GroupNews> news_;
  OpContext below_;
};

}  // namespace ringreduce::testing
