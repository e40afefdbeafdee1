// The coalesced forms: several tensors in one operation, as one message on
// the host channel where it carries them (on the caller's thread where a
// collective of that size runs there), else queued with each part under its
// own sequence number (OpContext::part) so their messages never meet. allreduce_coalesced fuses all tensors of one dtype into a single flat
// buffer and a single ring allreduce, as Horovod's tensor fusion does.
#include <algorithm>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

#include "algorithms/allreduce.h"
#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/reduce_scatter.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"
#include "core/observe/latency_probe.h"
#include "engine/engine.h"

namespace ringreduce {

namespace {

// torch's coalescing manager, given a device (DeepSpeed's ZeRO passes one),
// opens a block (startCoalescing) and ends it (endCoalescing) only after the
// block's one coalesced call returns. Where that call raises (a bad tensor,
// say), the block is ended here instead: left open, it would hold every
// later operation of the group and refuse every later block.
class BlockEndsIfRaises {
 public:
  explicit BlockEndsIfRaises(Engine& engine)
      : engine_(engine), raisingAlready_(std::uncaught_exceptions()) {}
  BlockEndsIfRaises(const BlockEndsIfRaises&) = delete;
  BlockEndsIfRaises& operator=(const BlockEndsIfRaises&) = delete;
  ~BlockEndsIfRaises() {
    if (std::uncaught_exceptions() == raisingAlready_ || !engine_.coalescing()) return;
    try {
      engine_.endOpenBlock("its coalesced call raised");
    } catch (...) {
      // The call's own error is the one its caller sees.
    }
  }

