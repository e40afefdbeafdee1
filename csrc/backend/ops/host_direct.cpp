// Small allreduces of CPU tensors on one host, run from the caller's thread.
//
// Where the caller waits for the result at once (async_op=False), the group
// has a host channel (transport/host/host_channel.h) and the tensor fits its
// buffers, the collective goes past the queue
// (Engine::runDirect): no Work with a Future and callbacks, no task on the
// executor, no thread hand-off; the caller copies its input into the
// channel, spins on its peers' flags and reduces, the way MPI and DeepSpeed
// run a small allreduce. It is numbered, traced and announced like any
// collective, and fails the group the same way. Behind queued work, inside a
// coalescing block or with RINGREDUCE_CHECK_COLLECTIVES the engine declines
// and the op is queued; its body then takes the same channel (hostAllreduce
// chooses it first), so every rank runs the same algorithm whichever way
// each ran it.
#include "algorithms/allreduce.h"
#include "algorithms/shared_memory_allreduce.h"
#include "backend/contiguous_buffers.h"
#include "backend/error_translation.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/work_timing.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace ringreduce {

bool ProcessGroupRing::throughHostChannel(size_t bytes) {
  try {
    engine_->needChannel();  // the first host collective opens it, queued
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  return engine_->channel() != nullptr &&
         sharedMemoryAllreduceApplies(engine_->directComm(), bytes);
}

std::optional<c10::intrusive_ptr<c10d::Work>> ProcessGroupRing::allreduceOnHostDirect(
    const at::Tensor& tensor, const Reduction& red, const CallOptions& call) {
  // Only for a caller that waits at once (async_op=False): an asynchronous
  // one (DDP's buckets) gets its Work back before its peers arrive.
  if (!call.callerWaits || !throughHostChannel(tensor.nbytes())) return std::nullopt;
  const Comm c = engine_->directComm();
  const std::chrono::milliseconds limit =
      call.timeout == c10d::kUnsetTimeout ? this->timeout() : call.timeout;
  const int reduceOp = checkedReduceOp(red);
  DirectTimer timer(timing_.load(std::memory_order_relaxed), tensor);
  uint64_t seq = 0;
  try {
    seq = engine_->runDirect(
        "allreduce", limit,
        fingerprintOf(c10d::OpType::ALLREDUCE, tensor, CheckedArgs{-1, reduceOp}),
        fieldsOf(tensor, reduceOp), [&](const OpContext& ctx) {
          timer.begin(ctx);
          if (red.premul) tensor.mul_(*red.premul);  // the result replaces it anyway
          withContiguous(tensor, [&](void* data) {
            hostAllreduce(c, ctx, {data, static_cast<size_t>(tensor.numel()), red.type, red.op});
          });
          timer.end();
        });
  } catch (...) {
    // As a queued op's Work raises it: DistBackendError for a timeout or a
    // peer's failure, ValueError for bad arguments.
    std::rethrow_exception(translateCurrentException());
  }
  if (seq == 0) return std::nullopt;
  // The result is in the caller's tensor already. torch's all_reduce waits
  // on a returned Work, and returning none is how a backend that "has
  // synced at the C++ level" says so (distributed_c10d.py): no Work to make,
  // convert for Python and wait on, a microsecond of a small collective.
  // Except where torch keeps the Work of every collective for a compiled
  // graph's inputs (allow_inflight_collective_as_graph_input).
  if (!c10d::allow_inflight_collective_as_graph_input()) {
    noteDirectCompleted(c10d::OpType::ALLREDUCE, seq, timer.timing());
    return c10::intrusive_ptr<c10d::Work>();
  }
  return finishDirect(c10d::OpType::ALLREDUCE, seq, tensor, std::nullopt, timer.timing());
}

}  // namespace ringreduce
