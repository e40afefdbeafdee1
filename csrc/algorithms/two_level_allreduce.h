// Horovod's hierarchical allreduce: reduce-scatter among the ranks of each
// node (recursive halving, over shared memory), an allreduce of each shard
// across the nodes among the ranks holding the same shard (ring,
// halving/doubling or direct, all through the node's one NIC at once), and an
// allgather inside each node (recursive doubling). Each node's link carries
// 2(N-1)/N of the buffer for N nodes instead of the flat ring's
// 2(p-1)/p per rank, and a small allreduce pays 2(N-1) or 2*log2(N)
// network latencies instead of 2(p-1).
//
// Needs every node to hold the same number of ranks; on any other topology
// (or a single node, or one rank per node) it runs halving/doubling over all
// ranks instead. Same results as the ring: each element is reduced at one
// rank; AVG divides once, in the last combination (float16/bfloat16 AVG
// therefore crosses nodes by halving/doubling, which fuses the division).
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/allreduce_algorithm.h"
#include "core/op_context.h"
#include "core/topology.h"

namespace ringreduce {

struct TwoLevelArgs {
  ReductionArgs reduction;
  const Topology* topology = nullptr;  // of comm's ranks
  // How the shards cross the nodes: Ring, HalvingDoubling or Direct.
  AllreduceAlgorithm crossNode = AllreduceAlgorithm::Ring;
};

void twoLevelAllreduce(const Comm& comm, const OpContext& op, const TwoLevelArgs& args);

}  // namespace ringreduce
