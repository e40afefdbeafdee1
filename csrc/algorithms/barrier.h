// Dissemination barrier: ceil(log2 n) rounds of empty messages; when it
// returns on any rank, every rank has entered it.
#pragma once

#include "core/base/op_context.h"
#include "algorithms/comm.h"

namespace ringreduce {

void disseminationBarrier(const Comm& comm, const OpContext& op);

}  // namespace ringreduce
