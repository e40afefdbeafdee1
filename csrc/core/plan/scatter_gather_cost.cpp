// The cost model's prices of reduce-scatter and allgather (see
// core/plan/allreduce_cost.h). Each is a list of lockstep steps built from the
// messages the algorithms send (core/plan/cost_steps.h), on the same plans the
// algorithms follow (core/plan/halving_plan.h, core/plan/two_level_plan.h), so the
// price follows any group size and any set of nodes without a formula per
// case. The ring parts are priced as the allreduce's ring is: the longer of
// the chain of steps and the busiest resource's work.
#include <algorithm>
#include <limits>
#include <vector>

#include "core/plan/allreduce_cost.h"
#include "core/plan/cost_steps.h"
#include "core/plan/two_level_plan.h"

namespace ringreduce {

namespace {

std::vector<int> ranksUpTo(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

void AllreduceCostModel::planScatterGather() {
  const Topology& t = topology_;
  const int p = t.size();
  const double chunk = 1.0 / p;
  halvingRankOrder_ =
      stepsOf(t, rankOrderHalvingFlows(ranksUpTo(p), std::vector<double>(p, chunk)));
  twoLevelScatterGather_ = TwoLevelPlan::applies(t);
  if (!twoLevelScatterGather_) return;
  const TwoLevelPlan plan(t);
  const std::vector<size_t> oneEach(p, 1);  // layouts counted in chunks

  for (int node = 0; node < plan.nodes(); ++node) {
    nodePhases_.push_back(nodePhaseOf(plan.ranksOfNode(node), plan.nodeHalves(node),
                                      plan.inNode(node, oneEach), chunk));
  }

  // The parts cross at once, all of a node's holders through its NIC: the
  // halving steps of every part merged into one step each; for the ring,
  // the most one holder sends (every team's chunks but the one it keeps)
  // and the most a NIC carries either way.
  const int nodes = plan.nodes();
  std::vector<Flows> merged;
  std::vector<double> out(nodes), in(nodes);
  for (int part = 0; part < plan.parts(); ++part) {
    const ChunkLayout teams = plan.acrossNodes(part, oneEach);
    const std::vector<Flows> steps =
        rankOrderHalvingFlows(plan.crossing(part), unitsOf(teams, chunk));
    merged.resize(steps.size());
    for (size_t s = 0; s < steps.size(); ++s) {
      merged[s].insert(merged[s].end(), steps[s].begin(), steps[s].end());
    }
    for (int j = 0; j < nodes; ++j) {
      acrossRingLink_ = std::max(acrossRingLink_, (teams.total() - teams.chunk(j).count) * chunk);
      out[j] += (teams.total() - teams.chunk(j).count) * chunk;
      in[j] += (teams.total() - teams.chunk((j + nodes - 1) % nodes).count) * chunk;
    }
  }
  acrossHalving_ = stepsOf(t, merged);
  acrossRingSteps_ = nodes - 1;
  for (int j = 0; j < nodes; ++j) acrossRingNic_ = std::max({acrossRingNic_, out[j], in[j]});

  Flows handOver;
  for (int rank = 0; rank < p; ++rank) {
    for (int other : plan.teamOthers(rank)) handOver.push_back({rank, other, chunk});
  }
  if (!handOver.empty()) teamHandOver_ = stepsOf(t, {handOver});
}

double AllreduceCostModel::twoLevelScatterGatherCross(AllreduceAlgorithm algorithm,
                                                      double bytes) const {
  if (algorithm == AllreduceAlgorithm::HalvingDoubling) return timeOf(acrossHalving_, bytes);
  // As ringTime: the chain of steps (pipelined, so a holder's link is busy
  // for all it sends), or the busiest NIC. On equal nodes this is the
  // allreduce's two-level ring, halved.
  return std::max(acrossRingSteps_ * (inter_.alpha + inter_.overhead) +
                      acrossRingLink_ * bytes * inter_.beta,
                  acrossRingNic_ * bytes * inter_.beta);
}

AllreduceAlgorithm AllreduceCostModel::crossNodeScatterGather(size_t bytes) const {
  const double b = static_cast<double>(bytes);
  if (!twoLevelScatterGather_) return AllreduceAlgorithm::Ring;
  return twoLevelScatterGatherCross(AllreduceAlgorithm::HalvingDoubling, b) <
                 twoLevelScatterGatherCross(AllreduceAlgorithm::Ring, b)
             ? AllreduceAlgorithm::HalvingDoubling
             : AllreduceAlgorithm::Ring;
}

double AllreduceCostModel::predictScatterGather(AllreduceAlgorithm algorithm,
                                                size_t bytes) const {
  const double b = static_cast<double>(bytes);
  const double never = std::numeric_limits<double>::infinity();
  if (topology_.size() < 2) return 0;
  switch (algorithm) {
    case AllreduceAlgorithm::Ring:
      return ringTime(b) / 2;
    case AllreduceAlgorithm::HalvingDoubling:
      return timeOf(halvingRankOrder_, b);
    case AllreduceAlgorithm::TwoLevel: {
      if (!twoLevelScatterGather_) return never;
      return slowestNodePhase(nodePhases_, b) + twoLevelScatterGatherCross(crossNodeScatterGather(bytes), b) +
             timeOf(teamHandOver_, b);
    }
    case AllreduceAlgorithm::Auto:
      return predictScatterGather(cheapestScatterGather(bytes), bytes);
    case AllreduceAlgorithm::Direct:
      return timeOf(direct_, b) / 2;
    case AllreduceAlgorithm::CrossMemory:  // allreduces only
    case AllreduceAlgorithm::HostChannel:
      return never;
  }
  return never;
}

AllreduceAlgorithm AllreduceCostModel::cheapestScatterGather(size_t bytes) const {
  const double ring = predictScatterGather(AllreduceAlgorithm::Ring, bytes);
  const double direct = predictScatterGather(AllreduceAlgorithm::Direct, bytes);
  AllreduceAlgorithm best = AllreduceAlgorithm::Ring;
  double bestTime = ring;
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::TwoLevel}) {
    const double t = predictScatterGather(a, bytes);
    if (t < bestTime) {
      best = a;
      bestTime = t;
    }
  }
  // Direct only where it ties with the ring: its one round of p-1 messages
  // is not priced against halving/doubling's or two_level's steps well
  // enough to pick it for latency, where it was never measured.
  return breakRingDirectTie(best, ring, direct, 2);
}

}  // namespace ringreduce
