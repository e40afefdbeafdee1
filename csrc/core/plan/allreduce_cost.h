// Predicted time of each host allreduce algorithm on a given set of nodes,
// from per-message latency, per-byte time and per-message overhead of the
// two link classes (same node, other node). The selection
// (cheapest) is a pure function of the topology, the link costs and the
// size, so every rank makes the same choice without talking.
//
// Halving/doubling, direct and two-level are sequences of steps, each costing
// the latency plus the time of its busiest resource: a rank's sends within
// its node, or a node's NIC, which all of a node's ranks share. The ring is
// not in lockstep (a rank forwards as soon as its left neighbour's chunk is
// in), so it costs the longer of its chain of 2(p-1) hops around the ring
// and the busiest resource's total work. The simulator
// (transport/simulated/) runs the real schedules on the same model, message
// by message, and so checks these formulas. The ring streams each chunk in
// segments (kDefaultSegmentBytes, RINGREDUCE_SEGMENT_BYTES), so a segment,
// not the whole chunk, waits at each hop (priced whole, the ring came out up
// to 13% above its schedule where a hop's latency and a chunk's transfer are
// alike).
#pragma once

#include <cstddef>
#include <vector>

#include "core/plan/allreduce_algorithm.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/link_cost.h"
#include "core/plan/topology.h"

namespace ringreduce {

// Predictions closer than this fraction are a tie (cheapest()).
constexpr double kBandwidthTie = 0.02;

class AllreduceCostModel {
 public:
  // `segmentBytes`: the ring's segment (Config::segmentBytes).
  AllreduceCostModel(Topology topology, const LinkCost& intra, const LinkCost& inter,
                     size_t segmentBytes = kDefaultSegmentBytes);

  // Seconds for an allreduce of `bytes`; infinity where the algorithm does not
  // apply (two_level on a single node or one rank per node). Auto: the
  // cheapest's. two_level, on any nodes (core/plan/two_level_plan.h): the slowest
  // node's phase, twice (reduce-scatter onto the holders, allgather back),
  // and the allreduce of the parts across the nodes.
  double predict(AllreduceAlgorithm algorithm, size_t bytes) const;
  // The cheapest of ring, halving_doubling, two_level and direct; ties go
  // to the one listed first. Bandwidth-bound, the ring and direct move the
  // same bytes and are priced within kBandwidthTie of each other (direct: the
  // ring's time and two latencies); there what the link terms leave out
  // decides, by measurement (benchmarks/RESULTS.md, "The ring priced by
  // segment"): direct on one node of more than two ranks (fewer hand-offs
  // between the processes: 0.67-0.87x the ring's time at 16-64 MiB with 4
  // ranks on 2 cores), else the ring. Across nodes direct's p-1 flows at
  // once through each NIC took 1.2-2.1x the ring's time over TCP (4 and 8
  // emulated 1 Gbit/s nodes, 4-64 MiB); on two ranks direct is the ring's one
  // exchange without its segments, so without the reduction in cache.
  AllreduceAlgorithm cheapest(size_t bytes) const;
  // Inside two_level: how the shards cross the nodes (ring, halving_doubling
  // or direct).
  AllreduceAlgorithm crossNodeAlgorithm(size_t bytes) const;

