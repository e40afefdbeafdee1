// The collectives that move blocks without reducing them: allgather and
// all_gather_into_tensor on the ring; gather, scatter and all-to-all (equal
// or uneven splits) where ranks exchange blocks directly.
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

#include "algorithms/pairwise_exchange.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/scatter_gather.h"
#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/alltoall.h"
#include "algorithms/host_channel/gather.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "core/observe/latency_probe.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather", rank_};
  if (auto device = deviceOfCall(site, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<std::vector<at::Tensor>> hostOutputs = staging.write(outputs);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run(
        [&](const Staged& staged) { return allgather(hostOutputs, hostInputs, opts, staged); });
  }
  return allgather(outputs, inputs, opts, nullptr);
}

// The host form of allgather: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts, const Staged& staged) {
  const CallSite site{"all_gather", rank_};
  checkSingleTensor(inputs, site);
  const at::Tensor input = inputs[0];
  checkHostTensor(input, site, "input");
  TORCH_CHECK_VALUE(outputs.size() == 1, "ringreduce: all_gather on rank ", rank_,
                    ": expected one output list, got ", outputs.size());
  const std::vector<at::Tensor> outputList = outputs[0];
  checkListLike(outputList, static_cast<size_t>(size_), input, site, "output");
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::ALLGATHER, site.op, opts.timeout, outputList,
                                at::TensorList(input), CheckedArgs{})) {
      return work;
    }
    if (auto done = allgatherListOnHostChannel(outputList, input, callOptions(opts))) return *done;
  }
  return enqueue(staged, c10d::OpType::ALLGATHER, site.op, callOptions(opts), outputList,
                 describeTensor(input),
                 [this, input, outputList](const OpContext& ctx) {
                   allgatherIntoList(ctx, input, outputList);
                 },
                 CheckedArgs{}, 1,
                 !channelCarries(input.nbytes()) && !channelReadsBlocks(input.nbytes()));
}

void ProcessGroupRing::allgatherIntoList(const OpContext& ctx, const at::Tensor& input,
                                         const std::vector<at::Tensor>& outputs, const Comm* on) {
  const Comm& c = on ? *on : comm();
  at::Tensor in = contiguousInput(input);
  // Through the channel (the same choice as hostAllgather's, on every
  // rank): straight into the caller's tensors, no flat buffer to copy out of.
  if (size_ > 1 && in.nbytes() > 0 && hostChannelAllgatherApplies(c, in.nbytes())) {
    return allgatherStraightIntoList(c, ctx, in, outputs);
  }
  at::Tensor gathered = at::empty({size_ * input.numel()}, input.options());
  hostAllgather(c, ctx, {in.data_ptr(), gathered.data_ptr(), in.nbytes()});
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  unflattenInto(gathered, outputs);
}

void ProcessGroupRing::allgatherStraightIntoList(const Comm& c, const OpContext& ctx,
                                                 at::Tensor in,
                                                 const std::vector<at::Tensor>& outputs) {
  // An output whose memory is not its values in order (strided, a conj or
  // neg view) takes its block in a temporary, copied in at the end. Any
  // shape: a contiguous tensor's memory is its elements in order.
  std::vector<void*> blocks(outputs.size());
  std::vector<at::Tensor> staged(outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r) {
    const at::Tensor& out = outputs[r];
    if (plainContiguous(out)) {
      blocks[r] = out.data_ptr();
      // The input must stay readable until its last piece is in the
      // channel: where a peer's block lands on it, read a copy. Its own
      // place is fine (in place: the algorithm skips that block).
      const bool ownPlace = static_cast<int>(r) == rank_ && out.data_ptr() == in.data_ptr();
      if (!ownPlace && sharesMemory(in, out)) in = in.clone(at::MemoryFormat::Contiguous);
    } else {
      staged[r] = at::empty({out.numel()}, out.options());
      blocks[r] = staged[r].data_ptr();
    }
  }
  hostChannelAllgatherBlocks(c, ctx, in.data_ptr(), blocks, in.nbytes());
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  for (size_t r = 0; r < outputs.size(); ++r) {
    if (staged[r].defined()) outputs[r].copy_(staged[r].view(outputs[r].sizes()));
  }
}

