// Which messages to a peer go eagerly instead of by rendezvous (eager_policy.h)
#include "transport/ucx/eager_policy.h"

#include <vector>

namespace ringreduce {

namespace {

// Transports whose rendezvous lane reads the peer's memory on this machine,
// or copies through a socket: eager and rendezvous both copy once per end
// there, at most one more with eager.
bool hostTransport(const std::string& name) {
  return name == "cma" || name == "knem" || name == "xpmem" || name == "tcp";
}

// The transport names of the lanes marked rma_bw (the rendezvous lanes).
// A lane line reads "lane[i]:  <resource>:<transport>/<device> md[..] -> ...
// <roles>"; the next "lane[" (or the end) closes it. An unreadable lane line
// gives an empty name.
std::vector<std::string> rendezvousTransports(const std::string& info) {
  std::vector<std::string> names;
  size_t at = info.find("lane[");
  while (at != std::string::npos) {
    const size_t next = info.find("lane[", at + 5);
    const std::string line = info.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next;
    if (line.find("rma_bw") == std::string::npos) continue;
    const size_t open = line.find("]:");
    const size_t colon = open == std::string::npos ? open : line.find(':', open + 2);
    const size_t slash = open == std::string::npos ? open : line.find('/', open + 2);
    if (colon == std::string::npos || slash == std::string::npos || slash < colon) {
      names.emplace_back();
    } else {
      names.push_back(line.substr(colon + 1, slash - colon - 1));
    }
  }
  return names;
}

}  // namespace

bool eagerCanPay(const std::string& endpointInfo) {
  if (endpointInfo.find("lane[") == std::string::npos) return false;
  // No rendezvous lane at all: UCX's rendezvous then goes through active
  // messages, copying like eager does.
  for (const std::string& name : rendezvousTransports(endpointInfo)) {
    if (!hostTransport(name)) return false;
  }
  return true;
}

bool sendsEagerly(bool eagerPays, size_t bytes, size_t limit) {
  return eagerPays && bytes < limit && bytes <= kEagerCap;
}

std::vector<std::tuple<std::string, std::string, std::string>> dataPathUcxSettings() {
  return {{"RNDV_SEND_NBR_THRESH", "inf", "UCX_RNDV_SEND_NBR_THRESH"},
          {"TX_SEG_SIZE", "256k", "UCX_TCP_TX_SEG_SIZE"},
          {"RX_SEG_SIZE", "256k", "UCX_TCP_RX_SEG_SIZE"},
          {"MM_FIFO_SIZE", "128", "UCX_MM_FIFO_SIZE"},
          {"MM_FIFO_RELEASE_FACTOR", "0.1", "UCX_MM_FIFO_RELEASE_FACTOR"},
          // Each worker's shared-memory receive buffers come in chunks of
          // this many 8 KiB segments (UCX's 512: 4.2 MiB of /dev/shm per
          // rank and group, 220-285 MiB for a world-4 process with a few
          // subgroups); the pool still grows as traffic needs, one chunk at
          // a time. As many as the FIFO above holds.
          {"MM_RX_BUFS_GROW", "128", "UCX_MM_RX_BUFS_GROW"}};
}

}  // namespace ringreduce
