// The CPU collectives other than allreduce through the host channel from
// the caller's thread, as allreduceOnHostChannel (host_channel_allreduce.cpp) runs the
// allreduce: all_gather_into_tensor, all_gather, reduce_scatter_tensor,
// broadcast, barrier and all_to_all_single with equal splits. Each is
// gated by runsOnCaller and the channel's rule for its bytes
// (channelCarries, the same on every rank), fingerprinted as its queued
// form is (fingerprintOf with the same arguments as its enqueue), and runs
// the algorithm its queued body's selector would take (the channel first),
// so a rank that queued it meets the others on the same path. A queued one
// that takes the channel goes without the neighbour check: a peer that ran
// it directly sends none, and the channel's flags carry the fingerprint.
#include <cstring>

#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/alltoall.h"
#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/barrier.h"
#include "algorithms/host_channel/broadcast.h"
#include "algorithms/host_channel/turn.h"
#include "backend/contiguous_buffers.h"
#include "backend/process_group_ring.h"

namespace ringreduce {

bool ProcessGroupRing::channelCarries(size_t bytes) {
  // Nothing to move: the queued form, as before (hostAllgather and
  // hostReduceScatterInto do not take the channel for it either).
  return bytes > 0 && size_ > 1 && hostChannel() != nullptr &&
         hostChannelCollectiveApplies(engine_->callerComm(), bytes);
}

bool ProcessGroupRing::channelReadsBlocks(size_t blockBytes) {
  // The size first: most calls are smaller, and hostChannel() may take a lock.
  return blockBytes >= kCrossMemoryGatherFromBytes && size_ > 1 && hostChannel() != nullptr &&
         crossMemoryGatherCarries(engine_->callerComm(), blockBytes);
}

bool ProcessGroupRing::channelBroadcasts(size_t bytes) {
  return bytes > 0 && size_ > 1 && hostChannel() != nullptr &&
         hostChannelBroadcastApplies(engine_->callerComm(), bytes);
}

bool ProcessGroupRing::channelStartsUnevenAlltoall() {
  return size_ > 1 && hostChannel() != nullptr &&
         hostChannelUnevenAlltoallApplies(engine_->callerComm());
}

bool ProcessGroupRing::channelSynchronizes() {
  return size_ > 1 && hostChannel() != nullptr &&
         hostChannelBarrierApplies(engine_->callerComm());
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::allgatherOnHostChannel(
    const at::Tensor& output, const at::Tensor& input, const CallOptions& call) {
  const bool readsInPlace = channelReadsBlocks(input.nbytes());
  const bool onChannel = channelCarries(input.nbytes()) || readsInPlace;
  if (!runsOnCaller(call, input.nbytes(), onChannel)) return std::nullopt;
  return runOnHostChannel(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", call,
                          fingerprintOf(c10d::OpType::_ALLGATHER_BASE, output, CheckedArgs{}),
                          fieldsOf(input), output, [&](const Comm& c, const OpContext& ctx) {
                           allgatherIntoTensor(ctx, input, output, &c);
                         },
                          !readsInPlace);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::allgatherListOnHostChannel(
    const std::vector<at::Tensor>& outputs, const at::Tensor& input, const CallOptions& call) {
  const bool readsInPlace = channelReadsBlocks(input.nbytes());
  const bool onChannel = channelCarries(input.nbytes()) || readsInPlace;
  if (!runsOnCaller(call, input.nbytes(), onChannel)) return std::nullopt;
  return runOnHostChannel(c10d::OpType::ALLGATHER, "all_gather", call,
                          fingerprintOf(c10d::OpType::ALLGATHER, outputs, CheckedArgs{}),
                          fieldsOf(input), outputs[0], [&](const Comm& c, const OpContext& ctx) {
                           allgatherIntoList(ctx, input, outputs, &c);
                         },
                          !readsInPlace);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::reduceScatterOnHostChannel(
    const at::Tensor& output, const at::Tensor& input, const Reduction& red,
    const CallOptions& call) {
  if (!runsOnCaller(call, input.nbytes(), channelCarries(input.nbytes()))) return std::nullopt;
  const int reduceOp = checkedReduceOp(red);
  return runOnHostChannel(
      c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", call,
      fingerprintOf(c10d::OpType::_REDUCE_SCATTER_BASE, output, CheckedArgs{-1, reduceOp}),
      fieldsOf(output, reduceOp), output, [&](const Comm& c, const OpContext& ctx) {
        reduceScatterTensor(ctx, output, premultiplied(input, red), red.type, red.op, &c);
      });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::reduceScatterListOnHostChannel(
    const at::Tensor& output, const std::vector<at::Tensor>& inputs, const Reduction& red,
    const CallOptions& call) {
  const size_t bytes = output.nbytes() * static_cast<size_t>(size_);
  if (!runsOnCaller(call, bytes, channelCarries(bytes))) {
    return std::nullopt;
  }
  const int reduceOp = checkedReduceOp(red);
  return runOnHostChannel(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", call,
      fingerprintOf(c10d::OpType::REDUCE_SCATTER, output, CheckedArgs{-1, reduceOp}),
      fieldsOf(output, reduceOp), output, [&](const Comm& c, const OpContext& ctx) {
        reduceScatterList(ctx, output, inputs, red, &c);
      });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::broadcastOnHostChannel(
    const at::Tensor& tensor, int root, const CallOptions& call) {
  if (!runsOnCaller(call, tensor.nbytes(), channelBroadcasts(tensor.nbytes()))) {
    return std::nullopt;
  }
  // Beyond the buffers a rank puts up where its tensor lies, which may be a
  // copy its body makes (withContiguous): not ahead.
  const bool large = hostChannelBroadcastIsLarge(engine_->callerComm(), tensor.nbytes());
  return runOnHostChannel(c10d::OpType::BROADCAST, "broadcast", call,
                          fingerprintOf(c10d::OpType::BROADCAST, tensor, CheckedArgs{root}),
                          fieldsOf(tensor, -1, root), tensor,
                          [&](const Comm& c, const OpContext& ctx) {
                           withContiguous(tensor, [&](void* data) {
                             hostBroadcast(c, ctx, {data, tensor.nbytes(), root});
                           });
                         },
                          !large);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::barrierOnHostChannel(
    const CallOptions& call) {
  if (!runsOnCaller(call, 0, channelSynchronizes())) return std::nullopt;
  return runOnHostChannel(c10d::OpType::BARRIER, "barrier", call,
                          fingerprintOf(c10d::OpType::BARRIER, std::vector<at::Tensor>{},
                                        CheckedArgs{}),
                         OpFields{}, at::Tensor(),
                         [&](const Comm& c, const OpContext& ctx) { hostBarrier(c, ctx); });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::alltoallOnHostChannel(
    const at::Tensor& output, const at::Tensor& input, bool even, const CallOptions& call) {
  const size_t bytes = input.nbytes();
  const bool readsInPlace = even && channelReadsBlocks(bytes / static_cast<size_t>(size_));
  const bool onChannel = readsInPlace || (even && channelCarries(bytes));
  if (!runsOnCaller(call, bytes, onChannel)) return std::nullopt;
  return runOnHostChannel(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", call,
                          fingerprintOf(c10d::OpType::ALLTOALL_BASE, output, CheckedArgs{}),
                          fieldsOf(input), output, [&](const Comm& c, const OpContext& ctx) {
                           alltoallEqual(c, ctx, input, output);
                         },
                          !readsInPlace);
}

bool ProcessGroupRing::unevenAlltoallOnCaller(const CallOptions& call, const BlockLayout& send,
                                              const BlockLayout& recv) {
  size_t bytes = 0;
  for (size_t b : send.bytes) bytes += b;
  return runsOnCaller(call, bytes, channelStartsUnevenAlltoall()) &&
         hostChannelUnevenAlltoallFits(engine_->callerComm(), send, recv);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::alltoallUnevenOnHostChannel(
    const at::Tensor& output, const at::Tensor& input, const BlockLayout& send,
    const BlockLayout& recv, const CallOptions& call) {
  if (!unevenAlltoallOnCaller(call, send, recv)) return std::nullopt;
  // As the queued form fingerprints it: the sizes may differ per rank.
  return runOnHostChannel(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", call,
                          fingerprintOf(c10d::OpType::ALLTOALL_BASE, output, CheckedArgs{-1, -1, 0}),
                          fieldsOf(input), output, [&](const Comm& c, const OpContext& ctx) {
                            alltoallUneven(c, ctx, input, output, send, recv, /*onChannel=*/true,
                                           /*mayDecline=*/false);
                          });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::alltoallListOnHostChannel(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
    const BlockLayout& send, const BlockLayout& recv, const CallOptions& call) {
  if (!unevenAlltoallOnCaller(call, send, recv)) return std::nullopt;
  return runOnHostChannel(c10d::OpType::ALLTOALL, "all_to_all", call,
                          fingerprintOf(c10d::OpType::ALLTOALL, outputs, CheckedArgs{-1, -1, 0}),
                          fieldsOf(inputs[0]), outputs[0], [&](const Comm& c, const OpContext& ctx) {
                            alltoallList(c, ctx, inputs, outputs, send, recv, /*onChannel=*/true,
                                         /*mayDecline=*/false);
                          });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::reduceOnHostChannel(
    const at::Tensor& tensor, const Reduction& red, int root, const CallOptions& call) {
  if (!runsOnCaller(call, tensor.nbytes(), channelCarries(tensor.nbytes()))) return std::nullopt;
  const int reduceOp = checkedReduceOp(red);
  return runOnHostChannel(c10d::OpType::REDUCE, "reduce", call,
                          fingerprintOf(c10d::OpType::REDUCE, tensor, CheckedArgs{root, reduceOp}),
                          fieldsOf(tensor, reduceOp, root), tensor,
                          [&](const Comm& c, const OpContext& ctx) {
                           reduceOnChannel(c, ctx, tensor, red, root);
                         },
                          !red.premul);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::gatherOnHostChannel(
    const std::vector<at::Tensor>& outputs, const at::Tensor& input, int root,
    const CallOptions& call) {
  const bool readsInPlace = channelReadsBlocks(input.nbytes());
  const bool onChannel = channelCarries(input.nbytes()) || readsInPlace;
  if (!runsOnCaller(call, input.nbytes(), onChannel)) return std::nullopt;
  const CheckedArgs checked{root, -1, input.numel(), static_cast<int>(input.scalar_type())};
  return runOnHostChannel(c10d::OpType::GATHER, "gather", call,
                          fingerprintOf(c10d::OpType::GATHER, outputs, checked),
                          fieldsOf(input, -1, root), input,
                          [&](const Comm& c, const OpContext& ctx) {
                           gatherBody(c, ctx, input, outputs, root, true);
                         },
                          !readsInPlace);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::scatterOnHostChannel(
    const at::Tensor& output, const std::vector<at::Tensor>& inputs, int root,
    const CallOptions& call) {
  const size_t bytes = output.nbytes() * static_cast<size_t>(size_);
  if (!runsOnCaller(call, bytes, channelCarries(bytes))) {
    return std::nullopt;
  }
  return runOnHostChannel(c10d::OpType::SCATTER, "scatter", call,
                          fingerprintOf(c10d::OpType::SCATTER, output,
                                        CheckedArgs{root, -1, output.numel()}),
                         fieldsOf(output, -1, root), output,
                         [&](const Comm& c, const OpContext& ctx) {
                           scatterBody(c, ctx, output, inputs, root, true);
                         });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::allgatherCoalescedOnHostChannel(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, size_t bytes,
    const CallOptions& call) {
  return gatherMessageOnHostChannel(
      c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced", outputs, inputs[0], bytes, call,
      inputs.size(),
      [&](const Comm& c, const OpContext& ctx) { allgatherParts(c, ctx, inputs, outputs); });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::allgatherListsOnHostChannel(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, size_t bytes,
    const CallOptions& call) {
  return gatherMessageOnHostChannel(
      c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced", outputs, inputs[0], bytes, call,
      inputs.size(),
      [&](const Comm& c, const OpContext& ctx) { allgatherListParts(c, ctx, inputs, outputs); });
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::gatherMessageOnHostChannel(
    c10d::OpType type, const char* name, const std::vector<at::Tensor>& outputs,
    const at::Tensor& firstInput, size_t bytes, const CallOptions& call, size_t parts,
    HostChannelBody body) {
  if (!runsOnCaller(call, bytes, true)) return std::nullopt;
  // As the queued form fingerprints it (enqueue: the outputs together).
  const CollectiveFingerprint fingerprint = fingerprintOf(type, outputs, CheckedArgs{});
  OpFields fields = fieldsOf(firstInput);
  fields.count = static_cast<uint64_t>(fingerprint.numel);
  // Read in place, what it puts up may be a copy its body drops: not ahead.
  // The size first, as channelReadsBlocks.
  const bool readsInPlace = bytes >= kCrossMemoryGatherFromBytes && hostChannel() != nullptr &&
      hostChannelAllgatherPartsReadInPlace(engine_->callerComm(), parts, bytes);
  return runOnHostChannel(type, name, call, fingerprint, fields, outputs[0], body, !readsInPlace);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::reduceScatterCoalescedOnHostChannel(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
    const Reduction& red, size_t bytes, const CallOptions& call) {
  if (!runsOnCaller(call, bytes, true)) return std::nullopt;
  const int reduceOp = checkedReduceOp(red);
  const CollectiveFingerprint fingerprint =
      fingerprintOf(c10d::OpType::COALESCED, outputs, CheckedArgs{-1, reduceOp});
  OpFields fields = fieldsOf(outputs[0], reduceOp);
  fields.count = static_cast<uint64_t>(fingerprint.numel);
  return runOnHostChannel(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", call,
                          fingerprint, fields, outputs[0],
                          [&](const Comm& c, const OpContext& ctx) {
                            reduceScatterParts(c, ctx, inputs, outputs, red);
                          });
}

}  // namespace ringreduce
