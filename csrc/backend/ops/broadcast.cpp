// broadcast: through the host channel where it applies (its buffers, in as
// many turns as it takes, or read in place), else a pipelined chain from the
// root.
#include <c10/util/Exception.h>

#include "algorithms/host_channel/broadcast.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const CallSite site{"broadcast", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkRoot(opts.rootRank, size_, site);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "ringreduce: broadcast on rank ", rank_,
                    ": rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  // The root's tensor is only read, but every rank refuses one that cannot
  // be written: the same call fails alike on every rank (nothing numbered,
  // no rank left waiting in a broadcast its peers refused), and the group
  // stays usable. An expanded root tensor needs .contiguous().
  if (deviceOfCall(site, tensors)) {
    checkDeviceTensor(tensor, site, "input");
    checkWritable(tensor, site, "input");
    if (auto work = broadcastAlone(tensor, opts.timeout)) return work;
    return broadcastOnDevice(tensor, root, opts.timeout);
  }
  checkHostTensor(tensor, site, "input");
  checkWritable(tensor, site, "input");
  if (auto work = broadcastAlone(tensor, opts.timeout)) return work;
  if (auto done = broadcastOnHostChannel(tensor, root, callOptions(opts))) return *done;
  return enqueue(
      nullptr, c10d::OpType::BROADCAST, site.op, callOptions(opts), {tensor},
      describeTensor(tensor) + " from root " + std::to_string(root),
      [this, tensor, root](const OpContext& ctx) {
        withContiguous(tensor, [&](void* data) {
          hostBroadcast(comm(), ctx, {data, tensor.nbytes(), root});
        });
      },
      CheckedArgs{root}, 1, !channelBroadcasts(tensor.nbytes()));
}

}  // namespace ringreduce
