// A Transport whose ranks live in one process and exchange messages through
// memory: the algorithms run on it in unit tests without UCX, as threads.
//
// Matching follows UCX's tag matching: a receive takes the oldest message
// whose tag agrees with its own on the bits of its mask, whichever rank sent
// it; a message that arrives first waits for its receive. Sends copy the data
// at once (they complete at once), so a send never waits for its receive.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.h"

namespace ringreduce {

// The shared memory through which the ranks of one loopback group talk.
class LoopbackFabric {
 public:
  explicit LoopbackFabric(int size);
  int size() const { return static_cast<int>(mailboxes_.size()); }

 private:
  friend class LoopbackTransport;
  struct Message {
    uint64_t tag;
    std::vector<uint8_t> data;
  };
  struct Receive {
    uint64_t tag;
    uint64_t mask;
    void* data;
    size_t bytes;
    Completion completion;  // guarded by the fabric's mutex
  };
  struct Mailbox {
    std::deque<Message> unexpected;  // arrived before their receive
    std::list<Receive*> posted;      // receives waiting for a message
  };
  static bool matches(uint64_t tag, const Receive& receive) {
    return ((tag ^ receive.tag) & receive.mask) == 0;
  }
  static void deliver(const void* data, size_t bytes, uint64_t tag, Receive& receive);

  std::mutex mutex_;
  std::condition_variable arrived_;
  uint64_t deliveries_ = 0;  // every message delivered or queued, for progress()
  std::vector<Mailbox> mailboxes_;
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank, const Config& config);
  ~LoopbackTransport() override;

  unsigned progress() override;
  bool armForSleep() override;
  void sleepArmed(int extraFd, int timeoutMs) override;
  std::string describeEndpoint(int peer) override { return "loopback (in-process memory)"; }

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override;
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override;
  Completion poll(void* handle, bool isRecv) override;
  void cancel(void* handle) override;

 private:
  std::shared_ptr<LoopbackFabric> fabric_;
  uint64_t seenDeliveries_ = 0;
};

}  // namespace ringreduce
