#include "algorithms/two_level_scatter_gather.h"

#include <cstring>
#include <string>
#include <vector>

#include "algorithms/halving_doubling.h"
#include "core/errors.h"
#include "core/partition.h"
#include "transport/subgroup_transport.h"

namespace ringreduce {

namespace {

bool powerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Node order: local rank i of node j sits at position i * N + j, so the N
// ranks that share a local index (one part) are adjacent.
class NodeOrder {
 public:
  NodeOrder(const Topology& topology, int rank)
      : byNode_(topology.ranksByNode()),
        nodes_(static_cast<int>(byNode_.size())),
        perNode_(static_cast<int>(byNode_[0].size())),
        node_(topology.nodeOf[rank]) {
    while (byNode_[node_][local_] != rank) ++local_;
  }

  int nodes() const { return nodes_; }
  int perNode() const { return perNode_; }
  int node() const { return node_; }
  int local() const { return local_; }
  int myPosition() const { return local_ * nodes_ + node_; }
  int rankAt(int position) const { return byNode_[position % nodes_][position / nodes_]; }
  // Node order is rank order (ranks dealt round robin over the nodes).
  bool isRankOrder() const {
    for (int position = 0; position < nodes_ * perNode_; ++position) {
      if (rankAt(position) != position) return false;
    }
    return true;
  }
  const std::vector<int>& myNode() const { return byNode_[node_]; }
  // The ranks of my part, one per node, in node order.
  std::vector<int> myPart() const {
    std::vector<int> peers;
    for (const auto& ranks : byNode_) peers.push_back(ranks[local_]);
    return peers;
  }

 private:
  std::vector<std::vector<int>> byNode_;
  int nodes_, perNode_, node_;
  int local_ = 0;
};

void checkFits(const Comm& comm, const OpContext& op, const Topology& topology) {
  if (topology.size() != comm.size() || !twoLevelFits(topology)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": two_level needs the nodes of all " + std::to_string(comm.size()) +
                          " ranks, several nodes of equal size > 1");
  }
}

// Equal-chunk reduce-scatter over `comm` (rank i ends with chunkOf(count,
// size, i)), halving/doubling in rank order when allowed and a power of two.
void reduceScatterPhase(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                        bool halving, int avgDivisor) {
  if (halving && powerOfTwo(comm.size())) {
    return halvingReduceScatter(comm, op, args, avgDivisor, HalvingPlan::Order::FarFirst);
  }
  ringReduceScatter(comm, op, args, avgDivisor);
}

// Allgather of `comm.size()` blocks in place at `out` (rank i's block already at i).
void allgatherPhase(const Comm& comm, const OpContext& op, char* out, size_t blockBytes,
                    bool halving) {
  if (halving && powerOfTwo(comm.size())) {
    // Bytes as elements: size() blocks of blockBytes are exactly the plan's chunks.
    return doublingAllgather(
        comm, op,
        {out, blockBytes * static_cast<size_t>(comm.size()), DataType::UInt8, ReduceOp::Sum},
        HalvingPlan::Order::FarFirst);
  }
  char* mine = out + static_cast<size_t>(comm.rank()) * blockBytes;
  ringAllgather(comm, op, {mine, out, blockBytes});
}

}  // namespace

bool twoLevelFits(const Topology& topology) {
  return topology.nodes() > 1 && topology.maxRanksPerNode() > 1 && topology.regular();
}

void twoLevelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                           const Topology& topology, AllreduceAlgorithm crossNode) {
  if (args.count == 0) return;
  checkFits(comm, op, topology);
  const NodeOrder order(topology, comm.rank());
  const int p = comm.size();
  const int nodes = order.nodes();
  const size_t esize = elementSize(args.type);
  const size_t padded = (args.count + p - 1) / static_cast<size_t>(p);  // the largest chunk
  const bool payload = !comm.config.payloadFree;
  char* data = static_cast<char*>(args.data);
  // Ranks dealt round robin and chunks of one size: node order is the
  // caller's buffer itself.
  const bool inPlace = order.isRankOrder() && args.count % static_cast<size_t>(p) == 0;
  char* grouped = !payload || inPlace
                      ? data
                      : static_cast<char*>(comm.workspace.get(
                            Workspace::kReorder, padded * static_cast<size_t>(p) * esize));
  auto at = [&](int position) {
    return payload ? grouped + static_cast<size_t>(position) * padded * esize : nullptr;
  };
  if (payload && !inPlace) {
    for (int position = 0; position < p; ++position) {
      const Range chunk = chunkOf(args.count, p, order.rankAt(position));
      std::memcpy(at(position), data + chunk.offset * esize, chunk.count * esize);
      // Zeros, so the padding reduces without surprises; nobody reads it.
      std::memset(at(position) + chunk.count * esize, 0, (padded - chunk.count) * esize);
    }
  }

  // Inside the node: local rank i ends with the node's partial reduction of
  // part i. AVG divides later, once, by p.
  SubgroupTransport inNode(comm.transport, order.myNode(), op);
  const Comm nodeComm{inNode, comm.config, comm.workspace};
  reduceScatterPhase(nodeComm, op, {at(0), padded * static_cast<size_t>(p), args.type, args.op},
                     true, 0);

  // Across nodes, with the ranks of my part: node j's rank keeps chunk j of
  // the part, which is its own chunk. Node-local and cross-node pairs are
  // disjoint, so the two phases' tags never meet.
  SubgroupTransport across(comm.transport, order.myPart(), op);
  const Comm acrossComm{across, comm.config, comm.workspace};
  const ReductionArgs part{at(order.local() * nodes), padded * static_cast<size_t>(nodes),
                           args.type, args.op};
  reduceScatterPhase(acrossComm, op, part, crossNode == AllreduceAlgorithm::HalvingDoubling,
                     args.op == ReduceOp::Avg ? p : 0);

  if (payload && !inPlace) {
    const Range mine = chunkOf(args.count, p, comm.rank());
    std::memcpy(data + mine.offset * esize, at(order.myPosition()), mine.count * esize);
  }
}

void twoLevelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args,
                       const Topology& topology, AllreduceAlgorithm crossNode) {
  const size_t block = args.blockBytes;
  if (block == 0) return;
  checkFits(comm, op, topology);
  const NodeOrder order(topology, comm.rank());
  const int p = comm.size();
  const int nodes = order.nodes();
  const bool payload = !comm.config.payloadFree;
  char* output = static_cast<char*>(args.output);
  const bool inPlace = order.isRankOrder();
  const size_t total = block * static_cast<size_t>(p);
  char* grouped = !payload || inPlace
                      ? output
                      : static_cast<char*>(comm.workspace.get(Workspace::kReorder, total));
  auto at = [&](int position) { return grouped + static_cast<size_t>(position) * block; };
  if (payload && args.input != at(order.myPosition())) {
    std::memmove(at(order.myPosition()), args.input, block);
  }

  // Across nodes: my part's N blocks, one from each node.
  SubgroupTransport across(comm.transport, order.myPart(), op);
  const Comm acrossComm{across, comm.config, comm.workspace};
  allgatherPhase(acrossComm, op, at(order.local() * nodes), block,
                 crossNode == AllreduceAlgorithm::HalvingDoubling);

  // Inside the node: the k parts, N blocks each.
  SubgroupTransport inNode(comm.transport, order.myNode(), op);
  const Comm nodeComm{inNode, comm.config, comm.workspace};
  allgatherPhase(nodeComm, op, at(0), block * static_cast<size_t>(nodes), true);

  if (payload && !inPlace) {
    for (int position = 0; position < p; ++position) {
      std::memcpy(output + static_cast<size_t>(order.rankAt(position)) * block, at(position),
                  block);
    }
  }
}

}  // namespace ringreduce
