// Who does what in the two-level reduce-scatter and allgather (algorithms/
// two_level_scatter_gather.h) on any set of nodes, shared by the algorithm
// and the cost model that prices it (core/plan/allreduce_cost.h), as
// halving_plan.h is for halving/doubling.
//
// With N nodes of k_0 .. k_{N-1} ranks, the buffer is cut into P parts,
// P = the smallest k_j, so that every node has a rank for every part. On
// node j, part i belongs to a team: its local ranks i, i + P, i + 2P, ...;
// the first (local rank i, the holder) takes the part across the nodes,
// the others (only on nodes larger than the smallest) hand their chunks to
// it and get them from it, inside the node. Part i is made of the chunks of
// team i of every node, node by node, each team's in local order.
//
// Reduce-scatter: inside each node, the holders get the node's partial
// reduction of their parts (the other ranks end with nothing: their chunk
// of the node's phase is empty); across, the holders of part i
// reduce-scatter it, each keeping its team's chunks; then each holder hands
// the others of its team their chunk. The allgather runs backwards.
//
// Why these parts: a rank that crossed the network for two parts would run
// two crossings one after the other (the algorithms have one exchange in
// flight per step), doubling the network latencies that two levels are
// there to save; with P = the smallest node, no rank crosses twice, and a
// node's larger size costs only its in-node phase (cheap links) and one
// in-node hand-over. On equal nodes P = k, teams of one: Horovod's sharded
// form. With a node of one rank, P = 1: one rank per node crosses, with the
// whole buffer (Horovod's other form), which the cost model weighs against
// the flat forms.
#pragma once

#include <cstddef>
#include <vector>

#include "core/plan/chunk_layout.h"
#include "core/plan/topology.h"

namespace ringreduce {

class TwoLevelPlan {
 public:
  explicit TwoLevelPlan(const Topology& topology);

  // More than one node, and some node with more than one rank.
  static bool applies(const Topology& topology);

  int nodes() const { return static_cast<int>(byNode_.size()); }
  int parts() const { return parts_; }
  const std::vector<int>& ranksOfNode(int node) const { return byNode_[node]; }
  int nodeOf(int rank) const { return nodeOf_[rank]; }
  int localOf(int rank) const { return localOf_[rank]; }
  // The part a rank's team serves, and whether it carries it across.
  int partOf(int rank) const { return localOf_[rank] % parts_; }
  bool holds(int rank) const { return localOf_[rank] < parts_; }
  int holderOf(int rank) const { return byNode_[nodeOf_[rank]][partOf(rank)]; }
  // The holders of part i, one per node, in node order.
  std::vector<int> crossing(int part) const;
  // The others of a holder's team (empty for the others themselves).
  std::vector<int> teamOthers(int rank) const;

  // The node's phase halves and doubles (its ranks a power of two, each its
  // own team: equal chunks); otherwise it runs the ring.
  bool nodeHalves(int node) const;

  // Ranks in the order of the grouped buffer: part by part, node by node.
  int rankAt(int position) const { return positions_[position]; }
  int positionOf(int rank) const { return positionOf_[rank]; }
  // The grouped buffer is the buffer in rank order.
  bool isRankOrder() const;

  // Layouts, given each rank's chunk size (`sizeOfRank`, in any unit):
  // the grouped buffer (one chunk per position); the first position of
  // part i (parts().. gives the end); a node's phase (local rank l < P:
  // part l; the others: nothing); part i's crossing (node j: team i of j).
  ChunkLayout grouped(const std::vector<size_t>& sizeOfRank) const;
  int firstPositionOf(int part) const { return partStart_[part]; }
  ChunkLayout inNode(int node, const std::vector<size_t>& sizeOfRank) const;
  ChunkLayout acrossNodes(int part, const std::vector<size_t>& sizeOfRank) const;
  // The allreduce's node phase (algorithms/two_level_allreduce.h), given
  // the sizes of the P parts: local rank l < P gets part l, the others
  // nothing (the parts are contiguous, so it needs no grouped copy).
  ChunkLayout nodeParts(int node, const std::vector<size_t>& partSizes) const;

 private:
  std::vector<std::vector<int>> byNode_;
  std::vector<int> nodeOf_, localOf_;
  int parts_ = 1;
  std::vector<int> positions_, positionOf_, partStart_;
};

}  // namespace ringreduce
