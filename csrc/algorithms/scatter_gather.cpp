// Reduce-scatter and allgather, chosen like the allreduce (scatter_gather.h)
#include "algorithms/scatter_gather.h"

#include <cstring>
#include <optional>

#include "algorithms/allreduce.h"
#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/reduce_scatter.h"
#include "algorithms/two_level_scatter_gather.h"
#include "core/plan/chunk_layout.h"
#include "core/base/errors.h"
#include "core/observe/log.h"

namespace ringreduce {

namespace {

// What runs, and for two_level how its parts cross the nodes.
struct Choice {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Ring;  // any but Auto
  AllreduceAlgorithm crossNode = AllreduceAlgorithm::Ring;
  const Topology* topology = nullptr;  // two_level only
};

// For a reduce-scatter or allgather of `bytes` (the whole buffer): the same
// on every rank, since it depends only on the topology, the link costs in
// the Config (or measured alike) and the size.
Choice choose(const Comm& comm, const OpContext& op, size_t bytes,
              std::optional<AllreduceSelector>& oneNode) {
  const AllreduceAlgorithm forced = comm.config.allreduceAlgorithm;
  AllreduceSelector* selector = comm.selector;
  if (forced == AllreduceAlgorithm::TwoLevel) {
    if (selector == nullptr) selector = &oneNode.emplace(Topology::singleNode(comm.size()));
    const Topology& topology = selector->topology(comm, op);
    if (twoLevelFits(topology)) {
      return {AllreduceAlgorithm::TwoLevel,
              selector->model(comm, op).crossNodeScatterGather(bytes), &topology};
    }
    // One node or one rank per node: as the two-level allreduce,
    // halving/doubling over all ranks.
    return {AllreduceAlgorithm::HalvingDoubling};
  }
  if (forced != AllreduceAlgorithm::Auto) return {forced};  // ring, halving_doubling, direct
  if (selector == nullptr) selector = &oneNode.emplace(Topology::singleNode(comm.size()));
  const AllreduceCostModel& model = selector->model(comm, op);
  const AllreduceAlgorithm best = model.cheapestScatterGather(bytes);
  if (best != AllreduceAlgorithm::TwoLevel) return {best};
  return {best, model.crossNodeScatterGather(bytes), &model.topology()};
}

// RINGREDUCE_DEBUG=TRACE: which form ran, so a run can show it.
void trace(const Comm& comm, const OpContext& op, size_t bytes, const Choice& choice) {
  RR_LOG(Trace, comm.rank(),
         op.describe() << " of " << bytes << " B: " << nameOf(choice.algorithm)
                       << (choice.algorithm == AllreduceAlgorithm::TwoLevel
                               ? std::string(" (across nodes: ") + nameOf(choice.crossNode) + ")"
                               : std::string()));
}

void throwIfUnsupported(const OpContext& op, const ReductionArgs& args) {
  if (!reductionSupported(args.type, args.op)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": " +
                          unsupportedReason(args.type, args.op));
  }
}

}  // namespace

void hostReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  throwIfUnsupported(op, args);
  if (comm.size() == 1 || args.count == 0) return;
  std::optional<AllreduceSelector> oneNode;
  const size_t bytes = args.count * elementSize(args.type);
  noteCallerBuffer(comm, args.data, bytes);
  const Choice choice = choose(comm, op, bytes, oneNode);
  trace(comm, op, bytes, choice);
  switch (choice.algorithm) {
    case AllreduceAlgorithm::TwoLevel:
      return twoLevelReduceScatter(comm, op, args, *choice.topology, choice.crossNode);
    case AllreduceAlgorithm::HalvingDoubling:
      return halvingReduceScatter(comm, op, args, args.op == ReduceOp::Avg ? comm.size() : 0,
                                  ChunkLayout::even(args.count, comm.size()));
    case AllreduceAlgorithm::Direct:
      return directReduceScatter(comm, op, args);
    default:
      return ringReduceScatter(comm, op, args);
  }
}

