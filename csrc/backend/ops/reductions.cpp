// The reductions: allreduce (dense on the ring, sparse by allgather), reduce
// to a root, reduce_scatter and reduce_scatter_tensor; and the workspace
// views the ring reductions stage copies in.
#include <c10/util/Exception.h>

#include "algorithms/allreduce.h"
#include "algorithms/reduce_to_root.h"
#include "algorithms/ring_allreduce.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/scatter_gather.h"
#include "algorithms/host_channel/reduce.h"
#include "backend/dtype_mapping.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/contiguous_buffers.h"
#include "core/observe/latency_probe.h"
#include "core/plan/partition.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  probe::mark(ProbePoint::BackendEntered);
  const CallSite site{"allreduce", rank_};
  endBlockTorchLeftOpen("an allreduce came (torch's manager left the block open)");
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  if (tensor.defined() && tensor.layout() == at::kSparse) return allreduceSparse(tensor, opts);
  if (tensor.defined() && tensor.is_cuda()) {
    TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, "ringreduce: allreduce on rank ", rank_,
                      ": only dense (strided) CUDA tensors are supported, got layout ",
                      tensor.layout());
    checkWritable(tensor, site, "input");
    const Reduction red = checkDeviceReduction(tensor, opts.reduceOp, site);
    if (auto work = allreduceAlone(tensor, red, opts.timeout)) return work;
    return allreduceOnDevice(tensor, red, opts);
  }
  checkHostTensor(tensor, site, "input");
  checkWritable(tensor, site, "input");
  const Reduction red = checkReduction(tensor, opts.reduceOp, site);
  probe::mark(ProbePoint::Checked);
  if (auto work = allreduceAlone(tensor, red, opts.timeout)) return work;
  if (auto done = allreduceOnHostChannel(tensor, red, callOptions(opts))) return *done;
  return enqueue(
      nullptr, c10d::OpType::ALLREDUCE, site.op, callOptions(opts), {tensor},
      describeTensor(tensor) + " " + reductionName(red),
      [this, tensor, red](const OpContext& ctx) {
        if (red.premul) tensor.mul_(*red.premul);  // the result replaces it anyway
        withContiguous(tensor, [&](void* data) {
          hostAllreduce(comm(), ctx, {data, static_cast<size_t>(tensor.numel()), red.type, red.op});
        });
      },
      CheckedArgs{-1, checkedReduceOp(red)}, 1,
      // Through the host channel every peer's fingerprint is checked anyway.
      !throughHostChannel(tensor.nbytes()));
}

// Sparse COO SUM, as gloo does it: gather every rank's indices and values
// (three ring allgathers: sizes, then both padded to the largest nnz), then
// concatenate and coalesce, which sums duplicate indices.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduceSparse(
    const at::Tensor& tensor, const c10d::AllreduceOptions& opts) {
  const CallSite site{"allreduce (sparse)", rank_};
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "ringreduce: ", site.op, " on rank ", rank_,
                    ": tensor is on ", tensor.device(),
                    "; sparse allreduce takes CPU tensors (densify CUDA ones first)");
  checkReducibleDtype(tensor, site);
  TORCH_CHECK_VALUE(opts.reduceOp == c10d::ReduceOp::SUM, "ringreduce: ", site.op, " on rank ",
                    rank_, ": sparse tensors support SUM only");
  return enqueue(
      nullptr, c10d::OpType::ALLREDUCE, site.op, callOptions(opts), {tensor},
      describeTensor(tensor) + " sparse SUM",
      [this, tensor](const OpContext& ctx) {
        const at::Tensor local = tensor.coalesce();
        const int64_t nnz = local._nnz();
        const at::Tensor indices = local._indices().contiguous();  // [sparse_dim, nnz]
        const at::Tensor values = local._values().contiguous();    // [nnz, dense...]
        at::Tensor counts = at::empty({size_}, at::kLong);
        ringAllgather(comm(), ctx.part(0), {&nnz, counts.data_ptr(), sizeof(int64_t)});
        const int64_t maxNnz = counts.max().item<int64_t>();
        // Pad to maxNnz so every rank contributes an equal block.
        at::Tensor paddedIndices = at::zeros({indices.size(0), maxNnz}, indices.options());
        paddedIndices.narrow(1, 0, nnz).copy_(indices);
        std::vector<int64_t> valueShape = values.sizes().vec();
        valueShape[0] = maxNnz;
        at::Tensor paddedValues = at::zeros(valueShape, values.options());
        paddedValues.narrow(0, 0, nnz).copy_(values);
        std::vector<int64_t> allIndicesShape{size_, indices.size(0), maxNnz};
        std::vector<int64_t> allValuesShape = valueShape;
        allValuesShape.insert(allValuesShape.begin(), size_);
        at::Tensor allIndices = at::empty(allIndicesShape, indices.options());
        at::Tensor allValues = at::empty(allValuesShape, values.options());
        ringAllgather(comm(), ctx.part(1),
                      {paddedIndices.data_ptr(), allIndices.data_ptr(), paddedIndices.nbytes()});
        ringAllgather(comm(), ctx.part(2),
                      {paddedValues.data_ptr(), allValues.data_ptr(), paddedValues.nbytes()});
        std::vector<at::Tensor> indexParts, valueParts;
        for (int r = 0; r < size_; ++r) {
          const int64_t n = counts[r].item<int64_t>();
          indexParts.push_back(allIndices[r].narrow(1, 0, n));
          valueParts.push_back(allValues[r].narrow(0, 0, n));
        }
        at::Tensor result = at::sparse_coo_tensor(at::cat(indexParts, 1), at::cat(valueParts, 0),
                                                  tensor.sizes(), tensor.options())
                                .coalesce();
        tensor.copy_(result);
      },
      CheckedArgs{-1, static_cast<int>(ReduceOp::Sum), 0}, 3);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const CallSite site{"reduce", rank_};
  if (auto device = deviceOfCall(site, tensors)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> host = staging.readWrite(tensors);
    return staging.run([&](const Staged& staged) { return reduce(host, opts, staged); });
  }
  return reduce(tensors, opts, nullptr);
}

