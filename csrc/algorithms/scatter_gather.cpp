#include "algorithms/scatter_gather.h"

#include <cstring>
#include <optional>

#include "algorithms/allreduce.h"
#include "algorithms/halving_doubling.h"
#include "core/errors.h"

namespace ringreduce {

namespace {

bool powerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Halving/doubling for `allreduceBytes` (the allreduce each form is half of)?
bool useHalving(const Comm& comm, const OpContext& op, size_t allreduceBytes) {
  if (!powerOfTwo(comm.size()) || comm.size() == 1) return false;
  const AllreduceAlgorithm forced = comm.config.allreduceAlgorithm;
  if (forced != AllreduceAlgorithm::Auto) return forced == AllreduceAlgorithm::HalvingDoubling;
  std::optional<AllreduceSelector> oneNode;
  AllreduceSelector* selector = comm.selector;
  if (selector == nullptr) selector = &oneNode.emplace(Topology::singleNode(comm.size()));
  const AllreduceCostModel& model = selector->model(comm, op);
  return model.predict(AllreduceAlgorithm::HalvingDoubling, allreduceBytes) <
         model.predict(AllreduceAlgorithm::Ring, allreduceBytes);
}

}  // namespace

void hostReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  const std::string reason = unsupportedReason(args.type, args.op);
  if (!reason.empty()) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": " + reason);
  }
  if (comm.size() == 1 || args.count == 0) return;
  if (!useHalving(comm, op, args.count * elementSize(args.type))) {
    return ringReduceScatter(comm, op, args);
  }
  halvingReduceScatter(comm, op, args, args.op == ReduceOp::Avg ? comm.size() : 0,
                       HalvingPlan::Order::FarFirst);
}

void hostAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  const int n = comm.size();
  if (n == 1 || args.blockBytes == 0 ||
      !useHalving(comm, op, args.blockBytes * static_cast<size_t>(n))) {
    return ringAllgather(comm, op, args);
  }
  char* mine = static_cast<char*>(args.output) + static_cast<size_t>(comm.rank()) * args.blockBytes;
  if (args.input != mine && !comm.config.payloadFree) {
    std::memmove(mine, args.input, args.blockBytes);
  }
  // Bytes as elements: p blocks of blockBytes are exactly the plan's p chunks.
  doublingAllgather(
      comm, op,
      {args.output, args.blockBytes * static_cast<size_t>(n), DataType::UInt8, ReduceOp::Sum},
      HalvingPlan::Order::FarFirst);
}

}  // namespace ringreduce