  // Reduce-scatter and allgather of a buffer of `bytes` (all p chunks or
  // blocks; algorithms/scatter_gather.h), one price for both: each
  // allgather is its reduce-scatter's messages backwards
  // (core/plan/scatter_gather_cost.cpp). The ring is half of its allreduce;
  // halving/doubling is the rank-order form, far partners first, with the
  // fold's whole buffer and chunk when p is not a power of two; two_level
  // (core/plan/two_level_plan.h) is the slowest node's phase (halving/doubling
  // or the ring, as the algorithm picks), the crossing of the parts (ring,
  // or halving/doubling, all the node's holders through its one NIC), and
  // the hand-overs inside the teams of larger nodes; direct is one of its
  // allreduce's two rounds. Infinity where a form does not apply.
  double predictScatterGather(AllreduceAlgorithm algorithm, size_t bytes) const;
  // The cheapest of ring, halving_doubling and two_level; ties go to the
  // first. Where the ring wins and direct ties with it: direct on one node
  // of two ranks or more, where reduce_scatter_tensor by direct reads its
  // input in place (64 MiB on 2 cores: 15 ms against the ring's 37-46 at
  // world 4, 7.5-8.0 against 19 at world 2; benchmarks/RESULTS.md, "Direct
  // reduce-scatter and allgather").
  AllreduceAlgorithm cheapestScatterGather(size_t bytes) const;
  // Inside two_level: Ring or HalvingDoubling.
  AllreduceAlgorithm crossNodeScatterGather(size_t bytes) const;

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
  // `best` of all, unless the ring and direct tie (kBandwidthTie): then by
  // link class, as cheapest() says: direct on one node of at least
  // `directFromRanks` ranks.
  AllreduceAlgorithm breakRingDirectTie(AllreduceAlgorithm best, double ring, double direct,
                                        int directFromRanks) const;
  double timeOf(const std::vector<Step>& steps, double bytes) const;
  double twoLevelCross(AllreduceAlgorithm algorithm, double bytes) const;
  double ringTime(double bytes) const;
  // A ring's chain: its first segment through `steps` hops (per hop, the
  // mean over the ring's links of each class: `intraShare` and `interShare`
  // of them, summing to 1), then the chunk's other segments one after the
  // other through the slowest link.
  double ringChain(double steps, double intraShare, double interShare, double chunk) const;
  // Segments of a ring chunk of `chunk` bytes.
  double segmentsOf(double chunk) const;

  // Reduce-scatter and allgather (core/plan/scatter_gather_cost.cpp).
  void planScatterGather();
  double twoLevelScatterGatherCross(AllreduceAlgorithm algorithm, double bytes) const;
  // A node's phase of the two-level forms (one way: a reduce-scatter or an
  // allgather): halving/doubling steps, or a ring of `ringSteps` steps
  // whose links carry at most `ringUnits` (core/plan/two_level_node_cost.cpp).
  struct NodePhase {
    std::vector<Step> halving;
    int ringSteps = 0;
    double ringUnits = 0;
  };
  // The phase of a node whose ranks are `members` (world ranks), local rank
  // l owning `layout`'s chunk l, `unit` of the buffer per unit of the
  // layout: halving/doubling when `halves`, else the ring.
  NodePhase nodePhaseOf(const std::vector<int>& members, bool halves, const ChunkLayout& layout,
                        double unit) const;
  // The slowest node's phase: the crossing waits for it.
  double slowestNodePhase(const std::vector<NodePhase>& phases, double bytes) const;

  Topology topology_;
  LinkCost intra_, inter_;
  double segmentBytes_;
  bool twoLevel_ = false;
  int activePerNode_ = 1;                      // two_level: ranks per node that hold a part
  StepLoad ring_;                              // one step of the ring
  int ringIntraHops_ = 0, ringInterHops_ = 0;  // links around the ring, by class
  std::vector<Step> halving_, direct_, crossHalving_, crossDirect_;
  std::vector<NodePhase> allreduceNodePhases_;  // two_level: each node's, one way
  // Reduce-scatter and allgather: rank-order halving/doubling; two-level
  // (when it applies): each node's phase, the crossing by halving/doubling
  // or by ring (steps, the most one holder sends, the most through one
  // NIC), the hand-overs.
  std::vector<Step> halvingRankOrder_;
  bool twoLevelScatterGather_ = false;
  std::vector<NodePhase> nodePhases_;
  std::vector<Step> acrossHalving_, teamHandOver_;
  int acrossRingSteps_ = 0;
  double acrossRingLink_ = 0, acrossRingNic_ = 0;
};

}  // namespace ringreduce
