// Runs the real host allreduce code for every rank of a simulated cluster
// (transport/simulated/) and reports the virtual time it took: what
// `python -m torch_ringreduce.simulate` prints, and how the cost model's
// formulas are checked against the schedules they describe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/plan/allreduce_algorithm.h"
#include "core/config/config.h"
#include "core/plan/host_cpu.h"
#include "core/plan/link_cost.h"
#include "core/plan/topology.h"

namespace ringreduce {

struct ClusterSpec {
  ClusterSpec() = default;
  // (a constructor, not an aggregate: the CPU model is optional to name)
  ClusterSpec(Topology topology, const LinkCost& intraNode, const LinkCost& interNode,
              const HostCpu& cpu = HostCpu())
      : topology(std::move(topology)), intraNode(intraNode), interNode(interNode), cpu(cpu) {}

  Topology topology;
  LinkCost intraNode = defaultIntraNode();
  LinkCost interNode = defaultInterNode();
  HostCpu cpu;  // default: no CPU per message beyond the links' overhead, a core per rank
};

struct SimulatedAllreduce {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Ring;  // what ran (Auto resolved)
  double seconds = 0;                                       // until the last rank finished
  double predicted = 0;                                     // the cost model's figure for it
  uint64_t messages = 0;
};

// A float32 SUM allreduce of `bytes` (rounded down to whole elements),
// payload-free: sizes only. `base` supplies segment sizes and the like; its
// link costs are replaced by the cluster's so that Auto picks for this
// cluster. Throws Error when the schedule deadlocks or loses a message.
SimulatedAllreduce simulateAllreduce(const ClusterSpec& cluster, AllreduceAlgorithm algorithm,
                                     size_t bytes, const Config& base = Config());

// Reduce-scatter (a float32 SUM of `bytes`, each rank keeping its chunk) or
// allgather (`bytes` in all, bytes / p from each rank) the same way:
// algorithms/scatter_gather.h picks the form (Auto: the cost model's
// cheapest; Direct: the ring), and `predicted` is predictScatterGather's.
enum class SimulatedCollective { Allreduce, ReduceScatter, Allgather };
// "allreduce", "reduce_scatter", "allgather": the command lines' names.
const char* collectiveName(SimulatedCollective collective);
std::optional<SimulatedCollective> collectiveNamed(const std::string& name);
SimulatedAllreduce simulateCollective(const ClusterSpec& cluster, SimulatedCollective collective,
                                      AllreduceAlgorithm algorithm, size_t bytes,
                                      const Config& base = Config());

// The cluster measured by algorithms/tuning/link_probe.h (links and both ends' CPU per
// message), for a simulation whose ranks share `cores` cores (0: a core
// each), spin `spin` seconds before they sleep, and whose messages across
// nodes are held `interHeldFor` at their sender (DelayedTransport's
// latency). The probe's ping-pong time is the hold, the sender's CPU, the
// link, and the receiver's waking and CPU in series; the simulation charges
// the CPU parts to cores, so the links keep what is left: alpha - held -
// send - receive - wake, and beta minus the receiver's per-byte CPU (never
// below 0; the sender's copying runs while the bytes stream out).
// A lone ping-pong then takes in the simulation what it took when
// measured. The burst's overhead figure is replaced by the send CPU it was
// made of.
ClusterSpec clusterOnCores(const Topology& topology, const LinkCost& intraNode,
                           const LinkCost& interNode, const MessageCpu& intraCpu,
                           const MessageCpu& interCpu, int cores, double spin,
                           double interHeldFor = 0);

// nccl-tests' bus bandwidth of an allreduce: bytes/seconds x 2(p-1)/p.
double allreduceBusBandwidth(size_t bytes, double seconds, int ranks);
// And of a reduce-scatter or allgather of `bytes` in all: bytes/seconds x (p-1)/p.
double scatterGatherBusBandwidth(size_t bytes, double seconds, int ranks);

}  // namespace ringreduce