// The host form of reduce: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts,
                                                        const Staged& staged) {
  const CallSite site{"reduce", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  checkWritable(tensor, site, "input");  // in place on every rank
  checkRoot(opts.rootRank, size_, site);
  const Reduction red = checkReduction(tensor, opts.reduceOp, site);
  const int root = static_cast<int>(opts.rootRank);
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::REDUCE, site.op, opts.timeout, at::TensorList(tensor),
                                at::TensorList(tensor),
                                CheckedArgs{root, checkedReduceOp(red)}, &red)) {
      return work;
    }
    if (auto done = reduceOnHostChannel(tensor, red, root, callOptions(opts))) return *done;
  }
  // Through the channel: one sequence number, where the queued forms take two.
  const bool onChannel = channelCarries(tensor.nbytes());
  return enqueue(
      staged, c10d::OpType::REDUCE, site.op, callOptions(opts), {tensor},
      describeTensor(tensor) + " " + reductionName(red) + " to root " + std::to_string(root),
      [this, tensor, red, root, onChannel](const OpContext& ctx) {
        if (onChannel) return reduceOnChannel(comm(), ctx, tensor, red, root);
        const size_t count = static_cast<size_t>(tensor.numel());
        if (rank_ == root) {
          if (red.premul) tensor.mul_(*red.premul);  // the result replaces it anyway
          withContiguous(tensor, [&](void* data) {
            hostReduce(comm(), ctx, {data, count, red.type, red.op}, root, {});
          });
          return;
        }
        // Non-root tensors stay as they were (as with NCCL): direct reads
        // them in place and reduces this rank's chunk apart; the other forms
        // work on a copy.
        const at::Tensor in = red.premul          ? premultiplied(tensor, red)
                              : plainContiguous(tensor) ? tensor
                                                        : stagedCopy(tensor);
        const size_t chunkBytes = chunkOf(count, size_, rank_).count * tensor.element_size();
        ReduceScratch scratch;
        scratch.chunk = comm().workspace.get(Workspace::kReducedChunk, chunkBytes);
        scratch.copy = in.is_same(tensor) ? stagedBuffer(tensor.numel(), tensor.options()).data_ptr()
                                          : in.data_ptr();
        hostReduce(comm(), ctx, {in.data_ptr(), count, red.type, red.op}, root, scratch);
      },
      CheckedArgs{root, checkedReduceOp(red)}, onChannel ? 1 : 2, !onChannel);
}

