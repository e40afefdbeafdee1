// Who does what in the two-level reduce-scatter and allgather (two_level_plan.h)
#include "core/plan/two_level_plan.h"

#include <algorithm>

namespace ringreduce {

TwoLevelPlan::TwoLevelPlan(const Topology& topology)
    : byNode_(topology.ranksByNode()),
      nodeOf_(topology.nodeOf),
      localOf_(topology.size()),
      positionOf_(topology.size()) {
  parts_ = static_cast<int>(byNode_[0].size());
  for (const auto& ranks : byNode_) {
    parts_ = std::min(parts_, static_cast<int>(ranks.size()));
    for (size_t l = 0; l < ranks.size(); ++l) localOf_[ranks[l]] = static_cast<int>(l);
  }
  for (int part = 0; part < parts_; ++part) {
    partStart_.push_back(static_cast<int>(positions_.size()));
    for (const auto& ranks : byNode_) {
      for (size_t l = part; l < ranks.size(); l += parts_) positions_.push_back(ranks[l]);
    }
  }
  partStart_.push_back(static_cast<int>(positions_.size()));
  for (size_t q = 0; q < positions_.size(); ++q) positionOf_[positions_[q]] = static_cast<int>(q);
}

bool TwoLevelPlan::applies(const Topology& topology) {
  return topology.nodes() > 1 && topology.maxRanksPerNode() > 1;
}

std::vector<int> TwoLevelPlan::crossing(int part) const {
  std::vector<int> holders;
  for (const auto& ranks : byNode_) holders.push_back(ranks[part]);
  return holders;
}

std::vector<int> TwoLevelPlan::teamOthers(int rank) const {
  std::vector<int> others;
  if (!holds(rank)) return others;
  const auto& ranks = byNode_[nodeOf_[rank]];
  for (size_t l = localOf_[rank] + parts_; l < ranks.size(); l += parts_) {
    others.push_back(ranks[l]);
  }
  return others;
}

bool TwoLevelPlan::nodeHalves(int node) const {
  const int k = static_cast<int>(byNode_[node].size());
  return k == parts_ && (k & (k - 1)) == 0;
}

bool TwoLevelPlan::isRankOrder() const {
  for (size_t q = 0; q < positions_.size(); ++q) {
    if (positions_[q] != static_cast<int>(q)) return false;
  }
  return true;
}

ChunkLayout TwoLevelPlan::grouped(const std::vector<size_t>& sizeOfRank) const {
  std::vector<size_t> sizes;
  for (int rank : positions_) sizes.push_back(sizeOfRank[rank]);
  return ChunkLayout::ofSizes(sizes);
}

ChunkLayout TwoLevelPlan::inNode(int node, const std::vector<size_t>& sizeOfRank) const {
  const ChunkLayout all = grouped(sizeOfRank);
  std::vector<size_t> partSizes;
  for (int part = 0; part < parts_; ++part) {
    partSizes.push_back(all.span(partStart_[part], partStart_[part + 1] - partStart_[part]).count);
  }
  return nodeParts(node, partSizes);
}

ChunkLayout TwoLevelPlan::acrossNodes(int part, const std::vector<size_t>& sizeOfRank) const {
  std::vector<size_t> sizes;
  for (const auto& ranks : byNode_) {
    size_t team = 0;
    for (size_t l = part; l < ranks.size(); l += parts_) team += sizeOfRank[ranks[l]];
    sizes.push_back(team);
  }
  return ChunkLayout::ofSizes(sizes);
}

ChunkLayout TwoLevelPlan::nodeParts(int node, const std::vector<size_t>& partSizes) const {
  std::vector<size_t> sizes(byNode_[node].size(), 0);
  for (int part = 0; part < parts_; ++part) sizes[part] = partSizes[part];
  return ChunkLayout::ofSizes(sizes);
}

}  // namespace ringreduce