bool scatterGatherIsDirect(const Comm& comm, const OpContext& op, size_t bytes) {
  std::optional<AllreduceSelector> oneNode;
  const Choice choice = choose(comm, op, bytes, oneNode);
  // Traced when direct runs next; otherwise the caller goes on to
  // hostReduceScatter, which traces its own (the same) choice.
  const bool direct = choice.algorithm == AllreduceAlgorithm::Direct;
  if (direct) trace(comm, op, bytes, choice);
  return direct;
}

bool hostReduceScatterInto(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                           void* output) {
  throwIfUnsupported(op, input);
  const size_t bytes = input.count * elementSize(input.type);
  // One rank: a copy, no choice to make. Elsewhere the same on every rank:
  // all take this path, or all take the caller's.
  if (input.count > 0 && comm.size() > 1) {
    // First: a caller's thread runs it too (Engine::runOnCaller).
    if (hostChannelReduceScatterApplies(comm, bytes)) {
      hostChannelReduceScatter(comm, op, input, output);
      return true;
    }
    if (!scatterGatherIsDirect(comm, op, bytes)) return false;
    noteCallerBuffer(comm, input.data, bytes);  // peers copy out of it
  }
  directReduceScatter(comm, op, input, output);
  return true;
}

bool hostReduceScatterBlocksInto(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                                 const std::vector<const void*>& blocks, void* output) {
  throwIfUnsupported(op, input);
  const int n = comm.size();
  if (blocks.size() != static_cast<size_t>(n)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": " +
                          std::to_string(blocks.size()) + " input blocks for " +
                          std::to_string(n) + " ranks");
  }
  const size_t bytes = input.count * elementSize(input.type);
  if (input.count > 0 && n > 1) {
    if (hostChannelReduceScatterApplies(comm, bytes)) {
      hostChannelReduceScatterBlocks(comm, op, input, blocks, output);
      return true;
    }
    if (!scatterGatherIsDirect(comm, op, bytes)) return false;
    for (int j = 0; j < n; ++j) {  // peers copy out of them
      noteCallerBuffer(comm, blocks[j], chunkOf(input.count, n, j).count * elementSize(input.type));
    }
  }
  directReduceScatterBlocks(comm, op, input, blocks, output);
  return true;
}

void hostAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  const int n = comm.size();
  if (n == 1 || args.blockBytes == 0) return ringAllgather(comm, op, args);
  // First: a caller's thread runs it too (Engine::runOnCaller).
  if (hostChannelAllgatherApplies(comm, args.blockBytes)) {
    return hostChannelAllgather(comm, op, args);
  }
  std::optional<AllreduceSelector> oneNode;
  const size_t bytes = args.blockBytes * static_cast<size_t>(n);
  // Peers copy the gathered blocks out of the output (the ring forwards them).
  noteCallerBuffer(comm, args.output, bytes);
  const Choice choice = choose(comm, op, bytes, oneNode);
  trace(comm, op, bytes, choice);
  if (choice.algorithm == AllreduceAlgorithm::TwoLevel) {
    return twoLevelAllgather(comm, op, args, *choice.topology, choice.crossNode);
  }
  if (choice.algorithm == AllreduceAlgorithm::Direct) return directAllgather(comm, op, args);
  if (choice.algorithm != AllreduceAlgorithm::HalvingDoubling) {
    return ringAllgather(comm, op, args);
  }
  char* mine = static_cast<char*>(args.output) + static_cast<size_t>(comm.rank()) * args.blockBytes;
  if (args.input != mine && !comm.config.payloadFree) {
    std::memmove(mine, args.input, args.blockBytes);
  }
  // Bytes as elements: p chunks of blockBytes, rank r's at r * blockBytes.
  const size_t total = args.blockBytes * static_cast<size_t>(n);
  doublingAllgather(comm, op, {args.output, total, DataType::UInt8, ReduceOp::Sum},
                    ChunkLayout::even(total, n));
}

}  // namespace ringreduce
