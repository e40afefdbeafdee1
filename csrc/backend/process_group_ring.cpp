#include "backend/process_group_ring.h"

#include <c10/util/Exception.h>

#include "algorithms/barrier.h"
#include "algorithms/chain_broadcast.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "backend/dtype_mapping.h"
#include "backend/error_translation.h"
#include "backend/store_adapter.h"
#include "backend/tensor_checks.h"
#include "core/errors.h"
#include "core/log.h"

namespace ringreduce {

namespace {

Config configFromEnvironment() {
  try {
    return Config::fromEnvironment();
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
}

// Runs `fn` on a pointer to the tensor's data laid out contiguously; copies
// back when a temporary was needed (non-contiguous or conj/neg views).
template <typename Fn>
void withContiguous(const at::Tensor& tensor, Fn fn) {
  if (tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg()) {
    fn(tensor.data_ptr());
    return;
  }
  at::Tensor staged = tensor.resolve_conj().resolve_neg().contiguous();
  fn(staged.data_ptr());
  tensor.copy_(staged);
}

at::Tensor contiguousInput(const at::Tensor& tensor) {
  return tensor.resolve_conj().resolve_neg().contiguous();
}

std::string describeTensor(const at::Tensor& t) {
  std::ostringstream s;
  s << t.numel() << " x " << t.scalar_type();
  return s.str();
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   std::string groupName)
    : c10d::Backend(rank, size),
      groupName_(std::move(groupName)),
      config_(configFromEnvironment()),
      timeoutMs_(timeout.count()) {
  try {
    C10dStoreAdapter adapter(store);
    transport_ = std::make_unique<UcxTransport>(rank, size, adapter, timeout, config_);
    executor_ = std::make_unique<Executor>(*transport_);
  } catch (...) {
    executor_.reset();
    transport_.reset();
    std::rethrow_exception(translateCurrentException());
  }
  RR_LOG(Info, rank, "group '" << groupName_ << "' created: rank " << rank << " of " << size
                               << ", timeout " << timeout.count() << " ms, segment "
                               << config_.segmentBytes << " B");
}

ProcessGroupRing::~ProcessGroupRing() { shutdown(); }

void ProcessGroupRing::shutdown() {
  std::unique_ptr<Executor> executor;
  std::unique_ptr<UcxTransport> transport;
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    executor = std::move(executor_);
    transport = std::move(transport_);
  }
  if (executor == nullptr) return;
  executor.reset();  // drains the queue and joins the thread first
  transport.reset();
  RR_LOG(Info, rank_, "group '" << groupName_ << "' shut down");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueue(
    c10d::OpType type, const char* name, std::chrono::milliseconds requestedTimeout,
    std::vector<at::Tensor> outputs, const std::string& summary, Body body) {
  const std::chrono::milliseconds timeout =
      requestedTimeout == c10d::kUnsetTimeout ? this->timeout() : requestedTimeout;
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(executor_ != nullptr, "ringreduce: ", name, " on rank ", rank_, ": process group '",
              groupName_, "' has been shut down");
  const uint64_t seq = ++nextSeq_;
  auto work = c10::make_intrusive<WorkRing>(rank_, type, seq, std::move(outputs));
  RR_LOG(Info, rank_, groupName_ << " " << name << " #" << seq << ": " << summary);
  executor_->submit([this, work, name, seq, timeout, body = std::move(body)] {
    run(*work, name, OpContext(name, seq, timeout), body);
  });
  return work;
}

void ProcessGroupRing::run(WorkRing& work, const char* name, const OpContext& op,
                           const Body& body) {
  if (!failure_.empty()) {
    work.markFailed(distBackendError("ringreduce: " + op.describe() + " on rank " +
                                     std::to_string(rank_) + " was not run: process group '" +
                                     groupName_ + "' is unusable after an earlier failure: " +
                                     failure_));
    return;
  }
  try {
    body(op);
    work.markSucceeded();
  } catch (const std::exception& e) {
    // Abandon what is still posted so no late message lands in the caller's
    // tensors, and stop using a group whose ranks are out of step.
    transport_->abandonOutstanding();
    if (dynamic_cast<const InvalidArgument*>(&e) == nullptr) failure_ = e.what();
    RR_LOG(Warn, rank_, e.what());
    work.markFailed(translateCurrentException());
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const CallSite site{"allreduce", rank_};
  checkSingleTensor(tensors, site);
  const at::Tensor tensor = tensors[0];
  checkHostTensor(tensor, site, "input");
  const DataType type = toDataType(tensor.scalar_type(), site.op);
  const ReduceOp op = toReduceOp(opts.reduceOp, site.op);
  const std::string reason = unsupportedReason(type, op);
  TORCH_CHECK_TYPE(reason.empty(), "ringreduce: allreduce on rank ", rank_, ": ", reason);
  return enqueue(c10d::OpType::ALLREDUCE, site.op, opts.timeout, {tensor},
                 describeTensor(tensor) + " " + reduceOpName(op),
                 [this, tensor, type, op](const OpContext& ctx) {
                   withContiguous(tensor, [&](void* data) {
                     ringAllreduce(*transport_, ctx, data, static_cast<size_t>(tensor.numel()),
                                   type, op, config_, workspace_);
                   });
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
  std::vector<at::Tensor> outputList = outputs[0];
  TORCH_CHECK_VALUE(static_cast<int>(outputList.size()) == size_, "ringreduce: all_gather on rank ",
                    rank_, ": output list has ", outputList.size(),
                    " tensors, expected one per rank (", size_, ")");
  for (const at::Tensor& out : outputList) {
    checkHostTensor(out, site, "output");
    checkSameDtype(out, input, site, "output", "input");
    checkNumel(out, input.numel(), site, "output");
  }
  return enqueue(c10d::OpType::ALLGATHER, site.op, opts.timeout, outputList,
                 describeTensor(input),
                 [this, input, outputList](const OpContext& ctx) {
                   const at::Tensor in = contiguousInput(input);
                   at::Tensor gathered = at::empty({size_, input.numel()}, input.options());
                   ringAllgather(*transport_, ctx, in.data_ptr(), gathered.data_ptr(),
                                 input.nbytes(), config_);
                   for (int r = 0; r < size_; ++r) {
                     outputList[r].copy_(gathered[r].view(outputList[r].sizes()));
                   }
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
                 describeTensor(input),
                 [this, input, output](const OpContext& ctx) {
                   const at::Tensor in = contiguousInput(input);
                   withContiguous(output, [&](void* data) {
                     ringAllgather(*transport_, ctx, in.data_ptr(), data, in.nbytes(), config_);
                   });
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(c10d::OpType::BARRIER, "barrier", opts.timeout, {}, "",
                 [this](const OpContext& ctx) { disseminationBarrier(*transport_, ctx); });
}

}  // namespace ringreduce
