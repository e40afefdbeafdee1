// The device ring's allreduce in two levels, for nodes of several ranks (two_level.h)
#include "algorithms/device/two_level.h"

#include <vector>

#include "algorithms/ring_allgather.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/partition.h"
#include "transport/subgroup_transport.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// The node's allgather follows its reduce-scatter between the same ranks in
// the same operation: the device ring's reduce-scatter keeps its tags below
// kRingPhaseSlots, the allgather takes the slots above (as the host's
// two-level allreduce does).
constexpr uint32_t kNodeGatherFirstSlot = kRingPhaseSlots;
constexpr uint32_t kNodeGatherSlots = kRingPhaseSlots / 2;

}  // namespace

void deviceTwoLevelAllreduce(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                             const Topology& topology, DeviceSteps& steps) {
  if (topology.size() != comm.size() || !topology.equalNodesOfSeveralRanks()) {
    return deviceRingAllreduce(comm, op, args, steps);
  }
  withDeviceWire(comm, op, args, steps, [&](const DeviceRingArgs& all) {
    if (all.count == 0) return;
    const std::vector<std::vector<int>> byNode = topology.ranksByNode();
    const int node = topology.nodeOf[comm.rank()];
    const std::vector<int>& mates = byNode[node];
    const int perNode = static_cast<int>(mates.size());
    int local = 0;
    while (mates[local] != comm.rank()) ++local;

    // Inside the node: local rank l ends with the node's reduction of chunk
    // l. AVG adds here; the division waits for the last combination.
    SubgroupTransport inNode(comm.transport, mates, op);
    const Comm nodeComm{inNode, comm.config, comm.workspace};
    DeviceRingArgs nodePhase = all;
    nodePhase.wire = WireDtype::None;
    if (all.op == ReduceOp::Avg) nodePhase.op = ReduceOp::Sum;
    deviceRingReduceScatter(nodeComm, op, nodePhase, steps);

    // Across nodes, with the ranks of my local index: node and cross-node
    // pairs are disjoint, so their tags never meet.
    std::vector<int> peers;
    for (const std::vector<int>& ranks : byNode) peers.push_back(ranks[local]);
    SubgroupTransport across(comm.transport, peers, op);
    const Comm acrossComm{across, comm.config, comm.workspace};
    const size_t esize = elementSize(all.type);
    const Range mine = chunkOf(all.count, perNode, local);
    DeviceRingArgs part = nodePhase;
    part.op = all.op;
    part.data = static_cast<char*>(all.data) + mine.offset * esize;
    part.count = mine.count;
    part.avgDivisor = all.op == ReduceOp::Avg ? comm.size() : 0;
    deviceRingAllreduce(acrossComm, op, part, steps);

    // Inside the node: every chunk from its rank to the others. The
    // device's work on it is done (the rings return only then).
    std::vector<size_t> chunkBytes;
    for (int l = 0; l < perNode; ++l) chunkBytes.push_back(chunkOf(all.count, perNode, l).count * esize);
    ringAllgatherInPlace(nodeComm, op, all.data, ChunkLayout::ofSizes(chunkBytes),
                         kNodeGatherFirstSlot, kNodeGatherSlots);
  });
}

}  // namespace ringreduce