void ProcessGroupRing::allgatherIntoTensor(const OpContext& ctx, const at::Tensor& input,
                                           const at::Tensor& output, const Comm* on) {
  at::Tensor in = contiguousInput(input);
  // An input that is part of the output but not this rank's own block (in
  // place) would be overwritten by a peer's block while still read: a copy.
  const auto* own = static_cast<const char*>(output.data_ptr()) + in.nbytes() * rank_;
  if (sharesMemory(in, output) && (in.data_ptr() != own || !plainContiguous(output))) {
    in = in.clone(at::MemoryFormat::Contiguous);
  }
  withContiguous(output, [&](void* data) {
    hostAllgather(on ? *on : comm(), ctx, {in.data_ptr(), data, in.nbytes()});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  endBlockTorchLeftOpen("an all_gather_into_tensor came (torch's manager left the block open)");
  return allgatherIntoTensorCall(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgatherIntoTensorCall(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather_into_tensor", rank_};
  if (deviceOfCall(site, {output, input})) {
    checkDeviceTensor(input, site, "input");
    checkDeviceTensor(output, site, "output");
    checkSameDtype(output, input, site, "output", "input");
    checkNumel(output, input.numel() * size_, site, "output");
    checkWritable(output, site, "output");
    if (auto work = allgatherAlone(output, input, opts.timeout)) return work;
    return allgatherOnDevice(output, input, opts.timeout);
  }
  checkHostTensor(input, site, "input");
  checkHostTensor(output, site, "output");
  checkSameDtype(output, input, site, "output", "input");
  checkNumel(output, input.numel() * size_, site, "output");
  checkWritable(output, site, "output");
  if (auto work = allgatherAlone(output, input, opts.timeout)) return work;
  if (auto done = allgatherOnHostChannel(output, input, callOptions(opts))) return *done;
  return enqueue(nullptr, c10d::OpType::_ALLGATHER_BASE, site.op, callOptions(opts), {output},
                 describeTensor(input),
                 [this, input, output](const OpContext& ctx) {
                   allgatherIntoTensor(ctx, input, output);
                 },
                 CheckedArgs{}, 1,
                 !channelCarries(input.nbytes()) && !channelReadsBlocks(input.nbytes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const CallSite site{"gather", rank_};
  if (auto device = deviceOfCall(site, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<std::vector<at::Tensor>> hostOutputs = staging.write(outputs);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run(
        [&](const Staged& staged) { return gather(hostOutputs, hostInputs, opts, staged); });
  }
  return gather(outputs, inputs, opts, nullptr);
}

// The host form of gather: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts, const Staged& staged) {
  const CallSite site{"gather", rank_};
  checkSingleTensor(inputs, site);
  const at::Tensor input = inputs[0];
  checkHostTensor(input, site, "input");
  checkRoot(opts.rootRank, size_, site);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outputList;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1, "ringreduce: gather on root rank ", rank_,
                      ": expected one output list, got ", outputs.size());
    outputList = outputs[0];
    checkListLike(outputList, static_cast<size_t>(size_), input, site, "output");
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || outputs[0].empty(), "ringreduce: gather on rank ", rank_,
                      ": only the root (rank ", root, ") may pass an output list");
  }
  const CheckedArgs checked{root, -1, input.numel(), static_cast<int>(input.scalar_type())};
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::GATHER, site.op, opts.timeout, outputList,
                                at::TensorList(input), checked)) {
      return work;
    }
    if (auto done = gatherOnHostChannel(outputList, input, root, callOptions(opts))) return *done;
  }
  const bool onChannel = channelCarries(input.nbytes()) || channelReadsBlocks(input.nbytes());
  return enqueue(
      staged, c10d::OpType::GATHER, site.op, callOptions(opts), outputList,
      describeTensor(input) + " to root " + std::to_string(root),
      [this, input, outputList, root, onChannel](const OpContext& ctx) {
        gatherBody(comm(), ctx, input, outputList, root, onChannel);
      },
      checked, 1, !onChannel);
}

