// Collectives of a group of one rank. Every result is the rank's own input,
// so there is nothing to send and nothing to wait for: the op is checked as
// at any size (so a program that works on one GPU fails the same way it
// would on eight), its sequence number advances, the trace records it, the
// copy an out-of-place op needs goes on the caller's stream as any torch op,
// and a completed Work returns. It goes through the engine only to take its
// turn: behind queued collectives (whose results it may read), inside a
// coalescing block, or with RINGREDUCE_CHECK_COLLECTIVES the engine declines
// and the op is queued as at any size.
#include "backend/caller_work.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace ringreduce {

template <typename Fn>
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::runAlone(c10d::OpType type, const char* name,
                                                          std::chrono::milliseconds timeout,
                                                          const at::Tensor& output,
                                                          const CheckedArgs& checked,
                                                          const OpFields& fields,
                                                          const Fn& body) {
  const std::chrono::milliseconds limit =
      timeout == c10d::kUnsetTimeout ? this->timeout() : timeout;
  // A CUDA op goes (if anywhere) on the caller's current stream.
  std::optional<c10::Stream> queuedOn;
  if (output.is_cuda()) {
    queuedOn = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(output.device());
  }
  // Timed, a CUDA op gets events on its stream, unless the stream is being
  // captured into a CUDA graph (the events would go into the graph).
  const bool timed = timing_.load(std::memory_order_relaxed);
  const bool capturing = timed && queuedOn && DevicePath::capturing(*queuedOn);
  CallerTimer timer(timed, output, capturing ? std::nullopt : queuedOn);
  const uint64_t seq = engine_->runOnCaller(name, limit, fingerprintOf(type, output, checked),
                                            fields, [&](const OpContext& op) {
                                            timer.begin(op);
                                            body();
                                            timer.end();
                                          });
  if (seq == 0) return nullptr;
  return finishOnCaller(type, seq, output, queuedOn, timer.timing());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allreduceAlone(
    const at::Tensor& tensor, const Reduction& red, std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::ALLREDUCE, "allreduce", timeout, tensor,
                  CheckedArgs{-1, checkedReduceOp(red)}, fieldsOf(tensor, checkedReduceOp(red)), [&] {
                    // The sum of one PREMUL_SUM input is that input times its factor.
                    if (red.premul) tensor.mul_(*red.premul);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduceScatterAlone(
    const at::Tensor& output, const at::Tensor& input, const Reduction& red,
    std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", timeout, output,
                  CheckedArgs{-1, checkedReduceOp(red)}, fieldsOf(output, checkedReduceOp(red)), [&] {
                    output.copy_(input.reshape(output.sizes()));
                    if (red.premul) output.mul_(*red.premul);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgatherAlone(const at::Tensor& output,
                                                                const at::Tensor& input,
                                                                std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", timeout, output,
                  CheckedArgs{}, fieldsOf(input),
                  [&] { output.copy_(input.reshape(output.sizes())); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::broadcastAlone(const at::Tensor& tensor,
                                                                std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::BROADCAST, "broadcast", timeout, tensor, CheckedArgs{0},
                  fieldsOf(tensor, -1, 0), [] {});
}

}  // namespace ringreduce
