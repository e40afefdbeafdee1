// The coalesced forms: several tensors in one queued operation. Each part
// runs with its own sequence number (OpContext::part) so their messages never
// meet. allreduce_coalesced fuses all tensors of one dtype into a single flat
// buffer and a single ring allreduce, as Horovod's tensor fusion does.
#include <algorithm>

#include <c10/util/Exception.h>

#include "algorithms/allreduce.h"
#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/reduce_scatter.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"
#include "core/observe/latency_probe.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  probe::mark(ProbePoint::BackendEntered);
  const CallSite site{"allreduce_coalesced", rank_};
  if (auto device = deviceOfCall(site, tensors)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> host = staging.readWrite(tensors);
    return staging.run(
        [&](const Staged& staged) { return allreduce_coalesced(host, opts, staged); });
  }
  return allreduce_coalesced(tensors, opts, nullptr);
}

// The host form of allreduce_coalesced: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts,
    const Staged& staged) {
  const CallSite site{"allreduce_coalesced", rank_};
  TORCH_CHECK_VALUE(!tensors.empty(), "ringreduce: allreduce_coalesced on rank ", rank_,
                    ": no tensors");
  // Buckets of tensors sharing a dtype, in order of first appearance. One
  // dtype (the usual case) is one bucket, checked once, run on the caller's
  // thread where an allreduce of the fused size would run there.
  std::vector<std::vector<at::Tensor>> buckets;
  std::vector<Reduction> reductions;
  const bool oneDtype = std::all_of(tensors.begin(), tensors.end(), [&](const at::Tensor& t) {
    return t.defined() && t.scalar_type() == tensors[0].scalar_type();
  });
  if (oneDtype) {
    for (const at::Tensor& t : tensors) checkHostTensor(t, site, "input");
    const Reduction red = checkReduction(tensors[0], opts.reduceOp, site);
    probe::mark(ProbePoint::Checked);
    if (!staged) {
      if (auto work = copiesAlone(c10d::OpType::COALESCED, site.op, opts.timeout, tensors, tensors,
                                  CheckedArgs{-1, checkedReduceOp(red)}, &red)) {
        return work;
      }
      if (auto done = allreduceCoalescedOnHostChannel(tensors, red, callOptions(opts))) {
        return *done;
      }
    }
    buckets.push_back(tensors);  // allocated only where it queues
    reductions.push_back(red);
  } else {
    for (const at::Tensor& t : tensors) {
      checkHostTensor(t, site, "input");
      const Reduction red = checkReduction(t, opts.reduceOp, site);
      size_t b = 0;
      while (b < buckets.size() && buckets[b][0].scalar_type() != t.scalar_type()) ++b;
      if (b == buckets.size()) {
        buckets.emplace_back();
        reductions.push_back(red);
      }
      buckets[b].push_back(t);
    }
  }
  // Otherwise queued, as before; a peer may have run it on its thread, so
  // the queued one takes no neighbour check where the channel carries it.
  bool peerMayRunOnCaller = false;
  if (!staged && buckets.size() == 1) {
    size_t bytes = 0;
    for (const at::Tensor& t : buckets[0]) bytes += t.nbytes();
    peerMayRunOnCaller = throughHostChannel(bytes);
  }
  return enqueue(
      staged, c10d::OpType::COALESCED, site.op, callOptions(opts), tensors,
      std::to_string(tensors.size()) + " tensors in " + std::to_string(buckets.size()) +
          " fused buffer(s)",
      [this, buckets, reductions](const OpContext& ctx) {
        for (size_t b = 0; b < buckets.size(); ++b) {
          at::Tensor flat = flattenList(buckets[b]);
          if (reductions[b].premul) flat.mul_(*reductions[b].premul);
          hostAllreduce(comm(), ctx.part(b),
                        {flat.data_ptr(), static_cast<size_t>(flat.numel()), reductions[b].type,
                         reductions[b].op});
          unflattenInto(flat, buckets[b]);
        }
      },
      CheckedArgs{-1, checkedReduceOp(reductions[0])}, buckets.size(), !peerMayRunOnCaller);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather_coalesced", rank_};
  if (auto device = deviceOfCall(site, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<std::vector<at::Tensor>> hostOutputs = staging.write(outputLists);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run([&](const Staged& staged) {
      return allgather_coalesced(hostOutputs, hostInputs, opts, staged);
    });
  }
  return allgather_coalesced(outputLists, inputs, opts, nullptr);
}

// The host form of allgather_coalesced: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts, const Staged& staged) {
  // As torch defines it: outputLists[r][i] receives input i of rank r, so
  // there is one output list per rank, each shaped like the inputs.
  const CallSite site{"all_gather_coalesced", rank_};
  TORCH_CHECK_VALUE(outputLists.size() == static_cast<size_t>(size_),
                    "ringreduce: all_gather_coalesced on rank ", rank_, ": ", outputLists.size(),
                    " output lists for a group of ", size_,
                    " ranks (output_tensor_lists[r][i] receives input i of rank r)");
  std::vector<std::vector<at::Tensor>> lists(inputs.size());  // lists[i]: input i of every rank
  std::vector<at::Tensor> outputs;
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK_VALUE(outputLists[r].size() == inputs.size(),
                      "ringreduce: all_gather_coalesced on rank ", rank_, ": output list ", r,
                      " has ", outputLists[r].size(), " tensors for ", inputs.size(), " inputs");
    outputs.insert(outputs.end(), outputLists[r].begin(), outputLists[r].end());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkHostTensor(inputs[i], site, "input");
    for (int r = 0; r < size_; ++r) lists[i].push_back(outputLists[r][i]);
    checkListLike(lists[i], static_cast<size_t>(size_), inputs[i], site, "output");
  }
  const std::vector<at::Tensor> ins = inputs;
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::ALLGATHER_COALESCED, site.op, opts.timeout, outputs,
                                ins, CheckedArgs{})) {
      return work;
    }
  }
  size_t bytes = 0;
  for (const at::Tensor& t : ins) bytes += t.nbytes();
  // As all_gather_into_tensor_coalesced: where the channel carries the
  // block, one collective with the tensors as one message, on the caller's
  // thread where a collective of that size would run there, else queued
  // with the same body.
  if (channelCarries(bytes)) {
    if (!staged) {
      if (auto done =
              allgatherListsOnHostChannel(lists, outputs, ins, bytes, callOptions(opts))) {
        return *done;
      }
    }
    return enqueue(
        staged, c10d::OpType::ALLGATHER_COALESCED, site.op, callOptions(opts), outputs,
        std::to_string(ins.size()) + " tensors as one message",
        [this, lists, ins](const OpContext& ctx) { allgatherListParts(comm(), ctx, ins, lists); },
        CheckedArgs{}, 1, false);
  }
  return enqueue(
      staged, c10d::OpType::ALLGATHER_COALESCED, site.op, callOptions(opts), outputs,
      std::to_string(ins.size()) + " tensors",
      [this, lists, ins](const OpContext& ctx) {
        for (size_t i = 0; i < ins.size(); ++i) allgatherIntoList(ctx.part(i), ins[i], lists[i]);
      },
      CheckedArgs{}, std::max<size_t>(1, ins.size()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather_into_tensor_coalesced", rank_};
  if (auto device = deviceOfCall(site, outputs, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> hostOutputs = staging.write(outputs);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run([&](const Staged& staged) {
      return allgather_into_tensor_coalesced(hostOutputs, hostInputs, opts, staged);
    });
  }
  // One tensor: torch's functional all_gather_into_tensor (DTensor, FSDP2
  // under torch.compile) comes this way. The single collective is the same
  // one, and its host form runs through the host channel on the caller's
  // thread; every rank calls the coalesced form alike, so every rank takes
  // this same turn.
  if (outputs.size() == 1 && inputs.size() == 1) return _allgather_base(outputs[0], inputs[0], opts);
  return allgather_into_tensor_coalesced(outputs, inputs, opts, nullptr);
}

// The host form of allgather_into_tensor_coalesced: `staged` carries the CUDA call it stands for,
// if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts, const Staged& staged) {
  const CallSite site{"all_gather_into_tensor_coalesced", rank_};
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "ringreduce: ", site.op, " on rank ", rank_,
                    ": ", outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkHostTensor(inputs[i], site, "input");
    checkHostTensor(outputs[i], site, "output");
    checkSameDtype(outputs[i], inputs[i], site, "output", "input");
    checkNumel(outputs[i], inputs[i].numel() * size_, site, "output");
  }
  const std::vector<at::Tensor> ins = inputs;
  const std::vector<at::Tensor> outs = outputs;
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::COALESCED, site.op, opts.timeout, outs, ins,
                                CheckedArgs{})) {
      return work;
    }
  }
  size_t bytes = 0;
  for (const at::Tensor& t : ins) bytes += t.nbytes();
  // Where the channel carries the whole block (the same rule on every rank:
  // its bytes), one collective with the tensors as one message: one turn
  // for a block that fits a buffer, however many tensors. On the caller's
  // thread where a collective of that size would run there; else queued,
  // the same body (a peer may have run it on its thread: no neighbour check).
  if (channelCarries(bytes)) {
    if (!staged) {
      if (auto done = allgatherCoalescedOnHostChannel(outs, ins, bytes, callOptions(opts))) {
        return *done;
      }
    }
    return enqueue(
        staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outs,
        std::to_string(ins.size()) + " tensors as one message",
        [this, ins, outs](const OpContext& ctx) { allgatherParts(comm(), ctx, ins, outs); },
        CheckedArgs{}, 1, false);
  }
  return enqueue(
      staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outs,
      std::to_string(ins.size()) + " tensors",
      [this, ins, outs](const OpContext& ctx) {
        for (size_t i = 0; i < ins.size(); ++i) allgatherIntoTensor(ctx.part(i), ins[i], outs[i]);
      },
      CheckedArgs{}, std::max<size_t>(1, ins.size()));
}

