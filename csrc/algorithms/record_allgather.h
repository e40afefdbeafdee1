// Every rank's small record to every rank, directly (one hop, so the latency
// is one message, not a ring's n-1): the host-side rounds of the device
// algorithms (IPC handles, stream barriers, NCCL's unique id). Round r of an
// operation uses message slot r, so one operation can run many rounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/op_context.h"
#include "algorithms/comm.h"

namespace ringreduce {

// Rank q's record lands at q * bytes of `all` (mine included).
// `arrived`, when given, says by rank whose record came, also when the
// exchange throws (which peers entered the operation).
void exchangeRecords(const Comm& comm, const OpContext& op, uint32_t round,
                     const void* mine, void* all, size_t bytes,
                     std::vector<bool>* arrived = nullptr);

}  // namespace ringreduce
