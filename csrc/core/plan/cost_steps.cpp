// The pieces the cost model builds its prices from (cost_steps.h)
#include "core/plan/cost_steps.h"

#include <algorithm>

#include "core/plan/halving_plan.h"

namespace ringreduce {

AllreduceCostModel::StepLoad loadOf(const Topology& t, const Flows& flows) {
  const int n = t.size();
  std::vector<int> intraMsgs(n), interMsgs(n);
  std::vector<double> intraUnits(n), nicOut(t.nodes()), nicIn(t.nodes());
  for (const Flow& f : flows) {
    if (t.nodeOf[f.from] == t.nodeOf[f.to]) {
      ++intraMsgs[f.from];
      intraUnits[f.from] += f.units;
    } else {
      ++interMsgs[f.from];
      nicOut[t.nodeOf[f.from]] += f.units;
      nicIn[t.nodeOf[f.to]] += f.units;
    }
  }
  AllreduceCostModel::StepLoad load;
  load.intraMessages = *std::max_element(intraMsgs.begin(), intraMsgs.end());
  load.interMessages = *std::max_element(interMsgs.begin(), interMsgs.end());
  load.intraUnits = *std::max_element(intraUnits.begin(), intraUnits.end());
  for (size_t j = 0; j < nicOut.size(); ++j) {
    load.nicUnits = std::max({load.nicUnits, nicOut[j], nicIn[j]});
  }
  return load;
}

std::vector<Flows> rankOrderHalvingFlows(const std::vector<int>& members,
                                         const std::vector<double>& units) {
  const HalvingPlan plan(static_cast<int>(members.size()), HalvingPlan::Order::FarFirst);
  // Units of virtual blocks [first, first + n): the chunks of the ranks
  // behind them (prefix sums, so that large groups price in O(p log p)).
  std::vector<double> before(units.size() + 1, 0);
  for (size_t r = 0; r < units.size(); ++r) before[r + 1] = before[r] + units[r];
  const double whole = before.back();
  auto blocks = [&](int first, int n) {
    return before[plan.lowestRankOf(first + n)] - before[plan.lowestRankOf(first)];
  };
  std::vector<Flows> steps;
  Flows fold, unfold;
  for (int r = 0; r < plan.size(); ++r) {
    if (plan.virtualOf(r) >= 0) continue;
    fold.push_back({members[r], members[plan.foldPartner(r)], whole});
    unfold.push_back({members[plan.foldPartner(r)], members[r], units[r]});
  }
  if (!fold.empty()) steps.push_back(fold);
  // As the algorithm: step i halves each virtual rank's run of blocks.
  for (int i = 0, count = plan.pow2(); i < plan.steps(); ++i, count /= 2) {
    Flows step;
    for (int v = 0; v < plan.pow2(); ++v) {
      const int first = v / count * count;  // v's run before the step
      const int half = count / 2;
      const bool upper = ((v >> plan.bitOf(i)) & 1) != 0;
      const int give = upper ? first : first + half;
      step.push_back({members[plan.rankOf(v)],
                      members[plan.rankOf(v ^ (1 << plan.bitOf(i)))], blocks(give, half)});
    }
    steps.push_back(step);
  }
  if (!unfold.empty()) steps.push_back(unfold);
  return steps;
}

std::vector<double> unitsOf(const ChunkLayout& layout, double unit) {
  std::vector<double> units;
  for (int i = 0; i < layout.parts(); ++i) units.push_back(layout.chunk(i).count * unit);
  return units;
}

std::vector<AllreduceCostModel::Step> stepsOf(const Topology& t, const std::vector<Flows>& steps) {
  std::vector<AllreduceCostModel::Step> out;
  for (const Flows& f : steps) out.push_back({loadOf(t, f), 1.0, 1});
  return out;
}

}  // namespace ringreduce
