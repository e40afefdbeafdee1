// Tagged point-to-point messaging between the ranks of one group over UCX.
// One instance per process group: its own UCX context, worker and endpoints,
// so groups never see each other's messages and nothing outlives the group.
//
// Threading: the constructor bootstraps on the calling thread; afterwards a
// single thread (the group's executor) drives it. The worker is created
// SERIALIZED, which is enough for that hand-over.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/op_context.h"
#include "transport/key_value_store.h"
#include "transport/peer_monitor.h"
#include "transport/progress_board.h"

namespace ringreduce {

// One posted send or receive. Plain data: the transport owns the UCX request
// and releases it when the request completes or is abandoned.
struct Request {
  void* handle = nullptr;  // UCX request while in flight
  int peer = -1;          // -1: a receive from any source
  size_t bytes = 0;
  uint64_t senderTag = 0;  // for receives, once done: who sent it (tagSourceRank)
  int fingerprint = -1;    // for collective receives: the fingerprint expected
  bool isRecv = false;
  bool done = false;
};

class UcxTransport {
 public:
  // Keeps `store` for the progress board (see progress_board.h).
  UcxTransport(int rank, int size, std::shared_ptr<KeyValueStore> store,
               std::chrono::milliseconds timeout, const Config& config);
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int spinMicroseconds() const { return config_.spinMicroseconds; }

  Request isend(int peer, uint64_t tag, const void* data, size_t bytes, const OpContext& op);
  // `mask` selects the tag bits that must match (kTagAnySourceMask: any sender).
  Request irecv(int peer, uint64_t tag, void* data, size_t bytes, const OpContext& op,
                uint64_t mask = ~0ull);

  // True once `request` finished; throws TransportError if it failed. Does
  // not progress the worker.
  bool test(Request& request, const OpContext& op);
  // Progresses until `request` finishes. Spins briefly, then sleeps on the
  // worker's event fd. Throws TimeoutError at op.deadline naming the peer.
  void wait(Request& request, const OpContext& op);
  void waitAll(std::vector<Request>& requests, const OpContext& op);
  // Like wait, but returns false at op.deadline instead of throwing.
  bool waitUntilDeadline(Request& request, const OpContext& op);

  // "send p2p#3 timed out after 100 ms on rank 0: still waiting to ..."
  std::string describeTimeout(const Request& request, const OpContext& op) const;

  // Cancels and releases the requests of `op` still in flight (after an
  // error, so that no late message lands in a buffer the caller has given up).
  void abandonOutstanding(const OpContext& op);
  // The same for one request (a send/recv that timed out).
  void abandon(Request& request);

  // After a failure that leaves the group out of step: tell the peers (see
  // PeerMonitor::broadcastAbort).
  void announceFailure(const std::string& reason);

  // Throws TransportError if `peer` (any peer when -1) is known to be dead,
  // or, for collectives, if a peer aborted the group.
  void checkPeersAlive(int peer, const OpContext& op) const;

  // One pass of UCX progress; returns the number of events handled.
  unsigned progress();
  // Sleeps until UCX has an event, `extraFd` is readable, or `timeoutMs`
  // passes (-1: no limit). Returns at once if events are already pending.
  void sleepUntilEvent(int extraFd, int timeoutMs);

  // The transports UCX chose for the endpoint to `peer` (for logs).
  std::string describeEndpoint(int peer);

 private:
  ucp_ep_h endpoint(int peer);
  [[noreturn]] void throwTimeout(const Request& request, const OpContext& op);
  void announceIfStalled(const OpContext& op, Clock::time_point now);
  void finishRequest(Request& request);

  const int rank_;
  const int size_;
  const Config config_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;
  std::vector<std::vector<uint8_t>> peerAddresses_;
  std::unique_ptr<PeerMonitor> monitor_;  // null when RINGREDUCE_PEER_MONITOR=0
  std::unique_ptr<ProgressBoard> board_;
  std::vector<ucp_ep_h> endpoints_;
  void abandonWhere(bool all, uint64_t owner);

  std::unordered_map<void*, uint64_t> outstanding_;  // UCX request -> OpContext::owner()
};

}  // namespace ringreduce
