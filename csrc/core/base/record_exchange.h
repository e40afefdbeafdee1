// How a layer that must agree with its peers on a few bytes reaches them
// without knowing the transport: the device paths (csrc/cuda) exchange IPC
// handles, stream-barrier tokens and NCCL's unique id through it, and the
// backend builds it over the group's transport.
#pragma once

#include <cstddef>
#include <functional>

namespace ringreduce {

// Allgather of one small record per rank: rank r's record lands at
// r * bytes of `all` (mine included). Every rank calls it the same number of
// times in the same order. Throws on timeout or peer failure.
using RecordExchange = std::function<void(const void* mine, void* all, size_t bytes)>;

}  // namespace ringreduce
