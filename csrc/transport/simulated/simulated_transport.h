// One simulated rank's Transport: the interface the algorithms use, over the
// virtual-time network (simulated_network.h). Its waits suspend the rank's
// fiber until the network delivers something to it.
#pragma once

#include "transport/simulated/simulated_network.h"
#include "transport/transport.h"

namespace ringreduce {

class SimulatedTransport : public Transport {
 public:
  SimulatedTransport(SimulatedNetwork& network, int rank, const Config& config);
  ~SimulatedTransport() override;

  unsigned progress() override { return network_.progress(rank()); }
  // Suspends the rank until a message reaches it; throws when none ever can.
  void sleepUntilEvent(int extraFd, int timeoutMs) override { network_.wait(rank()); }
  std::string describeEndpoint(int peer) override;

 protected:
  void* postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                 std::string* error) override;
  void* postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                 std::string* error) override;
  Completion poll(void* handle, bool isRecv) override;
  void cancel(void* handle) override;

 private:
  SimulatedNetwork& network_;
};

}  // namespace ringreduce