void ProcessGroupRing::reduceOnChannel(const Comm& c, const OpContext& ctx,
                                       const at::Tensor& tensor, const Reduction& red, int root) {
  const size_t count = static_cast<size_t>(tensor.numel());
  if (rank_ == root) {
    if (red.premul) tensor.mul_(*red.premul);  // the result replaces it anyway
    withContiguous(tensor, [&](void* data) {
      hostChannelReduce(c, ctx, {data, count, red.type, red.op}, root);
    });
    return;
  }
  // Only read here: the caller's tensor stays as it was.
  const at::Tensor in = red.premul ? premultiplied(tensor, red) : contiguousInput(tensor);
  hostChannelReduce(c, ctx, {in.data_ptr(), count, red.type, red.op}, root);
}

at::Tensor ProcessGroupRing::stagedBuffer(int64_t numel, const at::TensorOptions& options) {
  const size_t bytes = static_cast<size_t>(numel) * options.dtype().itemsize();
  return at::from_blob(comm().workspace.get(Workspace::kStaging, bytes), {numel},
                       options.device(at::kCPU));
}

// A contiguous copy in reused memory: a fresh allocation per call would pay
// for page faults on every large collective.
at::Tensor ProcessGroupRing::stagedCopy(const at::Tensor& tensor) {
  at::Tensor staged = stagedBuffer(tensor.numel(), tensor.options()).view(tensor.sizes());
  staged.copy_(tensor);  // copy_ resolves conj/neg views
  return staged;
}