void ProcessGroupRing::gatherBody(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                                  const std::vector<at::Tensor>& outputs, int root,
                                  bool onChannel) {
  const at::Tensor in = contiguousInput(input);
  // Through the channel, straight into the root's list: a flat buffer and
  // its copies out cost 10-12 us at 64 B through torch's ops.
  std::vector<void*> blocks;
  const bool inPlace = rank_ != root || pointersInPlace(outputs, in, blocks);
  if (onChannel && inPlace) {
    hostChannelGatherBlocks(c, ctx, in.data_ptr(), blocks, in.nbytes(), root);
    return;
  }
  if (!onChannel && inPlace) {
    // Straight into the root's tensors too: a flat buffer of n blocks, made
    // at each call, cost a large gather its pages' first touch (8 MiB per
    // rank at world 2: 3.3-10 ms, against 1.5 ms for Open MPI).
    GatherArgs args{in.data_ptr(), in.nbytes(), nullptr,
                    BlockLayout::uniform(size_, in.nbytes()), root};
    args.blocks = std::move(blocks);
    gatherToRoot(c, ctx, args);
    return;
  }
  at::Tensor flat;
  if (rank_ == root) flat = at::empty({size_ * in.numel()}, in.options());
  void* gathered = rank_ == root ? flat.data_ptr() : nullptr;
  if (onChannel) {
    hostChannelGather(c, ctx, {in.data_ptr(), gathered, in.nbytes(), root});
  } else {
    gatherToRoot(c, ctx,
                 {in.data_ptr(), in.nbytes(), gathered, BlockLayout::uniform(size_, in.nbytes()),
                  root});
  }
  if (rank_ == root && !ctx.stoppedAhead()) unflattenInto(flat, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const CallSite site{"scatter", rank_};
  if (auto device = deviceOfCall(site, outputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> hostOutputs = staging.write(outputs);
    std::vector<std::vector<at::Tensor>> hostInputs = staging.read(inputs);
    return staging.run(
        [&](const Staged& staged) { return scatter(hostOutputs, hostInputs, opts, staged); });
  }
  return scatter(outputs, inputs, opts, nullptr);
}

// The host form of scatter: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts, const Staged& staged) {
  const CallSite site{"scatter", rank_};
  checkSingleTensor(outputs, site);
  const at::Tensor output = outputs[0];
  checkHostTensor(output, site, "output");
  checkWritable(output, site, "output");
  checkRoot(opts.rootRank, size_, site);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> inputList;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1, "ringreduce: scatter on root rank ", rank_,
                      ": expected one input list, got ", inputs.size());
    inputList = inputs[0];
    checkListLike(inputList, static_cast<size_t>(size_), output, site, "input");
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || inputs[0].empty(), "ringreduce: scatter on rank ", rank_,
                      ": only the root (rank ", root, ") may pass an input list");
  }
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::SCATTER, site.op, opts.timeout,
                                at::TensorList(output), inputList,
                                CheckedArgs{root, -1, output.numel()})) {
      return work;
    }
    if (auto done = scatterOnHostChannel(output, inputList, root, callOptions(opts))) return *done;
  }
  const bool onChannel = channelCarries(output.nbytes() * static_cast<size_t>(size_));
  return enqueue(
      staged, c10d::OpType::SCATTER, site.op, callOptions(opts), {output},
      describeTensor(output) + " from root " + std::to_string(root),
      [this, output, inputList, root, onChannel](const OpContext& ctx) {
        scatterBody(comm(), ctx, output, inputList, root, onChannel);
      },
      CheckedArgs{root, -1, output.numel()}, 1, !onChannel);
}

