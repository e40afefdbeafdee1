// Horovod's hierarchical allreduce, on nodes of any sizes (two_level_allreduce.h)
#include "algorithms/two_level_allreduce.h"

#include <string>
#include <vector>

#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/ring_allgather.h"
#include "core/plan/chunk_layout.h"
#include "core/base/errors.h"
#include "core/math/host_reduce.h"
#include "core/plan/two_level_plan.h"
#include "transport/subgroup_transport.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// The node's ring allgather follows its ring reduce-scatter between the same
// ranks in the same operation: it takes slots above the reduce-scatter's
// (which stay below kRingPhaseSlots), below those at the top of the range.
constexpr uint32_t kNodeGatherFirstSlot = kRingPhaseSlots;
constexpr uint32_t kNodeGatherSlots = kRingPhaseSlots / 2;

// The part's allreduce among its holders, one per node. The division of AVG
// (by every rank, not just the holders) happens here, once.
void allreduceAcrossNodes(const Comm& acrossComm, const OpContext& op, const ReductionArgs& all,
                          int worldSize, AllreduceAlgorithm crossNode, ReductionArgs part) {
  const bool average = all.op == ReduceOp::Avg;
  if (average) part.op = ReduceOp::Sum;
  if (crossNode == AllreduceAlgorithm::HalvingDoubling || (average && isHalfPrecision(all.type))) {
    // Fuses AVG's division into the last step.
    halvingReduceScatter(acrossComm, op, part, average ? worldSize : 0);
    doublingAllgather(acrossComm, op, part);
    return;
  }
  if (crossNode == AllreduceAlgorithm::Direct) {
    directAllreduce(acrossComm, op, part);
  } else {
    ringAllreduce(acrossComm, op, part);
  }
  // Sum, then one division: what reduceAndAverage does for these types.
  if (average && !acrossComm.config.payloadFree) {
    finishAverage(all.type, part.data, part.count, worldSize);
  }
}

}  // namespace

void twoLevelAllreduce(const Comm& comm, const OpContext& op, const TwoLevelArgs& args) {
  const ReductionArgs& all = args.reduction;
  const int n = comm.size();
  if (n == 1 || all.count == 0) return;
  if (args.topology == nullptr || args.topology->size() != n) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": two_level needs the node of each of the " + std::to_string(n) +
                          " ranks");
  }
  if (!TwoLevelPlan::applies(*args.topology)) return halvingDoublingAllreduce(comm, op, all);
  const TwoLevelPlan plan(*args.topology);
  const int rank = comm.rank();
  const int node = plan.nodeOf(rank);
  const size_t esize = elementSize(all.type);
  const ChunkLayout parts = ChunkLayout::even(all.count, plan.parts());
  std::vector<size_t> partElements, partBytes;
  for (int i = 0; i < parts.parts(); ++i) {
    partElements.push_back(parts.chunk(i).count);
    partBytes.push_back(parts.chunk(i).count * esize);
  }

  // Inside the node: each holder ends with the node's partial reduction of
  // its part. The division of AVG waits for the last combination, across.
  SubgroupTransport inNode(comm.transport, plan.ranksOfNode(node), op);
  const Comm nodeComm{inNode, comm.config, comm.workspace};
  const bool halves = plan.nodeHalves(node);
  const ChunkLayout nodeChunks = plan.nodeParts(node, partElements);
  if (halves) {
    halvingReduceScatter(nodeComm, op, all, 0, nodeChunks);
  } else {
    ringReduceScatter(nodeComm, op, all, 0, nodeChunks);
  }

  // Across nodes, with the other holders of my part. Node-local and
  // cross-node pairs are disjoint, so the phases' tags never meet.
  const Range mine = parts.chunk(plan.partOf(rank));
  if (plan.holds(rank) && mine.count > 0) {
    SubgroupTransport across(comm.transport, plan.crossing(plan.partOf(rank)), op);
    const Comm acrossComm{across, comm.config, comm.workspace};
    ReductionArgs part = all;
    part.data = comm.config.payloadFree ? nullptr
                                        : static_cast<char*>(all.data) + mine.offset * esize;
    part.count = mine.count;
    allreduceAcrossNodes(acrossComm, op, all, n, args.crossNode, part);
  }

  // Inside the node: every part from its holder to the node's ranks.
  if (halves) {
    doublingAllgather(nodeComm, op, all, nodeChunks);
  } else {
    ringAllgatherInPlace(nodeComm, op, comm.config.payloadFree ? nullptr : all.data,
                         plan.nodeParts(node, partBytes), kNodeGatherFirstSlot, kNodeGatherSlots);
  }
}

}  // namespace ringreduce
