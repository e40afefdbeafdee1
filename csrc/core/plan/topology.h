// Which ranks share a node. The two-level allreduce works inside and across
// nodes, and the cost model prices a message by whether it stays on its
// node; the backend learns it from the host identities the ranks exchange
// (algorithms/allreduce.h), tests and the simulator state it.
#pragma once

#include <cstdint>
#include <vector>

namespace ringreduce {

struct Topology {
  // nodeOf[rank]: the rank's node, numbered 0, 1, ... in order of each
  // node's lowest rank.
  std::vector<int> nodeOf;

  // Every rank on one node.
  static Topology singleNode(int size);
  // `nodes` nodes of `ranksPerNode` consecutive ranks (torchrun's layout).
  static Topology blocks(int nodes, int ranksPerNode);
  // Ranks with equal hashes (core/base/host_identity.h) share a node.
  static Topology fromHostHashes(const std::vector<uint64_t>& hashes);
  // From any node labels: renumbers them in order of first appearance.
  static Topology fromLabels(const std::vector<int>& labels);

  int size() const { return static_cast<int>(nodeOf.size()); }
  int nodes() const;
  // The ranks of each node, in rank order.
  std::vector<std::vector<int>> ranksByNode() const;
  // Every node holds the same number of ranks.
  bool regular() const;
  // Ranks on the most crowded node.
  int maxRanksPerNode() const;
  // More than one node, each of the same number of ranks, more than one:
  // where the device ring's allreduce runs in two levels
  // (algorithms/device/two_level.h).
  bool equalNodesOfSeveralRanks() const {
    return nodes() > 1 && regular() && maxRanksPerNode() > 1;
  }
};

}  // namespace ringreduce