void ProcessGroupRing::allgatherParts(const Comm& c, const OpContext& ctx,
                                      const std::vector<at::Tensor>& inputs,
                                      const std::vector<at::Tensor>& outputs) {
  // An output whose memory is not its values in order takes its blocks in a
  // temporary, copied in at the end; the others are written where they are.
  std::vector<at::Tensor> staged(outputs.size());
  std::vector<at::Tensor> written;  // what the algorithm writes in place
  std::vector<void*> places(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (plainContiguous(outputs[i])) {
      places[i] = outputs[i].data_ptr();
      written.push_back(outputs[i]);
    } else {
      staged[i] = at::empty({outputs[i].numel()}, outputs[i].options());
      places[i] = staged[i].data_ptr();
    }
  }
  const MemorySpans writtenSpans(written);
  std::vector<at::Tensor> ins(inputs.size());  // kept alive until the algorithm ends
  std::vector<AllgatherPart> parts;
  parts.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins[i] = contiguousInput(inputs[i]);
    const size_t bytes = ins[i].nbytes();
    char* own = static_cast<char*>(places[i]) + bytes * static_cast<size_t>(rank_);
    // An input must stay readable until its last piece is in the channel:
    // where any output's block lands on it, read a copy. Its own place in
    // its own output is fine (in place: not copied at all).
    if (ins[i].data_ptr() != own && writtenSpans.overlaps(ins[i])) {
      ins[i] = ins[i].clone(at::MemoryFormat::Contiguous);
    }
    parts.push_back({ins[i].data_ptr(), places[i], bytes});
  }
  hostChannelAllgatherParts(c, ctx, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (staged[i].defined()) outputs[i].copy_(staged[i].view(outputs[i].sizes()));
  }
}

