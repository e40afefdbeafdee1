// Which machine (and boot) this process runs on, so ranks can tell which
// peers share a node: those can map each other's GPU memory through CUDA IPC.
#pragma once

#include <cstdint>
#include <string>

namespace ringreduce {

// Hostname and boot id (a container's hostname alone may repeat across nodes).
std::string hostIdentity();

// A 64-bit hash of hostIdentity(), for fixed-size records.
uint64_t hostIdentityHash();

}  // namespace ringreduce
