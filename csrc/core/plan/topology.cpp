// Which ranks share a node (topology.h)
#include "core/plan/topology.h"

#include <algorithm>
#include <map>

namespace ringreduce {

Topology Topology::singleNode(int size) { return fromLabels(std::vector<int>(size, 0)); }

Topology Topology::blocks(int nodes, int ranksPerNode) {
  std::vector<int> labels;
  for (int node = 0; node < nodes; ++node) labels.insert(labels.end(), ranksPerNode, node);
  return fromLabels(labels);
}

Topology Topology::fromHostHashes(const std::vector<uint64_t>& hashes) {
  std::map<uint64_t, int> index;
  std::vector<int> labels;
  for (uint64_t h : hashes)
    labels.push_back(index.emplace(h, static_cast<int>(index.size())).first->second);
  return fromLabels(labels);
}

Topology Topology::fromLabels(const std::vector<int>& labels) {
  std::map<int, int> renumber;
  Topology t;
  for (int label : labels) {
    t.nodeOf.push_back(renumber.emplace(label, static_cast<int>(renumber.size())).first->second);
  }
  return t;
}

int Topology::nodes() const {
  return nodeOf.empty() ? 0 : *std::max_element(nodeOf.begin(), nodeOf.end()) + 1;
}

std::vector<std::vector<int>> Topology::ranksByNode() const {
  std::vector<std::vector<int>> byNode(static_cast<size_t>(nodes()));
  for (int rank = 0; rank < size(); ++rank) byNode[nodeOf[rank]].push_back(rank);
  return byNode;
}

bool Topology::regular() const {
  const auto byNode = ranksByNode();
  for (const auto& ranks : byNode) {
    if (ranks.size() != byNode[0].size()) return false;
  }
  return true;
}

int Topology::maxRanksPerNode() const {
  size_t most = 0;
  for (const auto& ranks : ranksByNode()) most = std::max(most, ranks.size());
  return static_cast<int>(most);
}

}  // namespace ringreduce