void ProcessGroupRing::allgatherListParts(const Comm& c, const OpContext& ctx,
                                          const std::vector<at::Tensor>& inputs,
                                          const std::vector<std::vector<at::Tensor>>& lists) {
  // As allgatherParts, with lists[i][r] (rank r's input i) a tensor of its own.
  std::vector<std::vector<at::Tensor>> staged(lists.size());
  std::vector<at::Tensor> written;
  std::vector<AllgatherListPart> parts(inputs.size());
  for (size_t i = 0; i < lists.size(); ++i) {
    staged[i].resize(lists[i].size());
    for (size_t r = 0; r < lists[i].size(); ++r) {
      const at::Tensor& out = lists[i][r];
      if (plainContiguous(out)) {
        parts[i].outputs.push_back(out.data_ptr());
        written.push_back(out);
      } else {
        staged[i][r] = at::empty({out.numel()}, out.options());
        parts[i].outputs.push_back(staged[i][r].data_ptr());
      }
    }
  }
  const MemorySpans writtenSpans(written);
  std::vector<at::Tensor> ins(inputs.size());  // kept alive until the algorithm ends
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins[i] = contiguousInput(inputs[i]);
    if (ins[i].data_ptr() != parts[i].outputs[static_cast<size_t>(rank_)] &&
        writtenSpans.overlaps(ins[i])) {
      ins[i] = ins[i].clone(at::MemoryFormat::Contiguous);
    }
    parts[i].input = ins[i].data_ptr();
    parts[i].bytes = ins[i].nbytes();
  }
  hostChannelAllgatherListParts(c, ctx, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  for (size_t i = 0; i < lists.size(); ++i) {
    for (size_t r = 0; r < lists[i].size(); ++r) {
      if (staged[i][r].defined()) lists[i][r].copy_(staged[i][r].view(lists[i][r].sizes()));
    }
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const CallSite site{"reduce_scatter_tensor_coalesced", rank_};
  if (auto device = deviceOfCall(site, outputs, inputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> hostOutputs = staging.write(outputs);
    std::vector<at::Tensor> hostInputs = staging.read(inputs);
    return staging.run([&](const Staged& staged) {
      return reduce_scatter_tensor_coalesced(hostOutputs, hostInputs, opts, staged);
    });
  }
  // One tensor: torch's functional reduce_scatter_tensor; as above.
  if (outputs.size() == 1 && inputs.size() == 1) {
    return _reduce_scatter_base(outputs[0], inputs[0], opts);
  }
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts, nullptr);
}

// The host form of reduce_scatter_tensor_coalesced: `staged` carries the CUDA call it stands for,
// if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts, const Staged& staged) {
  const CallSite site{"reduce_scatter_tensor_coalesced", rank_};
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "ringreduce: ", site.op, " on rank ", rank_,
                    ": ", outputs.size(), " outputs for ", inputs.size(), " inputs");
  std::vector<Reduction> reductions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkHostTensor(inputs[i], site, "input");
    checkHostTensor(outputs[i], site, "output");
    checkSameDtype(outputs[i], inputs[i], site, "output", "input");
    checkNumel(inputs[i], outputs[i].numel() * size_, site, "input");
    reductions.push_back(checkReduction(outputs[i], opts.reduceOp, site));
  }
  const std::vector<at::Tensor> ins = inputs;
  const std::vector<at::Tensor> outs = outputs;
  size_t bytes = 0;
  bool oneDtype = true;
  for (const at::Tensor& t : ins) {
    bytes += t.nbytes();
    oneDtype = oneDtype && t.scalar_type() == ins[0].scalar_type();
  }
  if (oneDtype && !staged && !reductions.empty()) {
    if (auto work = copiesAlone(c10d::OpType::COALESCED, site.op, opts.timeout, outs, ins,
                                CheckedArgs{-1, checkedReduceOp(reductions[0])}, &reductions[0])) {
      return work;
    }
  }
  // Tensors of one dtype (the usual case) where the channel carries the
  // whole block: one collective, as all_gather_into_tensor_coalesced's.
  if (oneDtype && channelCarries(bytes)) {
    const Reduction red = reductions[0];
    if (!staged) {
      if (auto done =
              reduceScatterCoalescedOnHostChannel(outs, ins, red, bytes, callOptions(opts))) {
        return *done;
      }
    }
    return enqueue(
        staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outs,
        std::to_string(ins.size()) + " tensors as one message",
        [this, ins, outs, red](const OpContext& ctx) {
          reduceScatterParts(comm(), ctx, ins, outs, red);
        },
        CheckedArgs{-1, checkedReduceOp(red)}, 1, false);
  }
  return enqueue(
      staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outs,
      std::to_string(ins.size()) + " tensors",
      [this, ins, outs, reductions](const OpContext& ctx) {
        for (size_t i = 0; i < ins.size(); ++i) {
          reduceScatterTensor(ctx.part(i), outs[i], premultiplied(ins[i], reductions[i]),
                              reductions[i].type, reductions[i].op);
        }
      },
      CheckedArgs{-1, reductions.empty() ? -1 : checkedReduceOp(reductions[0])},
      std::max<size_t>(1, ins.size()));
}

