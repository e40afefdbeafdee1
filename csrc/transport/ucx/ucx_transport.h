// The Transport over UCX: shared memory, CMA, TCP, RDMA, whatever UCX finds.
// One instance per process group: its own UCX context, worker and endpoints,
// so groups never see each other's messages and nothing outlives the group.
// A PEER-mode TCP side channel (peer_monitor.h) reports dead peers, which the
// fast shared-memory transports cannot.
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
#include <vector>

#include "core/config/config.h"
#include "core/base/op_context.h"
#include "transport/rendezvous/key_value_store.h"
#include "transport/transport.h"
#include "transport/ucx/eager_policy.h"
#include "transport/ucx/peer_monitor.h"

namespace ringreduce {

class UcxTransport : public Transport {
 public:
  // Keeps `store` for the progress board (see transport/rendezvous/progress_board.h).
  // Fails (InvalidArgument, on every rank alike) where the ranks differ in
  // their build or in a setting that decides how messages go
  // (core/config/settings_agreement.h); `collectiveChecks`: the collective
  // check is on beyond config.checkCollectives (TORCH_DISTRIBUTED_DEBUG).
  UcxTransport(int rank, int size, std::shared_ptr<KeyValueStore> store,
               std::chrono::milliseconds timeout, const Config& config,
               bool collectiveChecks = false);
  ~UcxTransport() override;

  void announceFailure(const std::string& reason) override;
  void checkPeersAlive(int peer, const OpContext& op) const override;
  bool peerLeft(int peer) const override;
  unsigned progress() override;
  bool armForSleep() override;
  void sleepArmed(int extraFd, int timeoutMs) override;
  size_t eventFds(int* fds, size_t room) const override;
  // The transports UCX chose for the endpoint to `peer`.
  std::string describeEndpoint(int peer) override;
  // How many of the group's ranks run on this machine, this one included
  // (their records in the store carry the machine's identity).
  int ranksOnThisHost() const { return ranksOnThisHost_; }
  // The generation the group's keys carry in the store (bootstrap.h): the
  // same on all its ranks, another for each group made on the same store.
  int64_t storeGeneration() const { return storeGeneration_; }
  // The store keys this generation owns ("ringreduce/gen<N>/"): whatever
  // else the group sets up through the store goes under it.
  const std::string& storePrefix() const { return storePrefix_; }
  // Whether this group's UCX context registers CUDA device memory
  // (ucp_context_query's memory types), asked when the group was created.
  bool registersCudaMemory() const { return registersCudaMemory_; }
  bool carriesDeviceMemory() const override { return registersCudaMemory_; }

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override;
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override;
  Completion poll(void* handle, bool isRecv) override;
  void cancel(void* handle) override;
  void cancelInFlight(void* handle, int peer, bool isRecv) override;

 private:
  ucp_ep_h endpoint(int peer);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;
  std::vector<std::vector<uint8_t>> peerAddresses_;
  int ranksOnThisHost_ = 1;
  int64_t storeGeneration_ = 0;
  std::string storePrefix_;
  bool registersCudaMemory_ = false;
  std::unique_ptr<PeerMonitor> monitor_;  // null when RINGREDUCE_PEER_MONITOR=0
  Clock::time_point nextMonitorProgress_{};  // progress() looks at the monitor from then on
  std::vector<ucp_ep_h> endpoints_;
  std::vector<char> eagerPays_;  // per peer, from its endpoint's transports (eager_policy.h)
  // copiesFromGonePeersTaken() when this transport was made: the destructor
  // leaves a worker alone that may hold a failed copy (peer_gone_log_filter.h).
  unsigned long copiesTakenBefore_ = 0;
};

}  // namespace ringreduce
