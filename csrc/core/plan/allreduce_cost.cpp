// Predicted time of each host allreduce algorithm on a set of nodes (allreduce_cost.h)
#include "core/plan/allreduce_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/plan/cost_steps.h"
#include "core/plan/halving_plan.h"
#include "core/plan/two_level_plan.h"

namespace ringreduce {

namespace {

using Step = AllreduceCostModel::Step;
using StepLoad = AllreduceCostModel::StepLoad;

// Halving/doubling over the ranks `members` (their world ranks) of `t`:
// fold, reduce-scatter, allgather, unfold, each step's unit a fraction of
// the buffer.
std::vector<Step> halvingSteps(const Topology& t, const std::vector<int>& members) {
  const HalvingPlan plan(static_cast<int>(members.size()));
  std::vector<Step> steps;
  if (plan.folds()) {
    Flows fold;
    for (int r = 0; r < plan.size(); ++r) {
      if (plan.virtualOf(r) < 0) fold.push_back({members[r], members[plan.foldPartner(r)], 1});
    }
    steps.push_back({loadOf(t, fold), 1.0, 2});  // fold and unfold
  }
  double fraction = 1.0;
  for (int i = 0; i < plan.steps(); ++i) {
    fraction /= 2;
    Flows pairs;
    for (int v = 0; v < plan.pow2(); ++v) {
      pairs.push_back(
          {members[plan.rankOf(v)], members[plan.rankOf(v ^ (1 << plan.bitOf(i)))], 1});
    }
    steps.push_back({loadOf(t, pairs), fraction, 2});  // reduce-scatter and allgather
  }
  return steps;
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

AllreduceCostModel::AllreduceCostModel(Topology topology, const LinkCost& intra,
                                       const LinkCost& inter, size_t segmentBytes)
    : topology_(std::move(topology)), intra_(intra), inter_(inter),
      segmentBytes_(static_cast<double>(std::max<size_t>(1, segmentBytes))) {
  const Topology& t = topology_;
  const int p = t.size();
  if (p < 2) return;
  Flows ring;
  for (int r = 0; r < p; ++r) {
    ring.push_back({r, (r + 1) % p, 1});
    (t.nodeOf[r] == t.nodeOf[(r + 1) % p] ? ringIntraHops_ : ringInterHops_) += 1;
  }
  ring_ = loadOf(t, ring);
  halving_ = halvingSteps(t, iota(p));
  planScatterGather();

  // Direct: every rank sends a 1/p block to each peer, twice.
  const auto byNode = t.ranksByNode();
  StepLoad direct;
  for (const auto& ranks : byNode) {
    const int k = static_cast<int>(ranks.size());
    direct.intraMessages = std::max(direct.intraMessages, k - 1);
    direct.interMessages = std::max(direct.interMessages, p - k);
    direct.nicUnits = std::max(direct.nicUnits, static_cast<double>(k) * (p - k));
  }
  direct.intraUnits = direct.intraMessages;
  direct_.push_back({direct, 1.0 / p, 2});

  twoLevel_ = TwoLevelPlan::applies(t);
  if (!twoLevel_) return;
  // Inside each node: as the algorithm runs it on P even parts. Across:
  // each of the node's P holders runs its own allreduce with the holders of
  // its part on the other nodes, all through the one NIC.
  const TwoLevelPlan plan(t);
  const int nodes = plan.nodes();
  activePerNode_ = plan.parts();
  const std::vector<size_t> oneEach(activePerNode_, 1);  // layouts counted in parts
  for (int node = 0; node < nodes; ++node) {
    allreduceNodePhases_.push_back(nodePhaseOf(plan.ranksOfNode(node), plan.nodeHalves(node),
                                               plan.nodeParts(node, oneEach), 1.0 / activePerNode_));
  }
  const double shard = 1.0 / activePerNode_;
  StepLoad cross;
  cross.interMessages = 1;
  cross.nicUnits = activePerNode_;
  StepLoad crossDirect;
  crossDirect.interMessages = nodes - 1;
  crossDirect.nicUnits = static_cast<double>(activePerNode_) * (nodes - 1);
  crossDirect_.push_back({crossDirect, shard / nodes, 2});
  const HalvingPlan across(nodes);
  if (across.folds()) crossHalving_.push_back({cross, shard, 2});
  double fraction = shard;
  for (int i = 0; i < across.steps(); ++i) {
    fraction /= 2;
    crossHalving_.push_back({cross, fraction, 2});
  }
}

double AllreduceCostModel::timeOf(const std::vector<Step>& steps, double bytes) const {
  double total = 0;
  for (const Step& s : steps) {
    const double unit = bytes * s.fraction;
    double t = 0;
    if (s.load.intraMessages > 0) {
      t = intra_.alpha + s.load.intraMessages * intra_.overhead +
          s.load.intraUnits * unit * intra_.beta;
    }
    if (s.load.interMessages > 0) {
      t = std::max(t, inter_.alpha + s.load.interMessages * inter_.overhead +
                          s.load.nicUnits * unit * inter_.beta);
    }
    total += t * s.repeat;
  }
  return total;
}

double AllreduceCostModel::segmentsOf(double chunk) const {
  return std::max(1.0, std::ceil(chunk / segmentBytes_));
}

double AllreduceCostModel::ringChain(double steps, double intraShare, double interShare,
                                     double chunk) const {
  const double segments = segmentsOf(chunk);
  const double segment = chunk / segments;
  const double hop = intraShare * (intra_.alpha + intra_.overhead + segment * intra_.beta) +
                     interShare * (inter_.alpha + inter_.overhead + segment * inter_.beta);
  const double slowest = std::max(intraShare > 0 ? intra_.beta : 0.0,
                                  interShare > 0 ? inter_.beta : 0.0);
  return steps * hop + (segments - 1) * segment * slowest;
}

double AllreduceCostModel::ringTime(double bytes) const {
  const int p = topology_.size();
  const double chunk = bytes / p;
  const double steps = 2.0 * (p - 1);
  const double chain = ringChain(steps, static_cast<double>(ringIntraHops_) / p,
                                 static_cast<double>(ringInterHops_) / p, chunk);
  // Each step, every rank sends one chunk: over its own link, or through
  // its node's NIC with the node's other ranks that cross. (One overhead per
  // step, not per segment: a segment is posted while the one before it is
  // on the wire.)
  double busiest = 0;
  if (ring_.intraMessages > 0) busiest = intra_.overhead + chunk * intra_.beta;
  if (ring_.interMessages > 0) {
    busiest = std::max({busiest, inter_.overhead, ring_.nicUnits * chunk * inter_.beta});
  }
  return std::max(chain, steps * busiest);
}

double AllreduceCostModel::twoLevelCross(AllreduceAlgorithm algorithm, double bytes) const {
  switch (algorithm) {
    case AllreduceAlgorithm::Ring: {
      // As ringTime: the chain of hops, or the NIC all the node's rings share.
      const int nodes = topology_.nodes();
      const double chunk = bytes / activePerNode_ / nodes;
      const double steps = 2.0 * (nodes - 1);
      return std::max(ringChain(steps, 0, 1, chunk),
                      steps * std::max(inter_.overhead + chunk * inter_.beta,
                                       activePerNode_ * chunk * inter_.beta));
    }
    case AllreduceAlgorithm::Direct:
      return timeOf(crossDirect_, bytes);
    default:
      return timeOf(crossHalving_, bytes);
  }
}

AllreduceAlgorithm AllreduceCostModel::crossNodeAlgorithm(size_t bytes) const {
  const double b = static_cast<double>(bytes);
  AllreduceAlgorithm best = AllreduceAlgorithm::Ring;
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::Direct}) {
    if (twoLevelCross(a, b) < twoLevelCross(best, b)) best = a;
  }
  return best;
}

double AllreduceCostModel::predict(AllreduceAlgorithm algorithm, size_t bytes) const {
  const double b = static_cast<double>(bytes);
  if (topology_.size() < 2) return 0;
  switch (algorithm) {
    case AllreduceAlgorithm::Auto:
      return predict(cheapest(bytes), bytes);
    case AllreduceAlgorithm::Ring:
      return ringTime(b);
    case AllreduceAlgorithm::HalvingDoubling:
      return timeOf(halving_, b);
    case AllreduceAlgorithm::Direct:
      return timeOf(direct_, b);
    case AllreduceAlgorithm::CrossMemory:
    case AllreduceAlgorithm::HostChannel:
      // Not priced: the selector takes it where the group allows it
      // (algorithms/allreduce.h), never in a model's comparison.
      return std::numeric_limits<double>::infinity();
    case AllreduceAlgorithm::TwoLevel:
      if (!twoLevel_) return std::numeric_limits<double>::infinity();
      return 2 * slowestNodePhase(allreduceNodePhases_, b) +
             twoLevelCross(crossNodeAlgorithm(bytes), b);
  }
  return std::numeric_limits<double>::infinity();
}

AllreduceAlgorithm AllreduceCostModel::cheapest(size_t bytes) const {
  // Runs for every allreduce: each algorithm is priced once.
  const double ring = predict(AllreduceAlgorithm::Ring, bytes);
  const double direct = predict(AllreduceAlgorithm::Direct, bytes);
  AllreduceAlgorithm best = AllreduceAlgorithm::Ring;
  double bestTime = ring;
  for (const auto& [a, t] : {std::pair{AllreduceAlgorithm::HalvingDoubling,
                                       predict(AllreduceAlgorithm::HalvingDoubling, bytes)},
                             std::pair{AllreduceAlgorithm::TwoLevel,
                                       predict(AllreduceAlgorithm::TwoLevel, bytes)},
                             std::pair{AllreduceAlgorithm::Direct, direct}}) {
    if (t < bestTime) {
      best = a;
      bestTime = t;
    }
  }
  return breakRingDirectTie(best, ring, direct, 3);
}

AllreduceAlgorithm AllreduceCostModel::breakRingDirectTie(AllreduceAlgorithm best, double ring,
                                                          double direct,
                                                          int directFromRanks) const {
  if (best != AllreduceAlgorithm::Ring && best != AllreduceAlgorithm::Direct) return best;
  // The ring and direct tied: by link class, as measured (the header).
  if (std::abs(ring - direct) > kBandwidthTie * std::min(ring, direct)) return best;
  const bool oneNode = topology_.nodes() == 1 && topology_.size() >= directFromRanks;
  return oneNode ? AllreduceAlgorithm::Direct : AllreduceAlgorithm::Ring;
}

}  // namespace ringreduce
