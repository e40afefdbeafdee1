// The cost model's price of the node phases of the two-level forms (core/
// allreduce_cost.h): the allreduce's and the reduce-scatter's/allgather's
// run the same halving/doubling or ring inside each node, on different
// layouts (core/plan/two_level_plan.h), so one price serves both.
#include <algorithm>
#include <vector>

#include "core/plan/allreduce_cost.h"
#include "core/plan/cost_steps.h"

namespace ringreduce {

AllreduceCostModel::NodePhase AllreduceCostModel::nodePhaseOf(const std::vector<int>& members,
                                                              bool halves,
                                                              const ChunkLayout& layout,
                                                              double unit) const {
  NodePhase phase;
  if (halves) {
    phase.halving = stepsOf(topology_, rankOrderHalvingFlows(members, unitsOf(layout, unit)));
    return phase;
  }
  // Each link of the ring carries every chunk but the one its sender keeps:
  // at most all but the smallest.
  size_t smallest = layout.total();
  for (int l = 0; l < layout.parts(); ++l) smallest = std::min(smallest, layout.chunk(l).count);
  phase.ringSteps = layout.parts() - 1;
  phase.ringUnits = (layout.total() - smallest) * unit;
  return phase;
}

double AllreduceCostModel::slowestNodePhase(const std::vector<NodePhase>& phases,
                                            double bytes) const {
  double slowest = 0;
  for (const NodePhase& phase : phases) {
    slowest = std::max(slowest, phase.halving.empty()
                                    ? phase.ringSteps * (intra_.alpha + intra_.overhead) +
                                          phase.ringUnits * bytes * intra_.beta
                                    : timeOf(phase.halving, bytes));
  }
  return slowest;
}

}  // namespace ringreduce