void ProcessGroupRing::scatterBody(const Comm& c, const OpContext& ctx, const at::Tensor& output,
                                   const std::vector<at::Tensor>& inputs, int root,
                                   bool onChannel) {
  // Through the channel, straight from the root's list (as gatherBody).
  std::vector<const void*> blocks;
  if (plainContiguous(output) && (rank_ != root || pointersInPlace(inputs, output, blocks))) {
    if (onChannel) {
      hostChannelScatterBlocks(c, ctx, blocks, output.data_ptr(), output.nbytes(), root);
      return;
    }
    // Straight from the root's tensors too: no flat copy of n blocks made at
    // each call (as gatherBody).
    ScatterArgs args{nullptr, BlockLayout::uniform(size_, output.nbytes()), output.data_ptr(),
                     output.nbytes(), root};
    args.blocks = std::move(blocks);
    scatterFromRoot(c, ctx, args);
    return;
  }
  at::Tensor flat;
  if (rank_ == root) flat = flattenList(inputs);
  const void* flatBlocks = rank_ == root ? flat.data_ptr() : nullptr;
  withContiguous(output, [&](void* data) {
    if (onChannel) return hostChannelScatter(c, ctx, {flatBlocks, data, output.nbytes(), root});
    scatterFromRoot(c, ctx,
                    {flatBlocks, BlockLayout::uniform(size_, output.nbytes()), data,
                     output.nbytes(), root});
  });
}

namespace {

// Byte layout of dim-0 splits of `tensor` (equal splits when `splits` is empty).
BlockLayout splitLayout(const at::Tensor& tensor, const std::vector<int64_t>& splits, int size,
                        const CallSite& site, const char* role) {
  const int64_t rows = tensor.dim() == 0 ? 1 : tensor.size(0);
  const size_t rowBytes = rows == 0 ? 0 : tensor.nbytes() / static_cast<size_t>(rows);
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "ringreduce: ", site.op, " on rank ", site.rank, ": ", role,
                      " dim 0 (", rows, ") is not divisible by the group size (", size,
                      "); pass split sizes");
    return BlockLayout::uniform(size, static_cast<size_t>(rows / size) * rowBytes);
  }
  const std::vector<int64_t>& counts = splits;
  TORCH_CHECK_VALUE(static_cast<int>(counts.size()) == size, "ringreduce: ", site.op, " on rank ",
                    site.rank, ": ", role, " split sizes have ", counts.size(),
                    " entries, expected one per rank (", size, ")");
  int64_t total = 0;
  for (int64_t c : counts) {
    TORCH_CHECK_VALUE(c >= 0, "ringreduce: ", site.op, " on rank ", site.rank, ": negative ", role,
                      " split size ", c);
    total += c;
  }
  TORCH_CHECK_VALUE(total == rows, "ringreduce: ", site.op, " on rank ", site.rank, ": ", role,
                    " split sizes add up to ", total, " but dim 0 is ", rows);
  BlockLayout layout;
  layout.offsets.reserve(counts.size());
  layout.bytes.reserve(counts.size());
  size_t offset = 0;
  for (int64_t c : counts) {
    layout.offsets.push_back(offset);
    layout.bytes.push_back(static_cast<size_t>(c) * rowBytes);
    offset += static_cast<size_t>(c) * rowBytes;
  }
  return layout;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::alltoall_base(at::Tensor& output,
                                                               at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& opts) {
  probe::mark(ProbePoint::BackendEntered);
  const CallSite site{"all_to_all_single", rank_};
  if (auto device = deviceOfCall(site, {output, input})) {
    HostStaging staging = stagingFor(*device, site.op);
    at::Tensor hostOutput = staging.write(output);
    at::Tensor hostInput = staging.read(input);
    return staging.run([&](const Staged& staged) {
      return alltoall_base(hostOutput, hostInput, outputSplits, inputSplits, opts, staged);
    });
  }
  return alltoall_base(output, input, outputSplits, inputSplits, opts, nullptr);
}

