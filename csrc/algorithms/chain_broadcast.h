// Pipelined chain broadcast: the root sends segments to the next rank, which
// forwards each segment as soon as it has it. Bandwidth-optimal for large
// messages; n-1 hops of latency for small ones.
#pragma once

#include <cstddef>

#include "core/config.h"
#include "core/op_context.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

void chainBroadcast(UcxTransport& transport, const OpContext& op, void* data, size_t bytes,
                    int root, const Config& config);

}  // namespace ringreduce
