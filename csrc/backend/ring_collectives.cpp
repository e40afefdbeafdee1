// The collectives built on the ring and chain algorithms: allreduce,
// reduce, reduce_scatter, allgather, broadcast, and the barrier.
#include <c10/util/Exception.h>

#include "algorithms/barrier.h"
#include "algorithms/chain_broadcast.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_reduce.h"
#include "algorithms/ring_reduction.h"
#include "backend/dtype_mapping.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/tensor_staging.h"
#include "core/partition.h"

namespace ringreduce {


c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const CallSite site{"allreduce", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  const Reduction red = checkReduction(tensor, opts.reduceOp, site);
  return enqueue(c10d::OpType::ALLREDUCE, site.op, opts.timeout, {tensor},
                 describeTensor(tensor) + " " + reduceOpName(red.op),
                 [this, tensor, red](const OpContext& ctx) {
                   withContiguous(tensor, [&](void* data) {
                     ringAllreduce(*transport_, ctx, data, static_cast<size_t>(tensor.numel()),
                                   red.type, red.op, config_, workspace_);
                   });
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const CallSite site{"reduce", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  checkRoot(opts.rootRank, size_, site);
  const Reduction red = checkReduction(tensor, opts.reduceOp, site);
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, site.op, opts.timeout, {tensor},
                 describeTensor(tensor) + " " + reduceOpName(red.op) + " to root " +
                     std::to_string(root),
                 [this, tensor, red, root](const OpContext& ctx) {
                   const size_t count = static_cast<size_t>(tensor.numel());
                   if (rank_ == root) {
                     withContiguous(tensor, [&](void* data) {
                       ringReduce(*transport_, ctx, data, count, red.type, red.op, root, config_,
                                  workspace_);
                     });
                     return;
                   }
                   // Non-root tensors stay as they were (as with NCCL): work on a copy.
                   at::Tensor scratch = tensor.resolve_conj().resolve_neg().clone(
                       at::MemoryFormat::Contiguous);
                   ringReduce(*transport_, ctx, scratch.data_ptr(), count, red.type, red.op, root,
                              config_, workspace_);
                 });
}

// Reduce-scatter of a flat copy of the inputs: rank r keeps block r.
void ProcessGroupRing::reduceScatterFlat(const OpContext& ctx, at::Tensor flat,
                                         const at::Tensor& output, DataType type, ReduceOp op) {
  ringReduceScatter(*transport_, ctx, flat.data_ptr(), static_cast<size_t>(flat.numel()), type,
                    op, config_, workspace_);
  const Range mine = chunkOf(static_cast<size_t>(flat.numel()), size_, rank_);
  output.copy_(flat.narrow(0, static_cast<int64_t>(mine.offset), static_cast<int64_t>(mine.count))
                   .view(output.sizes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const CallSite site{"reduce_scatter", rank_};
  checkSingleTensor(outputs, site);
  const at::Tensor output = outputs[0];
  checkHostTensor(output, site, "output");
  TORCH_CHECK_VALUE(inputs.size() == 1, "ringreduce: reduce_scatter on rank ", rank_,
                    ": expected one input list, got ", inputs.size());
  const std::vector<at::Tensor> inputList = inputs[0];
  checkListLike(inputList, static_cast<size_t>(size_), output, site, "input");
  const Reduction red = checkReduction(output, opts.reduceOp, site);
  return enqueue(c10d::OpType::REDUCE_SCATTER, site.op, opts.timeout, {output},
                 describeTensor(output) + " " + reduceOpName(red.op),
                 [this, output, inputList, red](const OpContext& ctx) {
                   reduceScatterFlat(ctx, flattenList(inputList), output, red.type, red.op);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const CallSite site{"reduce_scatter_tensor", rank_};
  checkHostTensor(output, site, "output");
  checkHostTensor(input, site, "input");
  checkSameDtype(output, input, site, "output", "input");
  checkNumel(input, output.numel() * size_, site, "input");
  const Reduction red = checkReduction(output, opts.reduceOp, site);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, site.op, opts.timeout, {output},
                 describeTensor(output) + " " + reduceOpName(red.op),
                 [this, output, input, red](const OpContext& ctx) {
                   // A copy: the caller's input must stay as it was.
                   at::Tensor flat = input.resolve_conj().resolve_neg().clone(
                       at::MemoryFormat::Contiguous).reshape({-1});
                   reduceScatterFlat(ctx, flat, output, red.type, red.op);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const CallSite site{"broadcast", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  checkRoot(opts.rootRank, size_, site);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "ringreduce: broadcast on rank ", rank_,
                    ": rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, site.op, opts.timeout, {tensor},
                 describeTensor(tensor) + " from root " + std::to_string(root),
                 [this, tensor, root](const OpContext& ctx) {
                   withContiguous(tensor, [&](void* data) {
                     chainBroadcast(*transport_, ctx, data, tensor.nbytes(), root, config_);
                   });
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather", rank_};
  checkSingleTensor(inputs, site);
  const at::Tensor input = inputs[0];
  checkHostTensor(input, site, "input");
  TORCH_CHECK_VALUE(outputs.size() == 1, "ringreduce: all_gather on rank ", rank_,
                    ": expected one output list, got ", outputs.size());
  const std::vector<at::Tensor> outputList = outputs[0];
  checkListLike(outputList, static_cast<size_t>(size_), input, site, "output");
  return enqueue(c10d::OpType::ALLGATHER, site.op, opts.timeout, outputList,
                 describeTensor(input), [this, input, outputList](const OpContext& ctx) {
                   allgatherIntoList(ctx, input, outputList);
                 });
}

void ProcessGroupRing::allgatherIntoList(const OpContext& ctx, const at::Tensor& input,
                                         const std::vector<at::Tensor>& outputs) {
  const at::Tensor in = contiguousInput(input);
  at::Tensor gathered = at::empty({size_ * input.numel()}, input.options());
  ringAllgather(*transport_, ctx, in.data_ptr(), gathered.data_ptr(), in.nbytes(), config_);
  unflattenInto(gathered, outputs);
}

void ProcessGroupRing::allgatherIntoTensor(const OpContext& ctx, const at::Tensor& input,
                                           const at::Tensor& output) {
  const at::Tensor in = contiguousInput(input);
  withContiguous(output, [&](void* data) {
    ringAllgather(*transport_, ctx, in.data_ptr(), data, in.nbytes(), config_);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const CallSite site{"all_gather_into_tensor", rank_};
  checkHostTensor(input, site, "input");
  checkHostTensor(output, site, "output");
  checkSameDtype(output, input, site, "output", "input");
  checkNumel(output, input.numel() * size_, site, "output");
  return enqueue(c10d::OpType::_ALLGATHER_BASE, site.op, opts.timeout, {output},
                 describeTensor(input), [this, input, output](const OpContext& ctx) {
                   allgatherIntoTensor(ctx, input, output);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(c10d::OpType::BARRIER, "barrier", opts.timeout, {}, "",
                 [this](const OpContext& ctx) { disseminationBarrier(*transport_, ctx); });
}

}  // namespace ringreduce
