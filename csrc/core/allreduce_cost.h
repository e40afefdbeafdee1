// Predicted time of each host allreduce algorithm on a given set of nodes,
// from per-message latency, per-byte time and per-message overhead of the
// two link classes (same node, other node). The selection
// (cheapest) is a pure function of the topology, the link costs and the
// size, so every rank makes the same choice without talking.
//
// Each algorithm is a sequence of steps; a step costs the latency plus the
// time of its busiest resource: a rank's sends to its own node, or a node's
// NIC, which all of a node's ranks share. The simulator
// (transport/simulated/) runs the real schedules on the same model, message
// by message, and so checks these formulas.
#pragma once

#include <cstddef>
#include <vector>

#include "core/allreduce_algorithm.h"
#include "core/link_cost.h"
#include "core/topology.h"

namespace ringreduce {

class AllreduceCostModel {
 public:
  AllreduceCostModel(Topology topology, const LinkCost& intra, const LinkCost& inter);

  // Seconds for an allreduce of `bytes`; infinity where the algorithm does not
  // apply (two_level on a single node, one rank per node, or nodes of
  // different sizes). Auto: the cheapest's.
  double predict(AllreduceAlgorithm algorithm, size_t bytes) const;
  // The cheapest of ring, halving_doubling, two_level and direct; ties go
  // to the one listed first.
  AllreduceAlgorithm cheapest(size_t bytes) const;
  // Inside two_level: how the shards cross the nodes (ring or halving_doubling).
  AllreduceAlgorithm crossNodeAlgorithm(size_t bytes) const;

  const Topology& topology() const { return topology_; }
  bool twoLevelApplies() const { return twoLevel_; }

  // The load of one step on its busiest resources, per unit of bytes that
  // each message carries.
  struct StepLoad {
    int intraMessages = 0;  // most messages one rank sends within its node
    int interMessages = 0;  // most messages one rank sends off its node
    double intraUnits = 0;  // most units one rank sends within its node
    double nicUnits = 0;    // most units through one node's NIC, either way
  };
  struct Step {
    StepLoad load;
    double fraction = 0;  // unit bytes as a fraction of the allreduce's size
    int repeat = 1;
  };

 private:
  double timeOf(const std::vector<Step>& steps, double bytes) const;
  double twoLevelCross(AllreduceAlgorithm algorithm, double bytes) const;

  Topology topology_;
  LinkCost intra_, inter_;
  bool twoLevel_ = false;
  int activePerNode_ = 1;  // two_level: ranks per node that own a shard
  std::vector<Step> ring_, halving_, direct_, intraPhase_, crossRing_, crossHalving_;
};

}  // namespace ringreduce
