// Collectives of a group of one rank. Every result is the rank's own input,
// so there is nothing to send and nothing to wait for: the op is checked as
// at any size (so a program that works on one GPU fails the same way it
// would on eight), its sequence number advances, the trace records it, the
// copy an out-of-place op needs goes on the caller's stream as any torch op,
// and a completed Work returns. It goes through the engine only to take its
// turn: behind queued collectives (whose results it may read), inside a
// coalescing block, or with RINGREDUCE_CHECK_COLLECTIVES the engine declines
// and the op is queued as at any size. Every host collective takes this
// way (copiesAlone for all but the four below): queued, the list, uneven
// and coalesced forms cost 5-40 us more a call than torch's fake backend
// on the 2-vCPU EPYC Zen 4 (the worker's hand-off, a coalescing block's
// second one), 0.1-1.4 us run here at 64 B (benchmarks/history/2026-12-05-world-one.md).
// A CUDA call of those forms is still staged and queued.
#include "backend/caller_work.h"
#include "backend/contiguous_buffers.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <optional>

namespace ringreduce {

template <typename Fn>
c10::intrusive_ptr<c10d::Work> ProcessGroupRing::runAlone(c10d::OpType type, const char* name,
                                                          std::chrono::milliseconds timeout,
                                                          const at::Tensor& output,
                                                          const CollectiveFingerprint& fingerprint,
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
  const uint64_t seq = engine_->runOnCaller(name, limit, fingerprint,
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
  const CheckedArgs checked{-1, checkedReduceOp(red)};
  return runAlone(c10d::OpType::ALLREDUCE, "allreduce", timeout, tensor,
                  fingerprintOf(c10d::OpType::ALLREDUCE, tensor, checked),
                  fieldsOf(tensor, checkedReduceOp(red)), [&] {
                    // The sum of one PREMUL_SUM input is that input times its factor.
                    if (red.premul) tensor.mul_(*red.premul);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::reduceScatterAlone(
    const at::Tensor& output, const at::Tensor& input, const Reduction& red,
    std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  const CheckedArgs checked{-1, checkedReduceOp(red)};
  return runAlone(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", timeout, output,
                  fingerprintOf(c10d::OpType::_REDUCE_SCATTER_BASE, output, checked),
                  fieldsOf(output, checkedReduceOp(red)), [&] {
                    output.copy_(input.reshape(output.sizes()));
                    if (red.premul) output.mul_(*red.premul);
                  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::allgatherAlone(const at::Tensor& output,
                                                                const at::Tensor& input,
                                                                std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", timeout, output,
                  fingerprintOf(c10d::OpType::_ALLGATHER_BASE, output, CheckedArgs{}),
                  fieldsOf(input),
                  [&] { output.copy_(input.reshape(output.sizes())); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::broadcastAlone(const at::Tensor& tensor,
                                                                std::chrono::milliseconds timeout) {
  if (size_ != 1) return nullptr;
  return runAlone(c10d::OpType::BROADCAST, "broadcast", timeout, tensor,
                  fingerprintOf(c10d::OpType::BROADCAST, tensor, CheckedArgs{0}),
                  fieldsOf(tensor, -1, 0), [] {});
}

namespace {

// Whether `a` and `b` are the same elements in the same order (a copy
// between them changes nothing).
bool sameElements(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.nbytes() == b.nbytes() &&
         a.scalar_type() == b.scalar_type() && plainContiguous(a) && plainContiguous(b);
}

// outputs[i] = inputs[i] (times PREMUL_SUM's factor where `red` has one).
// Plain memory of one dtype is copied as bytes: through torch's copy_ a
// 64 B call was 0.2 us slower than the world-1 channel's memcpy for one
// tensor, and all_gather_coalesced of four 3.9 us slower than with memcpy.
void copyEach(at::TensorList outputs, at::TensorList inputs, const Reduction* red) {
  std::vector<at::Tensor> from(inputs.begin(), inputs.end());
  if (red != nullptr && red->premul) {
    // Every input scaled into a tensor of its own before any output is
    // written: a tensor given twice (allreduce_coalesced) is scaled once.
    for (at::Tensor& in : from) in = premultiplied(in, *red);
  }
  // An input that shares memory with an output it is not is read from a
  // copy: an earlier copy may write there (one pair: compared directly).
  std::optional<MemorySpans> written;
  if (outputs.size() > 1) written.emplace(outputs);
  const auto overlapsAnOutput = [&](const at::Tensor& in) {
    return written ? written->overlaps(in) : sharesMemory(outputs[0], in);
  };
  for (size_t i = 0; i < from.size(); ++i) {
    if (!sameElements(outputs[i], from[i]) && overlapsAnOutput(from[i])) {
      from[i] = from[i].clone(at::MemoryFormat::Contiguous);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    at::Tensor out = outputs[i];
    const at::Tensor& in = from[i];
    if (sameElements(out, in)) {
      // nothing to copy
    } else if (out.is_cpu() && in.is_cpu() && plainContiguous(out) && plainContiguous(in) &&
               out.scalar_type() == in.scalar_type()) {
      if (in.nbytes() > 0) std::memcpy(out.data_ptr(), in.data_ptr(), in.nbytes());
    } else {
      out.copy_(in.reshape(out.sizes()));
    }
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::copiesAlone(
    c10d::OpType type, const char* name, std::chrono::milliseconds timeout,
    at::TensorList outputs, at::TensorList inputs, const CheckedArgs& checked,
    const Reduction* red) {
  if (size_ != 1 || outputs.size() != inputs.size()) return nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].numel() != inputs[i].numel()) return nullptr;
  }
  const at::Tensor first = outputs.empty() ? at::Tensor() : outputs.front();
  return runAlone(type, name, timeout, first, fingerprintOf(type, outputs, checked),
                  outputs.empty() ? OpFields{} : fieldsOf(first, checked.reduceOp, checked.root),
                  [&] { copyEach(outputs, inputs, red); });
}

}  // namespace ringreduce
