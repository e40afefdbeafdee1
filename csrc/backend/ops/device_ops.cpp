// Collectives of CUDA tensors that have a device path (backend/device_path.h:
// our IPC kernels on one node, NCCL across nodes): allreduce, and the single
// tensor reduce_scatter_tensor, all_gather_into_tensor and broadcast (what
// DDP's start-up and FSDP use). Where no device path applies, each falls
// back inside its body to pinned host staging over UCX. The other ops are
// staged from the start (host_staging.h). Stream semantics: device_call.h.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "algorithms/chain_broadcast.h"
#include "algorithms/checks/collective_check.h"
#include "algorithms/device/ring.h"
#include "algorithms/device/two_level.h"
#include "algorithms/record_allgather.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/scatter_gather.h"
#include "algorithms/allreduce.h"
#include "backend/device_call.h"
#include "backend/host_staging.h"
#include "backend/process_group_ring.h"
#include "backend/contiguous_buffers.h"
#include "backend/tensor_checks.h"
#include "core/observe/log.h"

namespace ringreduce {

namespace {

bool usableInPlace(const at::Tensor& t) { return t.is_contiguous() && !t.is_conj() && !t.is_neg(); }

// A pinned host copy of a device tensor, queued on the current stream.
at::Tensor toHost(const at::Tensor& device) {
  at::Tensor host = pinnedLike(device);
  host.copy_(device, /*non_blocking=*/true);
  return host;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueueOnDevice(
    c10d::OpType type, const char* name, std::chrono::milliseconds timeout,
    const at::Tensor& output, std::vector<at::Tensor> touched, const std::string& summary,
    DeviceBody body, CheckedArgs checked, bool onDevice) {
  const c10::Device device = output.device();
  refuseCapture(name, device);
  {
    // The device path binds the group to one GPU, as a NCCL communicator does.
    std::lock_guard<std::mutex> lock(deviceMutex_);
    if (!groupDevice_) groupDevice_ = device;
    TORCH_CHECK_VALUE(*groupDevice_ == device, "ringreduce: ", name, " on rank ", rank_,
                      ": tensor on ", device, ", but this group's CUDA collectives run on ",
                      *groupDevice_,
                      "; use one GPU per rank (torch.cuda.set_device("
                      "local_rank) before init_process_group)");
  }
  const c10::Stream stream = internalStream(device);
  const std::chrono::milliseconds limit =
      timeout == c10d::kUnsetTimeout ? this->timeout() : timeout;
  const DevicePath::Call call{fingerprintWord(fingerprintOf(type, {output}, checked)), limit};
  const c10::Stream current = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
  orderAfterLastDeviceOp(current, stream, false);
  HostStaging staging(device, stream, CallSite{name, rank_});
  for (const at::Tensor& t : touched) staging.onDevice(t);
  return staging.run([&](const Staged& staged) {
    return enqueue(
        staged, type, name, timeout, {output}, summary,
        [this, device, stream, call, body = std::move(body)](const OpContext& ctx) {
          // Part 0's message slots carry the device path's exchanges; part 1
          // is the host fallback's own sequence number, so no ring message
          // can meet an exchange record.
          auto round = std::make_shared<uint32_t>(0);
          RecordExchange exchange = [this, ctx, round](const void* mine, void* all, size_t bytes) {
            exchangeRecords(comm(), ctx, (*round)++, mine, all, bytes);
          };
          DevicePath* path = nullptr;
          if (DevicePath::compiled()) {
            if (!devicePath_) {
              DevicePath::Hooks hooks;
              hooks.fail = [this](const std::string& reason) {
                engine_->abort("ringreduce: process group '" + groupName_ + "': " + reason);
              };
              hooks.givenUp = [this] { return engine_->givenUp(); };
              devicePath_ = std::make_unique<DevicePath>(
                  rank_, size_, device, config_, exchange, std::move(hooks),
                  engine_->comm().transport.carriesDeviceMemory());
              devicePathMade_ = devicePath_.get();
            }
            path = devicePath_.get();
          }
          body(ctx, DeviceStep{path, stream, exchange, call});
        },
        checked, kDeviceSeqCount, !onDevice);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduceOnDevice(
    const at::Tensor& tensor, const Reduction& red, const c10d::AllreduceOptions& opts) {
  const CheckedArgs checked{-1, checkedReduceOp(red)};
  if (usableInPlace(tensor)) {
    auto work = runDeviceOnCaller(
        c10d::OpType::ALLREDUCE, "allreduce", opts.timeout, tensor,
        fieldsOf(tensor, checked.reduceOp),
        fingerprintOf(c10d::OpType::ALLREDUCE, tensor, checked), DevicePath::OnCaller::Allreduce,
        tensor.nbytes(), red.type, red.op,
        [&](DevicePath& path, const c10::Stream& stream, const DevicePath::Call& call) {
          return path.allreduceOnCaller(tensor, red.type, red.op, stream, call);
        });
    if (work) return work;
  }
  return enqueueOnDevice(
      c10d::OpType::ALLREDUCE, "allreduce", opts.timeout, tensor, {tensor},
      describeTensor(tensor) + " " + reductionName(red),
      [this, tensor, red](const OpContext& ctx, const DeviceStep& step) {
        const bool direct = usableInPlace(tensor);
        const at::Tensor flat = direct ? tensor : contiguousInput(tensor);
        if (step.path) {
          const auto runRing = [&] {
            DeviceRingArgs args{flat.data_ptr(), static_cast<size_t>(flat.numel()), red.type,
                                red.op};
            args.wire = config_.deviceRingWire();
            // In two levels on equal nodes of several ranks, else flat.
            deviceTwoLevelAllreduce(comm(), ctx.part(1), args, step.path->nodes(),
                                    *step.path->ringSteps(step.stream));
          };
          DevicePathTaken ran = DevicePathTaken::HostStaging;
          if (cudaTuner_ && step.path->ringOrNccl(red.type, red.op, step.exchange, step.call)) {
            // Across nodes, by default (RINGREDUCE_CUDA_AUTOTUNE=1, or
            // RINGREDUCE_AUTOTUNE=1): the device ring or NCCL, whichever the
            // size class's trials found faster on every rank.
            // A trial is timed on the device (marks on the stream around
            // either candidate), so both are timed alike.
            const size_t bytes = flat.nbytes();
            const auto clock = cudaTuner_->onTrial(bytes)
                                   ? step.path->trialClock(step.stream, ctx)
                                   : nullptr;
            cudaTuner_->allreduce(
                comm(), ctx.part(1), bytes,
                [&](const Comm& settings) {
                  ran = step.path->allreduceAcross(settings.config.cudaAlgorithm, flat, red.type,
                                                   red.op, step.stream);
                  if (ran == DevicePathTaken::DeviceRing) runRing();
                },
                clock.get());
          } else {
            ran = step.path->allreduce(flat, red.type, red.op, step.stream, step.exchange,
                                       step.call);
            if (ran == DevicePathTaken::DeviceRing) runRing();
          }
          if (ranOnDevice(ran) || ran == DevicePathTaken::DeviceRing) {
            if (!direct) tensor.copy_(flat);
            RR_LOG(Trace, rank_, ctx.describe() << " ran on the device: " << nameOf(ran));
            return;
          }
        }
        at::Tensor host = toHost(flat);
        waitForStream(step.stream, ctx, "copy the tensor to the host");
        hostAllreduce(comm(), ctx.part(1),
                      {host.data_ptr(), static_cast<size_t>(host.numel()), red.type, red.op});
        tensor.copy_(host, /*non_blocking=*/true);
      },
      checked,
      DevicePath::flagsCheckIt(config_, DevicePath::OnCaller::Allreduce, tensor.nbytes(), size_,
                               red.type, red.op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::broadcastOnDevice(
    const at::Tensor& tensor, int root, std::chrono::milliseconds timeout) {
  return enqueueOnDevice(
      c10d::OpType::BROADCAST, "broadcast", timeout, tensor, {tensor},
      describeTensor(tensor) + " from root " + std::to_string(root),
      [this, tensor, root](const OpContext& ctx, const DeviceStep& step) {
        const bool direct = usableInPlace(tensor);
        const at::Tensor flat = direct ? tensor : contiguousInput(tensor);
        if (step.path &&
            ranOnDevice(step.path->broadcast(flat, root, step.stream, step.exchange, step.call))) {
          if (!direct) tensor.copy_(flat);
          return;
        }
        at::Tensor host = toHost(flat);
        waitForStream(step.stream, ctx, "copy the tensor to the host");
        chainBroadcast(comm(), ctx.part(1), {host.data_ptr(), host.nbytes(), root});
        tensor.copy_(host, /*non_blocking=*/true);
      },
      CheckedArgs{root});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgatherOnDevice(
    const at::Tensor& output, const at::Tensor& input, std::chrono::milliseconds timeout) {
  if (usableInPlace(output) && usableInPlace(input)) {
    auto work = runDeviceOnCaller(
        c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", timeout, output,
        fieldsOf(input), fingerprintOf(c10d::OpType::_ALLGATHER_BASE, output, {}),
        DevicePath::OnCaller::Allgather, input.nbytes(), DataType::UInt8, ReduceOp::Sum,
        [&](DevicePath& path, const c10::Stream& stream, const DevicePath::Call& call) {
          return path.allgatherOnCaller(input, output, stream, call);
        });
    if (work) return work;
  }
  return enqueueOnDevice(
      c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", timeout, output, {output, input},
      describeTensor(input), [this, output, input](const OpContext& ctx, const DeviceStep& step) {
        const at::Tensor in = contiguousInput(input);
        const bool direct = usableInPlace(output);
        const at::Tensor out =
            direct ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
        if (step.path) {
          const DevicePathTaken ran =
              step.path->allgather(in, out, step.stream, step.exchange, step.call);
          if (ran == DevicePathTaken::DeviceRing) {
            deviceRingAllgather(comm(), ctx.part(1), {in.data_ptr(), out.data_ptr(), in.nbytes()},
                                *step.path->ringSteps(step.stream));
          }
          if (ranOnDevice(ran) || ran == DevicePathTaken::DeviceRing) {
            if (!direct) output.copy_(out);
            return;
          }
        }
        at::Tensor hostIn = toHost(in);
        at::Tensor hostOut = pinnedLike(out);
        waitForStream(step.stream, ctx, "copy the input to the host");
        hostAllgather(comm(), ctx.part(1),
                      {hostIn.data_ptr(), hostOut.data_ptr(), hostIn.nbytes()});
        output.copy_(hostOut, /*non_blocking=*/true);
      },
      {},
      DevicePath::flagsCheckIt(config_, DevicePath::OnCaller::Allgather, input.nbytes(), size_,
                               DataType::UInt8, ReduceOp::Sum));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduceScatterOnDevice(
    const at::Tensor& output, const at::Tensor& input, const Reduction& red,
    std::chrono::milliseconds timeout) {
  if (usableInPlace(output) && usableInPlace(input)) {
    const CheckedArgs checked{-1, checkedReduceOp(red)};
    auto work = runDeviceOnCaller(
        c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", timeout, output,
        fieldsOf(output, checked.reduceOp),
        fingerprintOf(c10d::OpType::_REDUCE_SCATTER_BASE, output, checked),
        DevicePath::OnCaller::ReduceScatter, output.nbytes(), red.type, red.op,
        [&](DevicePath& path, const c10::Stream& stream, const DevicePath::Call& call) {
          return path.reduceScatterOnCaller(input, output, red.type, red.op, stream, call);
        });
    if (work) return work;
  }
  return enqueueOnDevice(
      c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", timeout, output, {output, input},
      describeTensor(output) + " " + reductionName(red),
      [this, output, input, red](const OpContext& ctx, const DeviceStep& step) {
        const at::Tensor in = contiguousInput(input);
        const bool direct = usableInPlace(output);
        const at::Tensor out =
            direct ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
        if (step.path) {
          const DevicePathTaken ran = step.path->reduceScatter(in, out, red.type, red.op,
                                                               step.stream, step.exchange,
                                                               step.call);
          if (ran == DevicePathTaken::DeviceRing) {
            // The ring reduces into its input: a copy, unless `in` is one
            // already, so the caller's input stays as it was.
            const at::Tensor scratch = in.data_ptr() == input.data_ptr() ? in.clone() : in;
            deviceRingReduceScatter(comm(), ctx.part(1),
                                    {scratch.data_ptr(), static_cast<size_t>(scratch.numel()),
                                     red.type, red.op, out.data_ptr()},
                                    *step.path->ringSteps(step.stream));
          }
          if (ranOnDevice(ran) || ran == DevicePathTaken::DeviceRing) {
            if (!direct) output.copy_(out);
            return;
          }
        }
        at::Tensor hostIn = toHost(in);  // a copy: the caller's input stays as it was
        at::Tensor hostOut = pinnedLike(out);
        waitForStream(step.stream, ctx, "copy the input to the host");
        reduceScatterFlat(ctx.part(1), hostIn.reshape({-1}), hostOut, red.type, red.op);
        output.copy_(hostOut, /*non_blocking=*/true);
      },
      CheckedArgs{-1, checkedReduceOp(red)},
      DevicePath::flagsCheckIt(config_, DevicePath::OnCaller::ReduceScatter, output.nbytes(), size_,
                               red.type, red.op));
}

}  // namespace ringreduce
