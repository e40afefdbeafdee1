// The device ring's allreduce on several nodes of several ranks each, in two
// levels, as the host's two-level allreduce (two_level_allreduce.h) does
// it: a device-ring reduce-scatter inside each node (UCX's intra-node
// transports: cuda_ipc between GPUs of one machine), a device-ring
// allreduce of each rank's chunk among the ranks of the same local index
// on every node (the network, carrying 2(N-1)/N of the buffer per node for
// N nodes instead of the flat ring's 2(p-1)/p per rank and paying 2(N-1)
// network latencies instead of 2(p-1)), and an allgather inside each node.
//
// Nodes of equal size only (torchrun's layout); elsewhere, and with one
// node or one rank per node, it is the flat device ring. AVG adds up to the
// last combination, across nodes, which divides by every rank's count. The
// 16-bit wire (DeviceRingArgs::wire) applies as in the flat ring.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/device/ring.h"
#include "core/base/op_context.h"
#include "core/plan/topology.h"

namespace ringreduce {

// In place, as deviceRingAllreduce; `topology` is that of comm's ranks.
void deviceTwoLevelAllreduce(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                             const Topology& topology, DeviceSteps& steps);

}  // namespace ringreduce
