// The real host allreduce on a simulated cluster, in virtual time (allreduce_simulation.h)
#include "simulator/allreduce_simulation.h"

#include <algorithm>
#include <chrono>

#include "algorithms/allreduce.h"
#include "algorithms/scatter_gather.h"
#include "transport/simulated/simulated_network.h"

namespace ringreduce {

SimulatedAllreduce simulateAllreduce(const ClusterSpec& cluster, AllreduceAlgorithm algorithm,
                                     size_t bytes, const Config& base) {
  return simulateCollective(cluster, SimulatedCollective::Allreduce, algorithm, bytes, base);
}

SimulatedAllreduce simulateCollective(const ClusterSpec& cluster, SimulatedCollective collective,
                                      AllreduceAlgorithm algorithm, size_t bytes,
                                      const Config& base) {
  Config config = base;
  config.payloadFree = true;
  config.spinMicroseconds = 0;  // a wait with nothing to do suspends at once
  config.intraNode = cluster.intraNode;
  config.interNode = cluster.interNode;
  config.allreduceAlgorithm = algorithm;
  SimulatedNetwork network(cluster.topology, cluster.intraNode, cluster.interNode, false,
                           cluster.cpu);
  // Shared by every rank: payload-free runs never write the workspace, and
  // the selector's cost model is the same for all (built by the first).
  Workspace workspace;
  AllreduceSelector selector(cluster.topology);
  const size_t count = bytes / elementSize(DataType::Float32);
  const int p = cluster.topology.size();
  SimulatedAllreduce result;
  const std::vector<double> finished = network.run(config, [&](Transport& transport, int rank) {
    const Comm comm{transport, config, workspace, &selector};
    switch (collective) {
      case SimulatedCollective::Allreduce: {
        const OpContext op("allreduce", 1, std::chrono::hours(24));
        if (rank == 0 && transport.size() > 1 && count > 0) {
          result.algorithm = selector.choose(comm, op, count * elementSize(DataType::Float32));
          result.predicted = selector.model(comm, op).predict(result.algorithm, bytes);
        }
        return hostAllreduce(comm, op, {nullptr, count, DataType::Float32, ReduceOp::Sum});
      }
      case SimulatedCollective::ReduceScatter:
      case SimulatedCollective::Allgather: {
        const bool gather = collective == SimulatedCollective::Allgather;
        const OpContext op(gather ? "allgather" : "reduce_scatter", 1, std::chrono::hours(24));
        if (rank == 0 && p > 1) {
          const AllreduceCostModel& model = selector.model(comm, op);
          result.algorithm = algorithm == AllreduceAlgorithm::Auto
                                 ? model.cheapestScatterGather(bytes)
                                 : algorithm;
          result.predicted = model.predictScatterGather(result.algorithm, bytes);
        }
        if (gather) return hostAllgather(comm, op, {nullptr, nullptr, bytes / p});
        return hostReduceScatter(comm, op, {nullptr, count, DataType::Float32, ReduceOp::Sum});
      }
    }
  });
  for (double t : finished) result.seconds = std::max(result.seconds, t);
  result.messages = network.messages();
  return result;
}

namespace {
LinkCost linkWithoutCpu(const LinkCost& link, const MessageCpu& cpu) {
  LinkCost rest = link;
  rest.alpha = std::max(link.alpha - cpu.heldFor - cpu.send - cpu.receive - cpu.wake, 0.0);
  // The sender copies while the bytes stream out (the simulation runs that
  // beside the transfer); the receiver's copy follows the last byte in.
  rest.beta = std::max(link.beta - cpu.receivePerByte, 0.0);
  rest.overhead = 0;
  return rest;
}
}  // namespace

ClusterSpec clusterOnCores(const Topology& topology, const LinkCost& intraNode,
                           const LinkCost& interNode, const MessageCpu& intraCpu,
                           const MessageCpu& interCpu, int cores, double spin,
                           double interHeldFor) {
  MessageCpu inter = interCpu;
  inter.heldFor = interHeldFor;
  ClusterSpec cluster{topology, linkWithoutCpu(intraNode, intraCpu),
                      linkWithoutCpu(interNode, inter)};
  // A held link's ping-pong woke each end twice a round trip: for the timer
  // that released its send, and for the answer. The simulation charges each.
  if (interHeldFor > 0) inter.wake /= 2;
  cluster.cpu = HostCpu{cores, intraCpu, inter, spin};
  return cluster;
}

double allreduceBusBandwidth(size_t bytes, double seconds, int ranks) {
  if (seconds <= 0 || ranks < 2) return 0;
  return static_cast<double>(bytes) / seconds * 2.0 * (ranks - 1) / ranks;
}

double scatterGatherBusBandwidth(size_t bytes, double seconds, int ranks) {
  return allreduceBusBandwidth(bytes, seconds, ranks) / 2;
}

const char* collectiveName(SimulatedCollective collective) {
  switch (collective) {
    case SimulatedCollective::ReduceScatter:
      return "reduce_scatter";
    case SimulatedCollective::Allgather:
      return "allgather";
    default:
      return "allreduce";
  }
}

std::optional<SimulatedCollective> collectiveNamed(const std::string& name) {
  for (SimulatedCollective c : {SimulatedCollective::Allreduce, SimulatedCollective::ReduceScatter,
                                SimulatedCollective::Allgather}) {
    if (name == collectiveName(c)) return c;
  }
  return std::nullopt;
}

}  // namespace ringreduce
