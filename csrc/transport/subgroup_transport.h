// A Transport over some of another transport's ranks, for the duration of
// one operation: the two-level allreduce runs the ordinary algorithms inside
// a node and across nodes through it. Subgroup rank i is the parent's rank
// members[i]; tags are rewritten so that the parent sees its own rank
// numbers, and every request is a request of the parent (its waits, its
// fingerprint and size checks, its abandoning after a failure).
//
// Two subgroups of one operation must not reuse a tag between the same pair
// of ranks; the two-level allreduce keeps its phases apart by slot and by
// which pairs talk (same node or not).
#pragma once

#include <vector>

#include "transport/transport.h"

namespace ringreduce {

class SubgroupTransport : public Transport {
 public:
  // `members` must hold the parent's own rank; `op` outlives this object.
  SubgroupTransport(Transport& parent, std::vector<int> members, const OpContext& op);
  ~SubgroupTransport() override;

  void checkPeersAlive(int peer, const OpContext& op) const override;
  bool peerLeft(int peer) const override { return parent_.peerLeft(members_[peer]); }
  unsigned progress() override { return parent_.progress(); }
  void sleepUntilEvent(int extraFd, int timeoutMs) override {
    parent_.sleepUntilEvent(extraFd, timeoutMs);
  }
  bool armForSleep() override { return parent_.armForSleep(); }
  void sleepArmed(int extraFd, int timeoutMs) override { parent_.sleepArmed(extraFd, timeoutMs); }
  size_t eventFds(int* fds, size_t room) const override { return parent_.eventFds(fds, room); }
  void keepUntilClosed(std::shared_ptr<void> memory) override {
    parent_.keepUntilClosed(std::move(memory));
  }
  std::string describeEndpoint(int peer) override;

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override;
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override;
  Completion poll(void* handle, bool isRecv) override;
  void cancel(void* handle) override;

 private:
  uint64_t toParent(uint64_t tag) const;

  Transport& parent_;
  const std::vector<int> members_;
  std::vector<int> indexOf_;  // parent rank -> subgroup rank, -1 outside
  const OpContext& op_;
};

}  // namespace ringreduce