// The host form of alltoall_base: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts, const Staged& staged) {
  const CallSite site{"all_to_all_single", rank_};
  checkHostTensor(input, site, "input");
  checkHostTensor(output, site, "output");
  checkWritable(output, site, "output");
  checkSameDtype(output, input, site, "output", "input");
  const BlockLayout sendLayout = splitLayout(input, inputSplits, size_, site, "input");
  const BlockLayout recvLayout = splitLayout(output, outputSplits, size_, site, "output");
  // Without split sizes every rank's blocks are equal, and so are the
  // ranks' sizes: only then the channel, and sizes in the fingerprint (a
  // rank that gave split sizes against one that gave none is a mismatch).
  const bool even = inputSplits.empty() && outputSplits.empty();
  TORCH_CHECK_VALUE(!even || output.numel() == input.numel(), "ringreduce: ", site.op,
                    " on rank ", rank_, ": without split sizes the output (", output.numel(),
                    " elements) must be as large as the input (", input.numel(), ")");
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::ALLTOALL_BASE, site.op, opts.timeout,
                                at::TensorList(output), at::TensorList(input),
                                CheckedArgs{-1, -1, even ? -1 : 0})) {
      return work;
    }
    if (auto done = alltoallOnHostChannel(output, input, even, callOptions(opts))) return *done;
    if (!even) {
      if (auto done = alltoallUnevenOnHostChannel(output, input, sendLayout, recvLayout,
                                                  callOptions(opts))) {
        return *done;
      }
    }
  }
  const bool onChannel =
      even && (channelCarries(input.nbytes()) ||
               channelReadsBlocks(input.nbytes() / static_cast<size_t>(size_)));
  // Uneven, queued: where the first turn finds blocks too large for the
  // channel, and no rank runs it on its caller's thread, every rank moves
  // them with messages instead.
  const bool unevenOnChannel = !even && channelStartsUnevenAlltoall();
  return enqueue(
      staged, c10d::OpType::ALLTOALL_BASE, site.op, callOptions(opts), {output},
      describeTensor(input),
      [this, input, output, sendLayout, recvLayout, onChannel,
       unevenOnChannel](const OpContext& ctx) {
        if (onChannel) return alltoallEqual(comm(), ctx, input, output);
        alltoallUneven(comm(), ctx, input, output, sendLayout, recvLayout, unevenOnChannel,
                       /*mayDecline=*/true);
      },
      CheckedArgs{-1, -1, even ? -1 : 0}, 1,  // uneven: sizes may differ per rank
      !onChannel && !unevenOnChannel);
}

void ProcessGroupRing::alltoallUneven(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                                      const at::Tensor& output, const BlockLayout& send,
                                      const BlockLayout& recv, bool onChannel, bool mayDecline) {
  at::Tensor in = contiguousInput(input);
  if (onChannel && sharesMemory(in, output)) {
    in = in.clone(at::MemoryFormat::Contiguous);  // read while written
  }
  withContiguous(output, [&](void* data) {
    const AllToAllArgs args{in.data_ptr(), send, data, recv};
    if (onChannel && hostChannelUnevenAlltoall(c, ctx, args, mayDecline)) return;
    // Queued bodies only: on the caller's thread (mayDecline false) the
    // channel never declines, and that thread must not drive the transport.
    allToAll(c, ctx, args);
  });
}

void ProcessGroupRing::alltoallList(const Comm& c, const OpContext& ctx,
                                    const std::vector<at::Tensor>& inputs,
                                    const std::vector<at::Tensor>& outputs,
                                    const BlockLayout& send, const BlockLayout& recv,
                                    bool onChannel, bool mayDecline) {
  // Through the channel, each block read and written where it is (as
  // gatherBody), unless an input shares memory with an output: read while
  // written in a later turn.
  if (onChannel) {
    AllToAllBlocks blocks{{}, send.bytes, {}, recv.bytes};
    const MemorySpans written(outputs);
    const bool apart = std::none_of(inputs.begin(), inputs.end(),
                                    [&](const at::Tensor& t) { return written.overlaps(t); });
    if (apart && pointersInPlace(inputs, at::Tensor(), blocks.send) &&
        pointersInPlace(outputs, at::Tensor(), blocks.recv)) {
      if (hostChannelUnevenAlltoallBlocks(c, ctx, blocks, mayDecline)) return;
      onChannel = false;  // declined (queued bodies only): the transport moves them, below
    }
  }
  const at::Tensor sent = flattenList(inputs);
  const int64_t recvCount =
      std::accumulate(outputs.begin(), outputs.end(), int64_t{0},
                      [](int64_t sum, const at::Tensor& t) { return sum + t.numel(); });
  at::Tensor received = at::empty({recvCount}, outputs[0].options());
  const AllToAllArgs args{sent.data_ptr(), send, received.data_ptr(), recv};
  // allToAll: queued bodies only, as in alltoallUneven.
  if (!onChannel || !hostChannelUnevenAlltoall(c, ctx, args, mayDecline)) allToAll(c, ctx, args);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing received yet
  unflattenInto(received, outputs);
}

