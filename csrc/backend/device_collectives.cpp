// Allreduce of CUDA tensors: on the device when a device path applies (our
// IPC kernels on one node, NCCL across nodes: backend/device_path.h), else
// through pinned host memory over UCX. Either way with ProcessGroupNCCL's
// stream semantics (device_call.h).
#include <c10/util/Exception.h>

#include "algorithms/record_exchange.h"
#include "algorithms/ring_reduction.h"
#include "backend/device_call.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_staging.h"
#include "core/log.h"

namespace ringreduce {

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduceOnDevice(
    const at::Tensor& tensor, const Reduction& red, const c10d::AllreduceOptions& opts) {
  const c10::Device device = tensor.device();
  {
    // The device path binds the group to one GPU, as a NCCL communicator does.
    std::lock_guard<std::mutex> lock(submitMutex_);
    if (!allreduceDevice_) allreduceDevice_ = device;
    TORCH_CHECK_VALUE(*allreduceDevice_ == device, "ringreduce: allreduce on rank ", rank_,
                      ": tensor on ", device, ", but this group's CUDA allreduces run on ",
                      *allreduceDevice_, "; use one GPU per rank (torch.cuda.set_device("
                      "local_rank) before init_process_group)");
  }
  const c10::Stream stream = internalStream(device);
  HostStaging staging(device, stream);
  staging.onDevice(tensor);
  return staging.run([&] {
    return enqueue(
        c10d::OpType::ALLREDUCE, "allreduce", opts.timeout, {tensor},
        describeTensor(tensor) + " " + reduceOpName(red.op),
        [this, tensor, red, stream](const OpContext& ctx) {
          // Runs with `stream` current (runCollective).
          auto round = std::make_shared<uint32_t>(0);
          RecordExchange exchange = [this, ctx, round](const void* mine, void* all,
                                                       size_t bytes) {
            exchangeRecords(*transport_, ctx, (*round)++, mine, all, bytes);
          };
          if (DevicePath::compiled()) {
            if (!devicePath_) {
              devicePath_ = std::make_unique<DevicePath>(rank_, size_, tensor.device(), config_,
                                                          exchange);
            }
            const bool direct = tensor.is_contiguous() && !tensor.is_conj() && !tensor.is_neg();
            const at::Tensor flat = direct ? tensor : contiguousInput(tensor);
            const std::string path =
                devicePath_->allreduce(flat, red.type, red.op, stream, exchange);
            if (!path.empty()) {
              if (!direct) tensor.copy_(flat);
              RR_LOG(Trace, rank_, ctx.describe() << " ran on the device: " << path);
              return;
            }
          }
          at::Tensor host = pinnedLike(tensor);
          host.copy_(tensor, /*non_blocking=*/true);
          waitForStream(stream, ctx, "copy the tensor to the host");
          // Its own sequence number: no ring message can meet a record of the
          // device path's exchanges above (they used part 0's slots).
          ringAllreduce(*transport_, ctx.part(1), host.data_ptr(), static_cast<size_t>(host.numel()),
                        red.type, red.op, config_, workspace_);
          tensor.copy_(host, /*non_blocking=*/true);
          RR_LOG(Trace, rank_, ctx.describe() << " ran through host staging");
        },
        CheckedArgs{-1, static_cast<int>(red.op)}, 2);
  });
}

}  // namespace ringreduce
