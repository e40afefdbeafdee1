// Reduce-scatter and allgather in two levels, for groups whose ranks share
// nodes: the halves of the two-level allreduce (two_level_allreduce.h), with
// the placement of the flat forms (rank r ends with chunk r, chunkOf(count,
// p, r); rank r's block lands at r * blockBytes), on nodes of any sizes.
//
// Who carries which part across the nodes is core/plan/two_level_plan.h: P
// parts (P = the smallest node's ranks); on each node one rank per part
// (its holder) crosses, the node's other ranks hand their chunks to their
// part's holder and get them from it. Reduce-scatter: inside each node the
// holders get the node's partial reduction of their parts; across nodes
// the holders of part i reduce-scatter it, each keeping its team's chunks;
// then the holders hand the others their chunks. On equal nodes a node's
// link carries (N-1)/N of the buffer instead of the flat ring's (p-1)/p per
// rank, and a small one pays (k-1) node-local and (N-1) (or about log2 N)
// network latencies instead of p-1 mixed ones. The allgather runs the same
// phases backwards: hand-overs, across, inside.
//
// A part's chunks are not contiguous in the caller's buffer, so both forms
// work on a copy in part order (Workspace::kReorder) whose phases are
// ordinary reduce-scatters and allgathers with chunks of given sizes
// (core/plan/chunk_layout.h); they skip the copy when part order is rank order
// (equal nodes with ranks dealt round robin, rank r on node r % N).
//
// Needs more than one node and a node with more than one rank
// (twoLevelFits); the caller (scatter_gather.h) runs the flat forms
// elsewhere. Results match the ring's bit for bit on exact inputs: each
// element is reduced at one rank; AVG divides once, by p, in the last
// combination, which happens across nodes.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/allreduce_algorithm.h"
#include "core/base/op_context.h"
#include "core/plan/topology.h"

namespace ringreduce {

// More than one node, more than one rank on some node.
bool twoLevelFits(const Topology& topology);

// `crossNode`: Ring, or HalvingDoubling (rank order, folding a pair of
// nodes when their number is not a power of two). Inside a node:
// halving/doubling when its ranks are a power of two and each holds a part
// (TwoLevelPlan::nodeHalves), else the ring.
void twoLevelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                           const Topology& topology, AllreduceAlgorithm crossNode);
void twoLevelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args,
                       const Topology& topology, AllreduceAlgorithm crossNode);

}  // namespace ringreduce
