// A Transport that adds one-way latency between nodes, for emulated
// clusters: this machine's kernel has no netem qdisc, so the delay that
// `tc netem delay` would add on the wire is added here instead. A message to
// a rank on another node is copied and handed to the transport below
// `delay` after it was posted (the send completes at once, as an eager send
// does); messages within a node and all receives go straight through.
// Benchmarks and tests only (benchmarks/emulated_cluster.py); the backend
// never builds one.
#pragma once

#include <chrono>
#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "transport/transport.h"

namespace ringreduce {

class DelayedTransport : public Transport {
 public:
  DelayedTransport(std::unique_ptr<Transport> inner, std::vector<int> nodeOf,
                   std::chrono::nanoseconds delay);
  ~DelayedTransport() override;

  void announceFailure(const std::string& reason) override { inner_->announceFailure(reason); }
  void checkPeersAlive(int peer, const OpContext& op) const override {
    inner_->checkPeersAlive(peer, op);
  }
  bool peerLeft(int peer) const override { return inner_->peerLeft(peer); }
  // Hands over the messages whose time has come, then progresses below.
  unsigned progress() override;
  // Sleeps below, but never past the next held message's time (a timerfd
  // wakes it to the microsecond).
  void sleepUntilEvent(int extraFd, int timeoutMs) override;
  std::string describeEndpoint(int peer) override;

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override;
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override;
  Completion poll(void* handle, bool isRecv) override;
  void cancel(void* handle) override;

 private:
  struct Held {
    Clock::time_point due;
    int peer;
    uint64_t tag;
    std::vector<uint8_t> data;
    Request request;  // once handed over
  };
  unsigned release();
  // Hands over every held message at its time and waits for the sends below,
  // so that a rank leaving right after its last collective still delivers.
  void drain();

  std::unique_ptr<Transport> inner_;
  const std::vector<int> nodeOf_;
  const std::chrono::nanoseconds delay_;
  // Requests below are posted as point-to-point: the tags already carry
  // the fingerprint, which this transport's own checks compare.
  const OpContext below_;
  int timerFd_ = -1;
  std::deque<Held> held_;       // in order of due time (one delay for all)
  std::list<Held> handedOver_;  // their data must live until the send completes
};

}  // namespace ringreduce
