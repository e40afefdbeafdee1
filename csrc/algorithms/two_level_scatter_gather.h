// Reduce-scatter and allgather in two levels, for groups whose ranks share
// nodes: the halves of the two-level allreduce (two_level_allreduce.h), with
// the placement of the flat forms (rank r ends with chunk r, chunkOf(count,
// p, r); rank r's block lands at r * blockBytes).
//
// Local rank i of a node is paired with local rank i of every other node;
// the chunks of those N ranks form part i. Reduce-scatter: inside each node,
// local rank i gets the node's partial reduction of part i; across nodes,
// the ranks of part i reduce-scatter it, each keeping its own chunk. A
// node's link carries (N-1)/N of the buffer instead of the flat ring's
// (p-1)/p per rank, and a small one pays (k-1) node-local and (N-1) (or
// log2 N) network latencies instead of p-1 mixed ones. The allgather runs
// the same phases backwards: across nodes, then inside.
//
// A part's chunks are not contiguous in the caller's buffer (nor of one
// size: chunkOf gives the first count % p one element more), so both forms
// work on a copy in node order (Workspace::kReorder): part i's N chunks in
// node order, each chunk padded to the largest, so every phase is an
// ordinary equal-chunk reduce-scatter or allgather. The padding is reduced
// and never read. Both skip the copy when the ranks are dealt round robin
// (rank r on node r % N), where node order is rank order (the reduce-scatter
// when p also divides the count).
//
// Needs every node to hold the same number k > 1 of ranks, on N > 1 nodes
// (twoLevelFits); the caller (scatter_gather.h) runs the flat forms
// elsewhere. Results match the ring's bit for bit on exact inputs: each
// element is reduced at one rank; AVG divides once, by p, in the last
// combination, which happens across nodes.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/allreduce_algorithm.h"
#include "core/op_context.h"
#include "core/topology.h"

namespace ringreduce {

// More than one node, more than one rank on each, all nodes alike.
bool twoLevelFits(const Topology& topology);

// `crossNode`: Ring, or HalvingDoubling (used only when the number of nodes
// is a power of two; the ring otherwise). Inside a node: recursive
// halving/doubling when its ranks are a power of two, else the ring.
void twoLevelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                           const Topology& topology, AllreduceAlgorithm crossNode);
void twoLevelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args,
                       const Topology& topology, AllreduceAlgorithm crossNode);

}  // namespace ringreduce
