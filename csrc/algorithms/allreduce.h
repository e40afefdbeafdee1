// The host allreduce: chooses ring, halving/doubling, two-level, direct or
// cma for each call and runs it. The choice is RINGREDUCE_ALGORITHM when
// set; else cma from kCrossMemoryFromBytes where every rank can reach every
// other's memory (algorithms/cross_memory/peer_processes.h), else the cost model's
// cheapest (core/plan/allreduce_cost.h) for the size, the nodes and the link
// costs in the Config: a pure function of what every rank holds alike, so
// all ranks choose the same without talking.
#pragma once

#include <memory>
#include <optional>

#include "algorithms/comm.h"
#include "algorithms/cross_memory/peer_processes.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/allreduce_algorithm.h"
#include "core/plan/allreduce_cost.h"
#include "core/base/op_context.h"
#include "core/plan/topology.h"

namespace ringreduce {

// From this size up cma beats the ring where it can run (benchmarks/
// RESULTS.md): below it the ring's eager messages cost less than cma's two
// exchanges and four system calls per peer.
constexpr size_t kCrossMemoryFromBytes = size_t{32} << 10;

// A group's knowledge for choosing: which ranks share a node, and the cost
// model built on it. One per group, used by its executor thread only.
class AllreduceSelector {
 public:
  // Learns the nodes on first use: the ranks exchange host identities
  // (core/base/host_identity.h) inside the first allreduce, whatever algorithm
  // it runs, so every rank does it in the same operation. On one host they
  // also learn whether they can reach each other's memory.
  AllreduceSelector() = default;
  // Nodes given (tests, the simulator); never cma.
  explicit AllreduceSelector(Topology topology);

  const Topology& topology(const Comm& comm, const OpContext& op);
  // Learnt with the topology; not usable unless learnt.
  const PeerProcesses& peerProcesses(const Comm& comm, const OpContext& op);
  const AllreduceCostModel& model(const Comm& comm, const OpContext& op);
  // Never Auto.
  AllreduceAlgorithm choose(const Comm& comm, const OpContext& op, size_t bytes);

 private:
  std::optional<Topology> topology_;
  PeerProcesses peers_;
  std::unique_ptr<AllreduceCostModel> model_;
};

// In place, like ringAllreduce, with comm.selector choosing the algorithm
// (without one: the forced algorithm or the cost model's pick for one node).
void hostAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// Runs `algorithm` (not Auto); two_level takes the nodes from `selector`.
void runAllreduce(AllreduceAlgorithm algorithm, AllreduceSelector& selector, const Comm& comm,
                  const OpContext& op, const ReductionArgs& args);

}  // namespace ringreduce