void ProcessGroupRing::reduceScatterParts(const Comm& c, const OpContext& ctx,
                                          const std::vector<at::Tensor>& inputs,
                                          const std::vector<at::Tensor>& outputs,
                                          const Reduction& red) {
  std::vector<at::Tensor> ins(inputs.size());  // contiguous (premultiplied: a copy)
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins[i] = contiguousInput(premultiplied(inputs[i], red));
  }
  // An output is written where it is unless it is not plain memory or
  // shares memory with an input (read until the last piece): a temporary,
  // copied in at the end.
  const MemorySpans read(ins);
  std::vector<at::Tensor> outs(outputs.size());
  std::vector<ReduceScatterPart> parts;
  parts.reserve(inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outs[i] = plainContiguous(outputs[i]) && !read.overlaps(outputs[i])
                  ? outputs[i]
                  : at::empty({outputs[i].numel()}, outputs[i].options());
    parts.push_back({ins[i].data_ptr(), outs[i].data_ptr(), static_cast<size_t>(ins[i].numel())});
  }
  // (The dtype and op are supported: checkReduction raised otherwise.)
  hostChannelReduceScatterParts(c, ctx, red.type, red.op, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing reduced yet
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outs[i].is_same(outputs[i])) outputs[i].copy_(outs[i].view(outputs[i].sizes()));
  }
}

}  // namespace ringreduce
