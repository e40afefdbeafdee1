// One simulated rank's Transport (simulated_transport.h)
#include "transport/simulated/simulated_transport.h"

namespace ringreduce {

SimulatedTransport::SimulatedTransport(SimulatedNetwork& network, int rank, const Config& config)
    : Transport(rank, network.size(), config), network_(network) {}

SimulatedTransport::~SimulatedTransport() { abandonAll(); }

std::string SimulatedTransport::describeEndpoint(int peer) {
  return network_.topology_.nodeOf[peer] == network_.topology_.nodeOf[rank()]
             ? "simulated link within the node"
             : "simulated network through the node's NIC";
}

// Sends complete when posted (the network holds a copy of the data).
void* SimulatedTransport::postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                                   std::string* error) {
  if (peer < 0 || peer >= size()) {
    *error = "no rank " + std::to_string(peer) + " in a group of " + std::to_string(size());
    return nullptr;
  }
  network_.send(rank(), peer, tag, data, bytes);
  return nullptr;
}

void* SimulatedTransport::postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                                   std::string* error) {
  return network_.postReceive(rank(), tag, mask, data, bytes);
}

Completion SimulatedTransport::poll(void* handle, bool isRecv) {
  if (handle == nullptr) {
    Completion sent;
    sent.state = Completion::State::Done;
    return sent;
  }
  return network_.poll(rank(), static_cast<SimulatedNetwork::Receive*>(handle));
}

void SimulatedTransport::cancel(void* handle) {
  network_.cancel(rank(), static_cast<SimulatedNetwork::Receive*>(handle));
}

}  // namespace ringreduce
