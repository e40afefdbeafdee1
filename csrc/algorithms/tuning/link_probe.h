// Measuring the links the cost model prices (core/plan/allreduce_cost.h): the
// latency and per-byte time from ping-pongs of 8 bytes and 1 MiB, and the
// sender's per-message cost from a burst of small messages; and, for the
// virtual-time transport's CPU model (core/plan/host_cpu.h), the CPU time both
// ends spent on those messages (process CPU time, kernel included). Every rank calls
// these with the same arguments inside one operation; ranks not measured
// only wait for the figures, which all ranks then share (the choice that
// depends on them must be the same everywhere).
#pragma once

#include <cstdint>

#include "algorithms/comm.h"
#include "core/plan/host_cpu.h"
#include "core/plan/link_cost.h"
#include "core/base/op_context.h"
#include "core/plan/topology.h"

namespace ringreduce {

// The link between ranks a and b, as rank a measured it, the per-byte time
// from messages of `largeBytes` (past any burst allowance of a shaped link).
// Message slots [slotBase, slotBase + 2048) of `op`. *cpu (if given): the
// CPU both ends spent per message and per byte, on every rank.
LinkCost probeLink(const Comm& comm, const OpContext& op, int a, int b, const LinkCost& fallback,
                   uint32_t slotBase, size_t largeBytes = 1 << 20, MessageCpu* cpu = nullptr);

// Both classes as seen from rank 0: to the next rank of its node and to the
// first rank of another node. A class the group lacks keeps its value.
// Slots from the top of the slot space down, clear of the algorithms'.
void probeLinks(const Comm& comm, const OpContext& op, const Topology& topology, LinkCost* intra,
                LinkCost* inter, size_t largeBytes = 1 << 20, MessageCpu* intraCpu = nullptr,
                MessageCpu* interCpu = nullptr);

}  // namespace ringreduce
