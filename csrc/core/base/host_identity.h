// Which machine (and boot) this process runs on, so ranks can tell which
// peers share a node: those can map each other's GPU memory through CUDA IPC.
#pragma once

#include <cstdint>
#include <string>

namespace ringreduce {

// Hostname and boot id (a container's hostname alone may repeat across nodes),
// or RINGREDUCE_HOST_ID where it is set: ranks of one machine with different
// values count as on different nodes (no CUDA IPC or cma between them).
std::string hostIdentity();

// A 64-bit hash of hostIdentity(), for fixed-size records.
uint64_t hostIdentityHash();

}  // namespace ringreduce
