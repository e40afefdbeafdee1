// Two-level reduce-scatter and allgather, for ranks that share nodes (two_level_scatter_gather.h)
#include "algorithms/two_level_scatter_gather.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/halving_doubling.h"
#include "core/plan/chunk_layout.h"
#include "core/base/errors.h"
#include "core/plan/partition.h"
#include "core/plan/two_level_plan.h"
#include "transport/subgroup_transport.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// The hand-overs inside a team share their pairs with the node's phase,
// whose ring or halving slots stay below kRingPhaseSlots.
constexpr uint32_t kTeamSlot = kRingPhaseSlots;

void checkFits(const Comm& comm, const OpContext& op, const Topology& topology) {
  if (topology.size() != comm.size() || !twoLevelFits(topology)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": two_level needs the nodes of all " + std::to_string(comm.size()) +
                          " ranks, more than one node and a node with more than one rank");
  }
}

// The caller's buffer in part order (or the buffer itself when that is
// rank order), with the plan's layouts for chunks of the given sizes.
class Grouped {
 public:
  Grouped(const Comm& comm, const TwoLevelPlan& plan, std::vector<size_t> sizes, char* data,
          size_t unit)
      : plan_(plan),
        sizes_(std::move(sizes)),
        layout_(plan.grouped(sizes_)),
        caller_(ChunkLayout::ofSizes(sizes_)),
        unit_(unit),
        payload_(!comm.config.payloadFree),
        inPlace_(plan.isRankOrder()),
        data_(data),
        buffer_(!payload_ || inPlace_ ? data
                                      : static_cast<char*>(comm.workspace.get(
                                            Workspace::kReorder, layout_.total() * unit))) {}

  size_t total() const { return layout_.total(); }
  // Where a range of the grouped buffer is (null in payload-free runs).
  char* at(const Range& r) const { return payload_ ? buffer_ + r.offset * unit_ : nullptr; }
  char* base() const { return at({0, 0}); }
  Range chunkOf(int rank) const { return layout_.chunk(plan_.positionOf(rank)); }
  Range part(int i) const {
    const int first = plan_.firstPositionOf(i);
    return layout_.span(first, plan_.firstPositionOf(i + 1) - first);
  }
  // Rank r's chunk in the caller's buffer (chunks in rank order).
  char* callerChunk(int rank) const {
    return payload_ ? data_ + caller_.chunk(rank).offset * unit_ : nullptr;
  }

  // Every chunk from the caller's buffer into the grouped one.
  void fill() const {
    for (int rank = 0; rank < caller_.parts(); ++rank) copy(rank, true);
  }
  // One rank's chunk (-1: all) back to the caller's buffer.
  void drain(int only) const {
    for (int rank = 0; rank < caller_.parts(); ++rank) {
      if (only < 0 || rank == only) copy(rank, false);
    }
  }

 private:
  void copy(int rank, bool in) const {
    if (!payload_ || inPlace_) return;
    char* grouped = at(chunkOf(rank));
    char* caller = callerChunk(rank);
    std::memcpy(in ? grouped : caller, in ? caller : grouped, sizes_[rank] * unit_);
  }

  const TwoLevelPlan& plan_;
  const std::vector<size_t> sizes_;
  const ChunkLayout layout_, caller_;
  const size_t unit_;
  const bool payload_, inPlace_;
  char* data_;
  char* buffer_;
};

void sendRange(const Comm& comm, const OpContext& op, int peer, const char* at, size_t bytes) {
  Request r = comm.transport.isend(peer, makeTag(comm.rank(), op.seq, kTeamSlot), at, bytes, op);
  comm.transport.wait(r, op);
}

void receiveRange(const Comm& comm, const OpContext& op, int peer, char* at, size_t bytes) {
  Request r = comm.transport.irecv(peer, makeTag(peer, op.seq, kTeamSlot), at, bytes, op);
  comm.transport.wait(r, op);
}

}  // namespace

bool twoLevelFits(const Topology& topology) { return TwoLevelPlan::applies(topology); }

void twoLevelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                           const Topology& topology, AllreduceAlgorithm crossNode) {
  if (args.count == 0) return;
  checkFits(comm, op, topology);
  const TwoLevelPlan plan(topology);
  const int p = comm.size();
  const int rank = comm.rank();
  const size_t esize = elementSize(args.type);
  std::vector<size_t> sizes;
  for (int r = 0; r < p; ++r) sizes.push_back(chunkOf(args.count, p, r).count);
  const Grouped grouped(comm, plan, sizes, static_cast<char*>(args.data), esize);
  grouped.fill();

  // Inside the node: each holder ends with the node's partial reduction of
  // its part, the others with nothing. AVG divides later, once, by p.
  const int node = plan.nodeOf(rank);
  SubgroupTransport inNode(comm.transport, plan.ranksOfNode(node), op);
  const Comm nodeComm{inNode, comm.config, comm.workspace};
  const ReductionArgs all{grouped.base(), grouped.total(), args.type, args.op};
  const ChunkLayout nodeChunks = plan.inNode(node, sizes);
  if (plan.nodeHalves(node)) {
    halvingReduceScatter(nodeComm, op, all, 0, nodeChunks);
  } else {
    ringReduceScatter(nodeComm, op, all, 0, nodeChunks);
  }

  if (!plan.holds(rank)) {
    // Our chunk, reduced, from the holder: straight to the caller's buffer.
    receiveRange(comm, op, plan.holderOf(rank), grouped.callerChunk(rank), sizes[rank] * esize);
    return;
  }
  // Across nodes, with the other holders of my part: each keeps its team's
  // chunks. Node-local and cross-node pairs are disjoint, so the two
  // phases' tags never meet.
  const int part = plan.partOf(rank);
  SubgroupTransport across(comm.transport, plan.crossing(part), op);
  const Comm acrossComm{across, comm.config, comm.workspace};
  const Range partRange = grouped.part(part);
  const ReductionArgs partArgs{grouped.at(partRange), partRange.count, args.type, args.op};
  const ChunkLayout teams = plan.acrossNodes(part, sizes);
  const int divisor = args.op == ReduceOp::Avg ? p : 0;
  if (crossNode == AllreduceAlgorithm::HalvingDoubling) {
    halvingReduceScatter(acrossComm, op, partArgs, divisor, teams);
  } else {
    ringReduceScatter(acrossComm, op, partArgs, divisor, teams);
  }
  for (int other : plan.teamOthers(rank)) {
    sendRange(comm, op, other, grouped.at(grouped.chunkOf(other)), sizes[other] * esize);
  }
  grouped.drain(rank);
}

void twoLevelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args,
                       const Topology& topology, AllreduceAlgorithm crossNode) {
  const size_t block = args.blockBytes;
  if (block == 0) return;
  checkFits(comm, op, topology);
  const TwoLevelPlan plan(topology);
  const int p = comm.size();
  const int rank = comm.rank();
  const std::vector<size_t> sizes(static_cast<size_t>(p), block);
  const Grouped grouped(comm, plan, sizes, static_cast<char*>(args.output), 1);
  char* mine = grouped.at(grouped.chunkOf(rank));
  if (!comm.config.payloadFree && args.input != mine) std::memmove(mine, args.input, block);

  if (!plan.holds(rank)) {
    sendRange(comm, op, plan.holderOf(rank), mine, block);
  } else {
    for (int other : plan.teamOthers(rank)) {
      receiveRange(comm, op, other, grouped.at(grouped.chunkOf(other)), block);
    }
    // Across nodes: my part, each node's team's blocks from its holder.
    const int part = plan.partOf(rank);
    SubgroupTransport across(comm.transport, plan.crossing(part), op);
    const Comm acrossComm{across, comm.config, comm.workspace};
    const Range partRange = grouped.part(part);
    const ChunkLayout teams = plan.acrossNodes(part, sizes);
    if (crossNode == AllreduceAlgorithm::HalvingDoubling) {
      // Bytes as elements.
      doublingAllgather(acrossComm, op,
                        {grouped.at(partRange), partRange.count, DataType::UInt8, ReduceOp::Sum},
                        teams);
    } else {
      ringAllgatherInPlace(acrossComm, op, grouped.at(partRange), teams);
    }
  }

  // Inside the node: every part from its holder to all the node's ranks.
  const int node = plan.nodeOf(rank);
  SubgroupTransport inNode(comm.transport, plan.ranksOfNode(node), op);
  const Comm nodeComm{inNode, comm.config, comm.workspace};
  const ChunkLayout nodeChunks = plan.inNode(node, sizes);
  if (plan.nodeHalves(node)) {
    doublingAllgather(nodeComm, op, {grouped.base(), grouped.total(), DataType::UInt8,
                                     ReduceOp::Sum},
                      nodeChunks);
  } else {
    ringAllgatherInPlace(nodeComm, op, grouped.base(), nodeChunks);
  }
  grouped.drain(-1);
}

}  // namespace ringreduce