 private:
  Engine& engine_;
  int raisingAlready_;
};

// Where a part's input is read from: the input itself, or a copy kept in
// `copies` until the algorithm ends where it is not its values in order, or
// where a block the algorithm writes lands on it (an input must stay
// readable until its last piece is in the channel). Its own place in its own
// output is fine: in place, not copied at all.
const void* readableInput(const at::Tensor& input, const void* own, const MemorySpans& written,
                          std::vector<at::Tensor>& copies) {
  if (!plainContiguous(input)) {
    copies.push_back(contiguousInput(input));  // new memory, apart from every output
  } else if (input.data_ptr() != own && written.overlaps(input)) {
    copies.push_back(input.clone(at::MemoryFormat::Contiguous));
  } else {
    return input.data_ptr();
  }
  return copies.back().data_ptr();
}

// An output whose memory is not its values in order takes its blocks in a
// temporary, copied in at the end (`staged`: output, temporary); the others
// are written where they are (`written`). The place its blocks land.
void* placeOf(const at::Tensor& output, std::vector<std::pair<at::Tensor, at::Tensor>>& staged,
              MemorySpans::Spans& written) {
  if (plainContiguous(output)) {
    written.push_back(MemorySpans::spanOf(output));
    return output.data_ptr();
  }
  staged.emplace_back(output, at::empty({output.numel()}, output.options()));
  return staged.back().second.data_ptr();
}

void copyInStaged(const std::vector<std::pair<at::Tensor, at::Tensor>>& staged) {
  for (const auto& [output, temporary] : staged) output.copy_(temporary.view(output.sizes()));
}

// all_gather_coalesced's outputs, held rank by rank, as one list per input
// (every rank's block of it): the per-tensor forms take them so.
std::vector<std::vector<at::Tensor>> outputsByInput(const std::vector<at::Tensor>& outputs,
                                                    size_t inputs) {
  std::vector<std::vector<at::Tensor>> lists(inputs);
  for (size_t k = 0; k < outputs.size(); ++k) lists[k % inputs].push_back(outputs[k]);
  return lists;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const BlockEndsIfRaises blockEnds(*engine_);
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
    for (size_t i = 0; i < tensors.size(); ++i) {
      checkHostTensor(tensors[i], site, "input");
      checkWritable(tensors[i], i, site, "input");
    }
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
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i];
      checkHostTensor(t, site, "input");
      checkWritable(t, i, site, "input");
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
  probe::mark(ProbePoint::BackendEntered);
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
  const size_t world = static_cast<size_t>(size_);
  size_t bytes = 0;
  for (const at::Tensor& input : inputs) {
    checkHostTensor(input, site, "input");
    bytes += input.nbytes();
  }
  std::vector<at::Tensor> outputs;  // rank by rank: outputLists[r][i] at r * inputs + i
  outputs.reserve(world * inputs.size());
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK_VALUE(outputLists[r].size() == inputs.size(),
                      "ringreduce: all_gather_coalesced on rank ", rank_, ": output list ", r,
                      " has ", outputLists[r].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& output = outputLists[r][i];
      checkHostTensor(output, site, "output");
      checkSameDtype(output, inputs[i], site, "output", "input");
      checkNumel(output, inputs[i].numel(), site, "output");
      outputs.push_back(output);
    }
  }
  // No two outputs share memory: of plain ones, none of all (numbered as
  // `outputs` holds them); otherwise none of one input's, as before.
  if (!checkNoOverlapPlain(outputs, site, "output")) {
    for (const std::vector<at::Tensor>& list : outputsByInput(outputs, inputs.size())) {
      checkNoOverlap(list, site, "output");
    }
  }
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::ALLGATHER_COALESCED, site.op, opts.timeout, outputs,
                                inputs, CheckedArgs{})) {
      return work;
    }
  }
  // As all_gather_into_tensor_coalesced: where the channel carries the
  // block, one collective with the tensors as one message, on the caller's
  // thread where a collective of that size would run there, else queued
  // with the same body.
  if (channelCarries(bytes)) {
    if (!staged) {
      if (auto done = allgatherListsOnHostChannel(outputs, inputs, bytes, callOptions(opts))) {
        return *done;
      }
    }
    return enqueue(
        staged, c10d::OpType::ALLGATHER_COALESCED, site.op, callOptions(opts), outputs,
        std::to_string(inputs.size()) + " tensors as one message",
        [this, outputs, ins = inputs](const OpContext& ctx) {
          allgatherListParts(comm(), ctx, ins, outputs);
        },
        CheckedArgs{}, 1, false);
  }
  return enqueue(
      staged, c10d::OpType::ALLGATHER_COALESCED, site.op, callOptions(opts), outputs,
      std::to_string(inputs.size()) + " tensors",
      [this, lists = outputsByInput(outputs, inputs.size()), ins = inputs](const OpContext& ctx) {
        for (size_t i = 0; i < ins.size(); ++i) allgatherIntoList(ctx.part(i), ins[i], lists[i]);
      },
      CheckedArgs{}, std::max<size_t>(1, inputs.size()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const BlockEndsIfRaises blockEnds(*engine_);
  probe::mark(ProbePoint::BackendEntered);
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
  if (outputs.size() == 1 && inputs.size() == 1) {
    return allgatherIntoTensorCall(outputs[0], inputs[0], opts);
  }
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
  checkOutputsApart(outputs, site);
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


// The coalesced all-gathers run at every small step of FSDP and ZeRO-3:
// nothing below is allocated per tensor where the tensors are plain memory.
void ProcessGroupRing::allgatherParts(const Comm& c, const OpContext& ctx,
                                      const std::vector<at::Tensor>& inputs,
                                      const std::vector<at::Tensor>& outputs) {
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;
  MemorySpans::Spans writtenSpans;  // what the algorithm writes in place
  writtenSpans.reserve(outputs.size());
  std::vector<AllgatherPart> parts(inputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    parts[i].output = placeOf(outputs[i], staged, writtenSpans);
  }
  const MemorySpans written(std::move(writtenSpans));
  std::vector<at::Tensor> copies;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts[i].bytes = inputs[i].nbytes();
    const char* own =
        static_cast<char*>(parts[i].output) + parts[i].bytes * static_cast<size_t>(rank_);
    parts[i].input = readableInput(inputs[i], own, written, copies);
  }
  hostChannelAllgatherParts(c, ctx, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  copyInStaged(staged);
}

void ProcessGroupRing::allgatherListParts(const Comm& c, const OpContext& ctx,
                                          const std::vector<at::Tensor>& inputs,
                                          const std::vector<at::Tensor>& outputs) {
  // As allgatherParts, with rank r's input i landing in a tensor of its own,
  // outputs[r * inputs + i] (all_gather_coalesced's lists, rank by rank).
  const size_t world = static_cast<size_t>(size_);
  std::vector<void*> places(inputs.size() * world);  // part i's block of rank r at [i * world + r]
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;
  MemorySpans::Spans writtenSpans;
  writtenSpans.reserve(places.size());
  for (size_t r = 0; r < world; ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      places[i * world + r] = placeOf(outputs[r * inputs.size() + i], staged, writtenSpans);
    }
  }
  const MemorySpans written(std::move(writtenSpans));
  std::vector<AllgatherListPart> parts(inputs.size());
  std::vector<at::Tensor> copies;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts[i].outputs = &places[i * world];
    parts[i].bytes = inputs[i].nbytes();
    const void* own = places[i * world + static_cast<size_t>(rank_)];
    parts[i].input = readableInput(inputs[i], own, written, copies);
  }
  hostChannelAllgatherListParts(c, ctx, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing gathered yet
  copyInStaged(staged);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const BlockEndsIfRaises blockEnds(*engine_);
  probe::mark(ProbePoint::BackendEntered);
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
    return reduceScatterTensorCall(outputs[0], inputs[0], opts);
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
  // Every pair checked; one dtype (the usual case) makes one Reduction.
  size_t bytes = 0;
  bool oneDtype = true;
  std::optional<Reduction> first;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkHostTensor(inputs[i], site, "input");
    checkHostTensor(outputs[i], site, "output");
    checkSameDtype(outputs[i], inputs[i], site, "output", "input");
    checkNumel(inputs[i], outputs[i].numel() * size_, site, "input");
    const Reduction red = checkReduction(outputs[i], opts.reduceOp, site);
    if (!first) first = red;
    bytes += inputs[i].nbytes();
    oneDtype = oneDtype && inputs[i].scalar_type() == inputs[0].scalar_type();
  }
  checkOutputsApart(outputs, site);
  if (oneDtype && !staged && first) {
    if (auto work = copiesAlone(c10d::OpType::COALESCED, site.op, opts.timeout, outputs, inputs,
                                CheckedArgs{-1, checkedReduceOp(*first)}, &*first)) {
      return work;
    }
  }
  // Tensors of one dtype (the usual case) where the channel carries the
  // whole block: one collective, as all_gather_into_tensor_coalesced's.
  if (oneDtype && channelCarries(bytes)) {
    const Reduction red = *first;
    if (!staged) {
      if (auto done =
              reduceScatterCoalescedOnHostChannel(outputs, inputs, red, bytes, callOptions(opts))) {
        return *done;
      }
    }
    return enqueue(
        staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outputs,
        std::to_string(inputs.size()) + " tensors as one message",
        [this, ins = inputs, outs = outputs, red](const OpContext& ctx) {
          reduceScatterParts(comm(), ctx, ins, outs, red);
        },
        CheckedArgs{-1, checkedReduceOp(red)}, 1, false);
  }
  std::vector<Reduction> reductions;  // each tensor's (checked above)
  for (const at::Tensor& output : outputs) {
    reductions.push_back(checkReduction(output, opts.reduceOp, site));
  }
  return enqueue(
      staged, c10d::OpType::COALESCED, site.op, callOptions(opts), outputs,
      std::to_string(inputs.size()) + " tensors",
      [this, ins = inputs, outs = outputs, reductions](const OpContext& ctx) {
        for (size_t i = 0; i < ins.size(); ++i) {
          reduceScatterTensor(ctx.part(i), outs[i], premultiplied(ins[i], reductions[i]),
                              reductions[i].type, reductions[i].op);
        }
      },
      CheckedArgs{-1, reductions.empty() ? -1 : checkedReduceOp(reductions[0])},
      std::max<size_t>(1, inputs.size()));
}

