// CUDA collectives from the caller's thread, on the caller's stream, with
// no host step (the device-flags path, auto's choice on one node, once it is
// set up): what makes a small allreduce cost a kernel launch instead of
// two thread hand-offs, four event records and three host message rounds,
// and what lets a CUDA graph capture it. The Work completes at once, as
// NCCL's does: its future carries the caller's stream, so wait() orders
// the caller's later work after the collective, on the device.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "backend/caller_work.h"
#include "backend/dtype_mapping.h"
#include "backend/error_translation.h"
#include "backend/process_group_ring.h"
#include "backend/stream_order.h"
#include "core/base/errors.h"

namespace ringreduce {

namespace {

const c10::impl::DeviceGuardImplInterface* cudaImpl() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

}  // namespace

void ProcessGroupRing::refuseCapture(const char* name, c10::Device device) {
  if (!device.is_cuda()) return;
  const c10::Stream current = cudaImpl()->getStream(device);
  if (!DevicePath::capturing(current)) return;
  TORCH_CHECK(false, "ringreduce: ", name, " on rank ", rank_,
              " cannot be captured in a CUDA graph: only allreduce, all_gather_into_tensor "
              "and reduce_scatter_tensor on the device-flags path can be "
              "(every rank on one node, RINGREDUCE_CUDA_ALGO auto or flags, tensors within "
              "RINGREDUCE_CUDA_BUFFER_BYTES, one "
              "collective run before capture to set it up); this one would run outside the "
              "graph and never on replay");
}

void ProcessGroupRing::orderAfterLastDeviceOp(const c10::Stream& issuedOn,
                                              const c10::Stream& runsOn, bool capturing) {
  std::lock_guard<std::mutex> lock(deviceMutex_);
  // The device collectives of a group share its counters and buffers, so
  // they must run one after another. On one stream they do; across streams
  // the new one waits for the previous one's stream. (Not while capturing:
  // a graph cannot wait on work outside it, and torch.cuda.graph
  // synchronises the device before capture.)
  if (lastDeviceStream_ && !capturing) streamWaitsFor(issuedOn, *lastDeviceStream_);
  lastDeviceStream_ = runsOn;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::runDeviceOnCaller(
    c10d::OpType type, const char* name, std::chrono::milliseconds timeout,
    const at::Tensor& output, const OpFields& fields,
    const CollectiveFingerprint& fingerprint, DevicePath::OnCaller kind, size_t bytes,
    DataType dtype, ReduceOp op, CallerLaunch launch) {
  const c10::Device device = output.device();
  const c10::Stream stream = cudaImpl()->getStream(device);
  const bool capturing = DevicePath::capturing(stream);
  DevicePath* path = devicePathMade_.load();
  const bool flags = config_.cudaDeviceFlags;
  const bool applies = flags && path != nullptr && path->device() == device &&
                       path->onCallerApplies(kind, bytes, dtype, op);
  if (capturing) {
    std::string why;
    if (!flags) {
      why = "CUDA graphs capture ringreduce collectives on the device-flags path only "
            "(every rank on one node, RINGREDUCE_CUDA_ALGO auto or flags)";
    } else if (path == nullptr) {
      why = "the device-flags path is set up by the group's first CUDA collective: run one "
            "before capture";
    } else if (!path->capturable(&why)) {
      // `why` says it
    } else if (!applies) {
      why = "its " + std::to_string(bytes) + " bytes do not fit the group's buffers "
            "(RINGREDUCE_CUDA_BUFFER_BYTES), or its dtype and op have no device kernel";
    } else if (!engine_->canRunOnCaller()) {
      why = "earlier collectives of the group are still queued or running; wait for them "
            "before capture";
    }
    TORCH_CHECK(why.empty(), "ringreduce: ", name, " on rank ", rank_,
                " cannot be captured in a CUDA graph: ", why);
  }
  // Inside a coalescing block a device collective is held with the rest: the
  // block's Work carries the stream order its waiters need.
  if (!applies || engine_->coalescing()) return nullptr;
  const std::chrono::milliseconds limit =
      timeout == c10d::kUnsetTimeout ? this->timeout() : timeout;
  uint64_t seq = 0;
  // A captured collective is not timed (its events would go into the graph).
  CallerTimer timer(timing_.load(std::memory_order_relaxed), output,
                    capturing ? std::nullopt : std::optional<c10::Stream>(stream));
  try {
    seq = engine_->runOnCaller(name, limit, fingerprint, fields,
                               [&](const OpContext& op) {
                               orderAfterLastDeviceOp(stream, stream, capturing);
                               timer.begin(op);
                               // The engine hashed the fingerprint once for both.
                               const DevicePath::Call call{op.fingerprintWord, limit};
                               const DevicePathTaken ran = launch(*path, stream, call);
                               if (!ranOnDevice(ran)) {
                                 throw Error("ringreduce: the device-flags path did not run " +
                                             std::string(name) + " after accepting it");
                               }
                               timer.end();
                             },
                             false, nullptr, kDeviceSeqCount);
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  if (seq == 0) {
    // Something is queued ahead (or the group is failing): queue it too.
    TORCH_CHECK(!capturing, "ringreduce: ", name, " on rank ", rank_,
                " cannot be captured in a CUDA graph: earlier collectives of the group are "
                "still queued or running");
    return nullptr;
  }
  // Complete at once. Outside capture it carries the caller's stream
  // (wait() from another stream orders that one after the kernel, on the
  // device); a captured one completes on the host only, since no event may
  // be recorded into the graph for it.
  return finishOnCaller(type, seq, output,
                        capturing ? std::nullopt : std::optional<c10::Stream>(stream),
                        timer.timing());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::finishOnCaller(c10d::OpType type, uint64_t seq,
                                                                const at::Tensor& output,
                                                                std::optional<c10::Stream> queuedOn,
                                                                const CallerTiming& timing) {
  noteCompletedOnCaller(type, seq, timing);
  return c10::make_intrusive<CallerWork>(rank_, type, seq, output, queuedOn, timing);
}

void ProcessGroupRing::noteCompletedOnCaller(c10d::OpType type, uint64_t seq,
                                             const CallerTiming& timing) {
  if (!hooks_->active()) return;
  // The hooks read host times: the end as the timer read it, or now.
  const auto end = timing.finished != Clock::time_point{} ? timing.finished : Clock::now();
  hooks_->push(std::make_shared<c10d::WorkInfo>(
      type, seq, timing.started, end, std::chrono::duration<float>(end - timing.started)));
}

OpFields ProcessGroupRing::fieldsOf(const at::Tensor& tensor, int reduceOp, int root) {
  OpFields fields;
  if (isSupportedScalarType(tensor.scalar_type())) {
    fields.dtype = toDataType(tensor.scalar_type(), "trace");
    fields.count = static_cast<uint64_t>(tensor.numel());
  } else {  // moved as bytes (a gather, broadcast or send of any dtype)
    fields.dtypeName = c10::toString(tensor.scalar_type());  // static storage
    fields.count = static_cast<uint64_t>(tensor.numel());
  }
  fields.reduceOp = reduceOp;
  fields.root = root;
  if (tensor.is_cuda()) fields.device = tensor.device().index();
  return fields;
}

}  // namespace ringreduce
