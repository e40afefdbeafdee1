// Horovod's hierarchical allreduce, on nodes of any sizes: a reduce-scatter
// inside each node onto one rank per part, an allreduce of each part
// across the nodes among the ranks holding it (ring, halving/doubling or
// direct, all of a node's holders through its one NIC at once), and an
// allgather inside each node.
//
// Who holds what is core/plan/two_level_plan.h, as for the two-level
// reduce-scatter and allgather: the buffer is cut into P even parts, P =
// the smallest node's ranks, so every node has a holder (local rank l < P)
// for every part and no rank crosses the network twice; the other ranks of
// a larger node take part in its node phases only, owning nothing. Inside a
// node: recursive halving/doubling when its ranks are a power of two and
// all hold a part (TwoLevelPlan::nodeHalves), else the ring (a larger
// node's ring carries the whole buffer and pays its extra ranks' hops on
// the fast links). On equal nodes of k ranks (P = k) each node's link
// carries 2(N-1)/N of the buffer for N nodes instead of the flat ring's
// 2(p-1)/p per rank, and a small allreduce pays 2(N-1) or 2 log2(N)
// network latencies instead of 2(p-1). With a node of one rank, P = 1: one
// rank per node crosses with the whole buffer, weighed by the cost model.
//
// Needs more than one node and some node with more than one rank
// (TwoLevelPlan::applies); elsewhere it runs halving/doubling over all
// ranks. Same results as the ring: each element is reduced at one rank;
// AVG divides once, by p, in the last combination, which happens across
// nodes (float16/bfloat16 AVG therefore crosses by halving/doubling, which
// fuses the division before the one rounding).
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/allreduce_algorithm.h"
#include "core/base/op_context.h"
#include "core/plan/topology.h"

namespace ringreduce {

struct TwoLevelArgs {
  ReductionArgs reduction;
  const Topology* topology = nullptr;  // of comm's ranks
  // How the parts cross the nodes: Ring, HalvingDoubling or Direct.
  AllreduceAlgorithm crossNode = AllreduceAlgorithm::Ring;
};

void twoLevelAllreduce(const Comm& comm, const OpContext& op, const TwoLevelArgs& args);

}  // namespace ringreduce
