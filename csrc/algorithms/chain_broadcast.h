// Pipelined chain broadcast: the root sends segments to the next rank, which
// forwards each segment as soon as it has it. Bandwidth-optimal for large
// messages; n-1 hops of latency for small ones.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// `bytes` at `data`: read on `root`, written on every other rank.
struct BroadcastArgs {
  void* data = nullptr;
  size_t bytes = 0;
  int root = 0;
};
void chainBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

}  // namespace ringreduce