void ProcessGroupRing::reduceScatterParts(const Comm& c, const OpContext& ctx,
                                          const std::vector<at::Tensor>& inputs,
                                          const std::vector<at::Tensor>& outputs,
                                          const Reduction& red) {
  // The inputs read where they are unless premultiplied or not their values
  // in order: a copy, kept in `copies` until the algorithm ends.
  std::vector<at::Tensor> copies;
  std::vector<ReduceScatterPart> parts(inputs.size());
  MemorySpans::Spans readSpans;
  readSpans.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (red.premul || !plainContiguous(inputs[i])) {
      copies.push_back(contiguousInput(premultiplied(inputs[i], red)));
      parts[i].input = copies.back().data_ptr();
      readSpans.push_back(MemorySpans::spanOf(copies.back()));
    } else {
      parts[i].input = inputs[i].data_ptr();
      readSpans.push_back(MemorySpans::spanOf(inputs[i]));
    }
    parts[i].count = static_cast<size_t>(inputs[i].numel());
  }
  // An output is written where it is unless it is not plain memory or
  // shares memory with an input (read until the last piece): a temporary,
  // copied in at the end.
  const MemorySpans read(std::move(readSpans));
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;  // output, temporary
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (plainContiguous(outputs[i]) && !read.overlaps(outputs[i])) {
      parts[i].output = outputs[i].data_ptr();
    } else {
      staged.emplace_back(outputs[i], at::empty({outputs[i].numel()}, outputs[i].options()));
      parts[i].output = staged.back().second.data_ptr();
    }
  }
  // (The dtype and op are supported: checkReduction raised otherwise.)
  hostChannelReduceScatterParts(c, ctx, red.type, red.op, parts);
  if (ctx.stoppedAhead()) return;  // published ahead: nothing reduced yet
  copyInStaged(staged);
}

}  // namespace ringreduce
