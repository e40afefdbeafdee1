#include "transport/ucx/eager_policy.h"

#include <vector>

namespace ringreduce {

namespace {

// Transports whose rendezvous reads the peer's memory with one copy.
bool copyFreeSharedMemory(const std::string& name) {
  return name == "cma" || name == "knem" || name == "xpmem";
}

// RDMA, GPU and other transports whose rendezvous UCX tunes itself.
bool otherRendezvous(const std::string& name) { return name != "tcp" && !copyFreeSharedMemory(name); }

// The transport names of the lanes marked rma_bw (the rendezvous lanes).
// A lane line reads "lane[i]:  <resource>:<transport>/<device> md[..] -> ...
// <roles>"; the next "lane[" (or the end) closes it.
std::vector<std::string> rendezvousTransports(const std::string& info) {
  std::vector<std::string> names;
  size_t at = info.find("lane[");
  while (at != std::string::npos) {
    const size_t next = info.find("lane[", at + 5);
    const std::string line = info.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next;
    if (line.find("rma_bw") == std::string::npos) continue;
    const size_t open = line.find("]:");
    if (open == std::string::npos) continue;
    const size_t colon = line.find(':', open + 2);
    const size_t slash = line.find('/', open + 2);
    if (colon == std::string::npos || slash == std::string::npos || slash < colon) continue;
    names.push_back(line.substr(colon + 1, slash - colon - 1));
  }
  return names;
}

}  // namespace

EagerPolicy eagerPolicyOf(const std::string& endpointInfo) {
  if (endpointInfo.find("lane[") == std::string::npos) return EagerPolicy::UcxDecides;
  const std::vector<std::string> names = rendezvousTransports(endpointInfo);
  bool sharedMemory = false;
  for (const std::string& name : names) {
    if (otherRendezvous(name)) return EagerPolicy::UcxDecides;
    sharedMemory = sharedMemory || copyFreeSharedMemory(name);
  }
  // No rendezvous lane at all: UCX's rendezvous then goes through active
  // messages, copying like eager does.
  return sharedMemory ? EagerPolicy::BelowLimit : EagerPolicy::UpToTcpCap;
}

bool sendsEagerly(EagerPolicy policy, size_t bytes, size_t limit) {
  switch (policy) {
    case EagerPolicy::BelowLimit:
      return bytes < limit;
    case EagerPolicy::UpToTcpCap:
      return bytes <= kTcpEagerCap;
    case EagerPolicy::UcxDecides:
      break;
  }
  return false;
}

const char* nameOf(EagerPolicy policy) {
  switch (policy) {
    case EagerPolicy::BelowLimit:
      return "eager below RINGREDUCE_EAGER_BYTES";
    case EagerPolicy::UpToTcpCap:
      return "eager up to 64 MiB";
    case EagerPolicy::UcxDecides:
      break;
  }
  return "UCX's thresholds";
}

}  // namespace ringreduce
