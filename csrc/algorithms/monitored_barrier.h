// gloo's monitored barrier: rank 0 waits for every other rank within the
// timeout and, when some do not come, says which ones; then releases the rest.
#pragma once

#include "core/base/op_context.h"
#include "algorithms/comm.h"

namespace ringreduce {

// Throws TimeoutError naming the missing rank (the first one, or all of them
// with waitAllRanks) on rank 0, and naming rank 0 on the others.
void monitoredBarrier(const Comm& comm, const OpContext& op, bool waitAllRanks);

}  // namespace ringreduce
