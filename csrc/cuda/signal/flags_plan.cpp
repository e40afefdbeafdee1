// How the device-flags path of a group would run, decided alike on every rank (flags_plan.h)
#include "cuda/signal/flags_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "cuda/signal/signal_pad.h"

namespace ringreduce::cuda {

FlagsPlan planFlags(const std::vector<RankDevice>& ranks, CudaSync asked, int blocks,
                    const std::string& mpsHow) {
  FlagsPlan plan;
  std::set<uint64_t> hosts;
  std::map<std::pair<uint64_t, std::array<uint8_t, 16>>, int> ranksOnGpu;
  bool allMps = true, allMemOps = true;
  for (const RankDevice& r : ranks) {
    hosts.insert(r.host);
    ++ranksOnGpu[{r.host, r.gpu}];
    allMps = allMps && r.mps;
    allMemOps = allMemOps && r.memOps;
  }
  const int size = static_cast<int>(ranks.size());
  plan.sameNode = hosts.size() == 1;
  plan.gpuShared = ranksOnGpu.size() < ranks.size();
  plan.topology = std::to_string(size) + " rank(s) on " + std::to_string(hosts.size()) +
                  " node(s), " + std::to_string(ranksOnGpu.size()) + " GPU(s)";
  if (!plan.sameNode || size > kSignalRanks) {
    plan.reason = "it needs every rank on one node, at most " + std::to_string(kSignalRanks) +
                  " ranks (" + plan.topology + ")";
  } else if (asked == CudaSync::Flags) {
    plan.sync = CudaSync::Flags;
    plan.reason = "flags (RINGREDUCE_CUDA_SYNC=flags)";
  } else if (asked == CudaSync::StreamMemOps || (plan.gpuShared && !allMps)) {
    if (allMemOps) {
      plan.sync = CudaSync::StreamMemOps;
      plan.reason = asked == CudaSync::StreamMemOps
                        ? "stream memory operations (RINGREDUCE_CUDA_SYNC=memops)"
                        : "stream memory operations: ranks share a GPU without MPS (" +
                              mpsHow + "), so their kernels are time-sliced";
    } else {
      plan.reason = "ranks share a GPU without MPS and some rank's driver lacks stream "
                    "memory operations";
    }
  } else {
    plan.sync = CudaSync::Flags;
    plan.reason = plan.gpuShared ? "flags: ranks share a GPU under MPS (" + mpsHow + ")"
                                 : "flags: one GPU per rank";
  }
  // Where ranks share a GPU, every rank's blocks must be resident together
  // (a block spinning for a peer's block that cannot be scheduled would
  // wait for its deadline).
  int most = kSignalBlocks;
  for (const RankDevice& r : ranks) {
    most = std::min(most, std::max(1, r.sms / ranksOnGpu[{r.host, r.gpu}]));
  }
  if (blocks > 0) most = std::min(most, blocks);
  plan.maxBlocks = most;
  return plan;
}

}  // namespace ringreduce::cuda
