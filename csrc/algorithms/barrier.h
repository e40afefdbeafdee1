// Dissemination barrier: ceil(log2 n) rounds of empty messages; when it
// returns on any rank, every rank has entered it.
#pragma once

#include "core/op_context.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

void disseminationBarrier(UcxTransport& transport, const OpContext& op);

}  // namespace ringreduce