// Reduce-scatter of a flat copy of the inputs: rank r keeps block r.
void ProcessGroupRing::reduceScatterFlat(const OpContext& ctx, at::Tensor flat,
                                         const at::Tensor& output, DataType type, ReduceOp op) {
  hostReduceScatter(comm(), ctx, {flat.data_ptr(), static_cast<size_t>(flat.numel()), type, op});
  const Range mine = chunkOf(static_cast<size_t>(flat.numel()), size_, rank_);
  output.copy_(flat.narrow(0, static_cast<int64_t>(mine.offset), static_cast<int64_t>(mine.count))
                   .view(output.sizes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const CallSite site{"reduce_scatter", rank_};
  if (auto device = deviceOfCall(site, outputs)) {
    HostStaging staging = stagingFor(*device, site.op);
    std::vector<at::Tensor> hostOutputs = staging.write(outputs);
    std::vector<std::vector<at::Tensor>> hostInputs = staging.read(inputs);
    return staging.run([&](const Staged& staged) {
      return reduce_scatter(hostOutputs, hostInputs, opts, staged);
    });
  }
  return reduce_scatter(outputs, inputs, opts, nullptr);
}

// The host form of reduce_scatter: `staged` carries the CUDA call it stands for, if any.
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts, const Staged& staged) {
  const CallSite site{"reduce_scatter", rank_};
  checkSingleTensor(outputs, site);
  const at::Tensor output = outputs[0];
  checkHostTensor(output, site, "output");
  checkWritable(output, site, "output");
  TORCH_CHECK_VALUE(inputs.size() == 1, "ringreduce: reduce_scatter on rank ", rank_,
                    ": expected one input list, got ", inputs.size());
  const std::vector<at::Tensor> inputList = inputs[0];
  checkListLike(inputList, static_cast<size_t>(size_), output, site, "input");
  const Reduction red = checkReduction(output, opts.reduceOp, site);
  const size_t bytes = output.nbytes() * static_cast<size_t>(size_);
  if (!staged) {
    if (auto work = copiesAlone(c10d::OpType::REDUCE_SCATTER, site.op, opts.timeout,
                                at::TensorList(output), inputList,
                                CheckedArgs{-1, checkedReduceOp(red)}, &red)) {
      return work;
    }
    if (auto done = reduceScatterListOnHostChannel(output, inputList, red, callOptions(opts))) {
      return *done;
    }
  }
  return enqueue(
      staged, c10d::OpType::REDUCE_SCATTER, site.op, callOptions(opts), {output},
      describeTensor(output) + " " + reductionName(red),
      [this, output, inputList, red](const OpContext& ctx) {
        reduceScatterList(ctx, output, inputList, red);
      },
      CheckedArgs{-1, checkedReduceOp(red)}, 1, !channelCarries(bytes));
}

void ProcessGroupRing::reduceScatterList(const OpContext& ctx, const at::Tensor& output,
                                         const std::vector<at::Tensor>& inputList,
                                         const Reduction& red, const Comm* on) {
  // As reduce_scatter_tensor: direct reads each input where it is and
  // reduces into the output (a tensor that is not plain memory is
  // copied, on this rank only); the other forms work on a flat copy.
  std::vector<at::Tensor> ins;
  std::vector<const void*> blocks;
  for (const at::Tensor& in : inputList) {
    const at::Tensor scaled = premultiplied(in, red);
    ins.push_back(plainContiguous(scaled) ? scaled : contiguousInput(scaled));
    blocks.push_back(ins.back().data_ptr());
  }
  // The output may be this rank's own input; overlapping another's
  // (which a peer reads meanwhile), or its own in part, it waits apart.
  bool apart = !plainContiguous(output);
  for (int j = 0; j < size_; ++j) {
    const at::Tensor& in = ins[static_cast<size_t>(j)];
    const bool own = j == rank_ && in.data_ptr() == output.data_ptr();
    if (!own && sharesMemory(in, output)) apart = true;
  }
  const at::Tensor out = apart ? at::empty(output.sizes(), output.options()) : output;
  const size_t count = static_cast<size_t>(output.numel()) * static_cast<size_t>(size_);
  if (hostReduceScatterBlocksInto(on ? *on : comm(), ctx, {nullptr, count, red.type, red.op},
                                  blocks, out.data_ptr())) {
    // (Published ahead, nothing is reduced yet.)
    if (!out.is_same(output) && !ctx.stoppedAhead()) output.copy_(out);
    return;
  }
  at::Tensor flat = stagedBuffer(output.numel() * size_, output.options());
  int64_t offset = 0;
  for (const at::Tensor& in : ins) {
    flat.narrow(0, offset, in.numel()).copy_(in.reshape({-1}));
    offset += in.numel();
  }
  reduceScatterFlat(ctx, flat, output, red.type, red.op);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  endBlockTorchLeftOpen("a reduce_scatter_tensor came (torch's manager left the block open)");
  return reduceScatterTensorCall(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduceScatterTensorCall(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const CallSite site{"reduce_scatter_tensor", rank_};
  if (deviceOfCall(site, {output, input})) {
    checkDeviceTensor(output, site, "output");
    checkDeviceTensor(input, site, "input");
    checkSameDtype(output, input, site, "output", "input");
    checkNumel(input, output.numel() * size_, site, "input");
    checkWritable(output, site, "output");
    const Reduction red = checkDeviceReduction(output, opts.reduceOp, site);
    if (auto work = reduceScatterAlone(output, input, red, opts.timeout)) return work;
    return reduceScatterOnDevice(output, input, red, opts.timeout);
  }
  checkHostTensor(output, site, "output");
  checkHostTensor(input, site, "input");
  checkSameDtype(output, input, site, "output", "input");
  checkNumel(input, output.numel() * size_, site, "input");
  checkWritable(output, site, "output");
  const Reduction red = checkReduction(output, opts.reduceOp, site);
  if (auto work = reduceScatterAlone(output, input, red, opts.timeout)) return work;
  if (auto done = reduceScatterOnHostChannel(output, input, red, callOptions(opts))) return *done;
  return enqueue(
      nullptr, c10d::OpType::_REDUCE_SCATTER_BASE, site.op, callOptions(opts), {output},
      describeTensor(output) + " " + reductionName(red),
      [this, output, input, red](const OpContext& ctx) {
        reduceScatterTensor(ctx, output, premultiplied(input, red), red.type, red.op);
      },
      CheckedArgs{-1, checkedReduceOp(red)}, 1, !channelCarries(input.nbytes()));
}

// The caller's input must stay as it was: direct reads it where it is and
// reduces into the output; the other forms work in place on a copy (world 4
// on 2 cores, 64 MiB: copying in and out cost more than the reduce-scatter
// itself). The form, the same on every rank, decides: a tensor that is not
// plain memory gets a copy either way.
void ProcessGroupRing::reduceScatterTensor(const OpContext& ctx, const at::Tensor& output,
                                           const at::Tensor& input, DataType type, ReduceOp op,
                                           const Comm* on) {
  const at::Tensor in = plainContiguous(input) ? input : stagedCopy(input);
  const at::Tensor out = plainContiguous(output) && !sharesMemory(in, output)
                             ? output
                             : at::empty(output.sizes(), output.options());
  if (hostReduceScatterInto(on ? *on : comm(), ctx,
                            {in.data_ptr(), static_cast<size_t>(in.numel()), type, op},
                            out.data_ptr())) {
    // (Published ahead, nothing is reduced yet.)
    if (!out.is_same(output) && !ctx.stoppedAhead()) output.copy_(out);
    return;
  }
  const at::Tensor copy = in.is_same(input) ? stagedCopy(input) : in;
  reduceScatterFlat(ctx, copy.reshape({-1}), output, type, op);
}

}  // namespace ringreduce
