// The host allreduce: which algorithm runs it (channel, selector, tuner) and the call into it
#include "algorithms/allreduce.h"

#include "algorithms/wire_dtype.h"

#include <cstdint>
#include <vector>

#include "algorithms/tuning/autotune.h"
#include "algorithms/cross_memory/allreduce.h"
#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/tuning/link_probe.h"
#include "algorithms/record_allgather.h"
#include "algorithms/host_channel/allreduce.h"
#include "algorithms/two_level_allreduce.h"
#include "core/base/errors.h"
#include "core/base/host_identity.h"
#include "core/observe/log.h"
#include "core/plan/two_level_plan.h"
#include "transport/tag.h"

namespace ringreduce {

AllreduceSelector::AllreduceSelector(Topology topology) : topology_(std::move(topology)) {
  peers_.why = "the selector was given its nodes (a test or the simulator)";
}

const Topology& AllreduceSelector::topology(const Comm& comm, const OpContext& op) {
  if (!topology_) {
    // The last slots of this operation: the algorithms count theirs from 0.
    const ProcessRecord mine = thisProcess();
    std::vector<ProcessRecord> all(static_cast<size_t>(comm.size()));
    exchangeRecords(comm, op, kMaxSlot, &mine, all.data(), sizeof(mine));
    std::vector<uint64_t> hosts;
    for (const ProcessRecord& record : all) hosts.push_back(record.hostHash);
    topology_ = Topology::fromHostHashes(hosts);
    RR_LOG(Info, comm.rank(),
           "host identities: " << topology_->nodes() << " node(s), at most "
                               << topology_->maxRanksPerNode() << " rank(s) per node");
    if (topology_->nodes() == 1 && comm.size() > 1 && !comm.config.payloadFree) {
      peers_ = agreePeerProcesses(comm, op, all, kMaxSlot - 1);
      RR_LOG(Info, comm.rank(),
             "cross-memory attach: " << (peers_.usable ? "every rank in reach" : peers_.why));
    } else {
      peers_.why = topology_->nodes() > 1 ? "the group spans " + std::to_string(topology_->nodes()) +
                                                " hosts"
                                          : "not available in a simulated run";
    }
  }
  if (topology_->size() != comm.size()) {
    throw InvalidArgument("ringreduce: the topology has " + std::to_string(topology_->size()) +
                          " ranks, the group " + std::to_string(comm.size()));
  }
  return *topology_;
}

const PeerProcesses& AllreduceSelector::peerProcesses(const Comm& comm, const OpContext& op) {
  topology(comm, op);
  return peers_;
}

const AllreduceCostModel& AllreduceSelector::model(const Comm& comm, const OpContext& op) {
  if (!model_) {
    LinkCost intra = comm.config.intraNode, inter = comm.config.interNode;
    if (comm.config.measureLinks && comm.size() > 1) {
      probeLinks(comm, op, topology(comm, op), &intra, &inter);
    }
    model_ = std::make_unique<AllreduceCostModel>(topology(comm, op), intra, inter,
                                                  comm.config.segmentBytes);
  }
  return *model_;
}

AllreduceAlgorithm AllreduceSelector::choose(const Comm& comm, const OpContext& op, size_t bytes) {
  const AllreduceCostModel& costs = model(comm, op);
  const AllreduceAlgorithm forced = comm.config.allreduceAlgorithm;
  // shm forced for a message the channel does not take: as auto.
  if (forced != AllreduceAlgorithm::Auto && forced != AllreduceAlgorithm::HostChannel) {
    return forced;
  }
  if (bytes >= kCrossMemoryFromBytes && peerProcesses(comm, op).usable) {
    return AllreduceAlgorithm::CrossMemory;
  }
  return costs.cheapest(bytes);
}

void runAllreduce(AllreduceAlgorithm algorithm, AllreduceSelector& selector, const Comm& comm,
                  const OpContext& op, const ReductionArgs& args) {
  const size_t bytes = args.count * elementSize(args.type);
  // RINGREDUCE_DEBUG=TRACE: which form ran, so a run can show it.
  const auto trace = [&](const char* ran, const char* across) {
    RR_LOG(Trace, comm.rank(),
           op.describe() << " of " << bytes << " B: " << ran
                         << (across ? std::string(" (across nodes: ") + across + ")" : ""));
  };
  switch (algorithm) {
    case AllreduceAlgorithm::HalvingDoubling:
      trace(nameOf(algorithm), nullptr);
      return halvingDoublingAllreduce(comm, op, args);
    case AllreduceAlgorithm::Direct:
      trace(nameOf(algorithm), nullptr);
      return directAllreduce(comm, op, args);
    case AllreduceAlgorithm::CrossMemory:
      trace(nameOf(algorithm), nullptr);
      return crossMemoryAllreduce(comm, op, args, selector.peerProcesses(comm, op));
    case AllreduceAlgorithm::HostChannel:
      // Never chosen here: hostAllreduce takes the channel first, and
      // choose() answers for what it does not take.
      break;
    case AllreduceAlgorithm::TwoLevel: {
      const Topology& topology = selector.topology(comm, op);
      const AllreduceAlgorithm across = selector.model(comm, op).crossNodeAlgorithm(bytes);
      if (TwoLevelPlan::applies(topology)) {
        trace(nameOf(algorithm), nameOf(across));
      } else {
        trace("halving_doubling (two_level needs more than one node, one with 2+ ranks)", nullptr);
      }
      return twoLevelAllreduce(comm, op, {args, &topology, across});
    }
    case AllreduceAlgorithm::Auto:
    case AllreduceAlgorithm::Ring:
      break;
  }
  trace(nameOf(AllreduceAlgorithm::Ring), nullptr);
  ringAllreduce(comm, op, args);
}

void hostAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  if (!reductionSupported(args.type, args.op)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": " +
                          unsupportedReason(args.type, args.op));
  }
  if (comm.size() == 1 || args.count == 0) return;  // AVG over one rank is the identity
  // First, and apart from the selector and the tuner (whose state is the
  // executor's): a caller's thread runs it too (Engine::runOnCaller).
  if (hostChannelAllreduceApplies(comm, args.count * elementSize(args.type))) {
    RR_LOG(Trace, comm.rank(),
           op.describe() << " of " << args.count * elementSize(args.type) << " B: "
                         << nameOf(AllreduceAlgorithm::HostChannel));
    return hostChannelAllreduce(comm, op, args);
  }
  noteCallerBuffer(comm, args.data, args.count * elementSize(args.type));
  std::optional<AllreduceSelector> oneNode;
  AllreduceSelector* selector = comm.selector;
  if (selector == nullptr) selector = &oneNode.emplace(Topology::singleNode(comm.size()));
  const auto run = [&](const Comm& settings) {
    // RINGREDUCE_WIRE_DTYPE: the algorithm is chosen, and runs, on the 16-bit copy.
    withWireDtype(settings, args, [&](const ReductionArgs& wire) {
      const AllreduceAlgorithm algorithm =
          selector->choose(settings, op, wire.count * elementSize(wire.type));
      runAllreduce(algorithm, *selector, settings, op, wire);
    });
  };
  if (comm.tuner == nullptr) return run(comm);
  comm.tuner->allreduce(comm, op, args.count * elementSize(args.type), run);
}

}  // namespace ringreduce
