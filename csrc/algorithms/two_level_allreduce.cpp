#include "algorithms/two_level_allreduce.h"

#include <vector>

#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "core/errors.h"
#include "core/host_reduce.h"
#include "transport/subgroup_transport.h"

namespace ringreduce {

void twoLevelAllreduce(const Comm& comm, const OpContext& op, const TwoLevelArgs& args) {
  const ReductionArgs& all = args.reduction;
  const int n = comm.size();
  if (n == 1 || all.count == 0) return;
  if (args.topology == nullptr || args.topology->size() != n) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": two_level needs the node of each of the " + std::to_string(n) +
                          " ranks");
  }
  const Topology& topology = *args.topology;
  const auto byNode = topology.ranksByNode();
  if (byNode.size() == 1 || byNode[0].size() == 1 || !topology.regular()) {
    return halvingDoublingAllreduce(comm, op, all);
  }
  const std::vector<int>& local = byNode[topology.nodeOf[comm.rank()]];
  int myIndex = 0;
  while (local[myIndex] != comm.rank()) ++myIndex;

  // Inside the node. The division of AVG waits for the last combination,
  // which happens across nodes.
  SubgroupTransport node(comm.transport, local, op);
  const Comm nodeComm{node, comm.config, comm.workspace};
  halvingReduceScatter(nodeComm, op, all, 0);

  const HalvingPlan plan(static_cast<int>(local.size()));
  const int v = plan.virtualOf(myIndex);
  if (v >= 0) {
    // Across nodes, with the ranks at my place on every node: they own the
    // same block, since every node runs the same plan.
    std::vector<int> peers;
    for (const auto& ranks : byNode) peers.push_back(ranks[myIndex]);
    SubgroupTransport across(comm.transport, peers, op);
    const Comm acrossComm{across, comm.config, comm.workspace};
    const Range block = halvingBlock(all.count, plan, plan.blockOf(v));
    ReductionArgs shard = all;
    shard.data = comm.config.payloadFree
                     ? nullptr
                     : static_cast<char*>(all.data) + block.offset * elementSize(all.type);
    shard.count = block.count;
    const bool average = all.op == ReduceOp::Avg;
    if (average) shard.op = ReduceOp::Sum;
    if (args.crossNode == AllreduceAlgorithm::HalvingDoubling ||
        (average && isHalfPrecision(all.type))) {
      // Fuses AVG's division (by every rank, not just the shard's) into the last step.
      if (shard.count > 0) {
        halvingReduceScatter(acrossComm, op, shard, average ? n : 0);
        doublingAllgather(acrossComm, op, shard);
      }
    } else {
      if (args.crossNode == AllreduceAlgorithm::Direct) {
        directAllreduce(acrossComm, op, shard);
      } else {
        ringAllreduce(acrossComm, op, shard);
      }
      // Sum, then one division: what reduceAndAverage does for these types.
      if (average && !comm.config.payloadFree && shard.count > 0) {
        finishAverage(all.type, shard.data, shard.count, n);
      }
    }
  }
  doublingAllgather(nodeComm, op, all);
}

}  // namespace ringreduce
