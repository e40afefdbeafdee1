// The pieces the cost model (core/plan/allreduce_cost.h) builds its prices from:
// the messages of one lockstep step, and the busiest resources they load.
#pragma once

#include <vector>

#include "core/plan/allreduce_cost.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/topology.h"

namespace ringreduce {

// One message of a step: `units` is its size as a fraction of the
// collective's buffer.
struct Flow {
  int from = 0;
  int to = 0;
  double units = 1;
};
using Flows = std::vector<Flow>;

// The busiest resources of a step: a rank's sends within its node, a
// node's NIC either way (all of the node's ranks share it).
AllreduceCostModel::StepLoad loadOf(const Topology& topology, const Flows& flows);

// The steps of the rank-order halving reduce-scatter (algorithms/
// halving_doubling.h) over `members` (world ranks), member i's chunk being
// units[i] of the buffer: the fold (the folded ranks' whole buffers), the
// halving steps, the unfold (their chunks). The allgather's steps carry the
// same messages backwards (the fold a chunk, the unfold the whole buffer),
// so one price serves both.
std::vector<Flows> rankOrderHalvingFlows(const std::vector<int>& members,
                                         const std::vector<double>& units);

// Chunk sizes of a layout as fractions of the buffer, `unit` per unit of
// the layout.
std::vector<double> unitsOf(const ChunkLayout& layout, double unit);

// Steps of the given flows, each its own lockstep step.
std::vector<AllreduceCostModel::Step> stepsOf(const Topology& topology,
                                              const std::vector<Flows>& steps);

}  // namespace ringreduce