void ProcessGroupRing::alltoallEqual(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                                     const at::Tensor& output) {
  at::Tensor in = contiguousInput(input);
  if (sharesMemory(in, output)) in = in.clone(at::MemoryFormat::Contiguous);  // read while written
  withContiguous(output, [&](void* data) {
    hostChannelAlltoall(c, ctx, {in.data_ptr(), data, in.nbytes() / static_cast<size_t>(size_)});
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  probe::mark(ProbePoint::BackendEntered);
  const CallSite site{"all_to_all", rank_};
  if (auto device = deviceOfCall(site, outputs, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> hostOutputs = staging.write(outputs);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run(
        [&](const Staged& staged) { return alltoall(hostOutputs, hostInputs, opts, staged); });
  }
  return alltoall(outputs, inputs, opts, nullptr);
}

// The host form of alltoall: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts,
                                                          const Staged& staged) {
  const CallSite site{"all_to_all", rank_};
  TORCH_CHECK_VALUE(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      "ringreduce: all_to_all on rank ", rank_, ": expected ", size_,
      " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  BlockLayout sendLayout, recvLayout;
  size_t sendOffset = 0, recvOffset = 0;
  for (int p = 0; p < size_; ++p) {
    checkHostTensor(inputs[p], site, "input");
    checkHostTensor(outputs[p], site, "output");
    checkSameDtype(outputs[p], inputs[0], site, "output", "input");
    checkSameDtype(inputs[p], inputs[0], site, "input", "first input");
    sendLayout.offsets.push_back(sendOffset);
    sendLayout.bytes.push_back(inputs[p].nbytes());
    sendOffset += inputs[p].nbytes();
    recvLayout.offsets.push_back(recvOffset);
    recvLayout.bytes.push_back(outputs[p].nbytes());
    recvOffset += outputs[p].nbytes();
  }
  // Each peer's block lands in its own tensor.
  checkOutputsApart(outputs, site);
  // Each rank's tensors may differ in size from its peers': as
  // all_to_all_single with split sizes, through the channel's uneven form
  // where it starts there (its first turn tells whether the blocks stay).
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::ALLTOALL, site.op, opts.timeout, outputs, inputs,
                                CheckedArgs{-1, -1, 0})) {
      return work;
    }
    if (auto done =
            alltoallListOnHostChannel(outputs, inputs, sendLayout, recvLayout, callOptions(opts))) {
      return *done;
    }
  }
  // The queued body's own lists: the caller's may change once this returns.
  const std::vector<at::Tensor> inputList = inputs;
  const std::vector<at::Tensor> outputList = outputs;
  const bool onChannel = channelStartsUnevenAlltoall();
  return enqueue(
      staged, c10d::OpType::ALLTOALL, site.op, callOptions(opts), outputList,
      std::to_string(size_) + " tensors",
      [this, inputList, outputList, sendLayout, recvLayout, onChannel](const OpContext& ctx) {
        alltoallList(comm(), ctx, inputList, outputList, sendLayout, recvLayout, onChannel,
                     /*mayDecline=*/true);
      },
      CheckedArgs{-1, -1, 0}, 1, !onChannel);  // sizes may differ per rank
}

}  // namespace ringreduce
