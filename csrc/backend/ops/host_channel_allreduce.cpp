// Small allreduces of CPU tensors on one host, run from the caller's thread.
//
// Where the caller waits for the result at once (async_op=False), the group
// has a host channel (transport/host/host_channel.h) and the tensor fits its
// buffers, the collective goes past the queue
// (Engine::runOnCaller): no Work with a Future and callbacks, no task on the
// executor, no thread hand-off; the caller copies its input into the
// channel, spins on its peers' flags and reduces, the way MPI and DeepSpeed
// run a small allreduce. It is numbered, traced and announced like any
// collective, and fails the group the same way. Behind queued work, inside a
// coalescing block or with RINGREDUCE_CHECK_COLLECTIVES the engine declines
// and the op is queued; its body then takes the same channel (hostAllreduce
// chooses it first), so every rank runs the same algorithm whichever way
// each ran it. runOnHostChannel is what every such on-caller form shares (the
// other collectives' are in host_channel_collectives.cpp).
#include <algorithm>
#include <utility>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/host_channel/allreduce.h"
#include "backend/contiguous_buffers.h"
#include "backend/error_translation.h"
#include "backend/failed_work.h"
#include "backend/process_group_ring.h"
#include "backend/tensor_checks.h"
#include "backend/work_timing.h"
#include "core/base/errors.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace ringreduce {

const HostChannel* ProcessGroupRing::hostChannel() {
  try {
    engine_->needChannel();  // the first host collective opens it, queued
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  return engine_->channel();
}

bool ProcessGroupRing::throughHostChannel(size_t bytes) {
  return hostChannel() != nullptr && hostChannelAllreduceApplies(engine_->callerComm(), bytes);
}

ProcessGroupRing::HostChannelResult ProcessGroupRing::runOnHostChannel(
    c10d::OpType type, const char* name, const CallOptions& call,
    const CollectiveFingerprint& fingerprint, const OpFields& fields, const at::Tensor& output,
    HostChannelBody body, bool mayPublishAhead) {
  const Comm c = engine_->callerComm();
  const std::chrono::milliseconds limit =
      call.timeout == c10d::kUnsetTimeout ? this->timeout() : call.timeout;
  CallerTimer timer(timing_.load(std::memory_order_relaxed), output);
  uint64_t seq = 0;
  // Where the peers are late: this rank's input up before the op is queued.
  const auto ahead = [&](const OpContext& ctx) { body(c, ctx); };
  const Engine::LaunchRef aheadRef(ahead);
  try {
    // An asynchronous caller runs it here only where its peers are in it
    // already: it must not wait for a peer that waits for it elsewhere.
    seq = engine_->runOnCaller(
        name, limit, fingerprint, fields,
        [&](const OpContext& ctx) {
          timer.begin(ctx);
          body(c, ctx);
          timer.end();
        },
        !call.callerWaits, mayPublishAhead && !call.callerWaits ? &aheadRef : nullptr);
  } catch (const InvalidArgument&) {
    std::rethrow_exception(translateCurrentException());  // ValueError, as a queued call's
  } catch (...) {
    // The group is unusable now, its peers told and its flight recorder
    // written (Engine::runOnCaller). As a queued op's Work raises it
    // (DistBackendError for a timeout or a peer's failure): at once to a
    // caller that waits, from its Work's wait() to an asynchronous one.
    if (call.callerWaits) std::rethrow_exception(translateCurrentException());
    return c10::make_intrusive<FailedWork>(rank_, type, engine_->sequenceNumber(),
                                           translateCurrentException());
  }
  if (seq == 0) return std::nullopt;
  // The result is in the caller's tensors already. torch waits on a
  // returned Work, and returning none is how a backend that "has synced at
  // the C++ level" says so (distributed_c10d.py): no Work to make, convert
  // for Python and wait on, a microsecond of a small collective. Except
  // where the caller keeps the Work (async_op=True, a functional collective:
  // a completed one) or torch keeps the Work of every collective for a
  // compiled graph's inputs (allow_inflight_collective_as_graph_input).
  if (call.callerWaits && !c10d::allow_inflight_collective_as_graph_input()) {
    noteCompletedOnCaller(type, seq, timer.timing());
    return c10::intrusive_ptr<c10d::Work>();
  }
  return finishOnCaller(type, seq, output, std::nullopt, timer.timing());
}

std::optional<c10::intrusive_ptr<c10d::Work>> ProcessGroupRing::allreduceOnHostChannel(
    const at::Tensor& tensor, const Reduction& red, const CallOptions& call) {
  const size_t bytes = tensor.nbytes();
  if (!runsOnCaller(call, bytes, throughHostChannel(bytes))) return std::nullopt;
  const int reduceOp = checkedReduceOp(red);
  return runOnHostChannel(
      c10d::OpType::ALLREDUCE, "allreduce", call,
      fingerprintOf(c10d::OpType::ALLREDUCE, tensor, CheckedArgs{-1, reduceOp}),
      fieldsOf(tensor, reduceOp), tensor, [&](const Comm& c, const OpContext& ctx) {
        if (red.premul) tensor.mul_(*red.premul);  // the result replaces it anyway
        withContiguous(tensor, [&](void* data) {
          hostAllreduce(c, ctx, {data, static_cast<size_t>(tensor.numel()), red.type, red.op});
        });
      },
      !red.premul);
}

namespace {

// The caller's tensors themselves as the coalesced message's segments
// (hostChannelAllreduceSegments), where that gives the fused buffer's
// result: each tensor's memory its values in order, no two sharing a byte
// (the fused copy reduces each once and writes back in order), and no
// premultiplication (the fused copy takes it, so a failed call leaves the
// tensors as they were). Otherwise nothing: the fused buffer.
// A tensor that starts where the one before it in the call ends (views of
// one flat buffer, as a coalescing manager's tensors often are) extends
// that segment: one copy and one reduction instead of one per tensor.
// World 2 on the 2-vCPU EPYC Zen 4 VM, four 16 B views in torch's
// coalescing manager (benchmarks/small_path_breakdown.py --form coalesced
// --sizes 64, rank 0, medians of 3000 calls): the copy in 0.44 -> 0.15 us,
// the reduction 0.23 -> 0.10; with the single dtype checked once
// (coalesced.cpp) the whole call 1.5-1.9 -> 1.2 us above torch's fake
// backend's.
std::optional<std::vector<AllreduceSegment>> segmentsOf(const std::vector<at::Tensor>& tensors,
                                                        const Reduction& red) {
  if (red.premul) return std::nullopt;
  std::vector<AllreduceSegment> segments;
  segments.reserve(tensors.size());
  const size_t esize = static_cast<size_t>(tensors[0].element_size());
  for (const at::Tensor& t : tensors) {
    if (!plainContiguous(t)) return std::nullopt;
    auto* data = static_cast<char*>(t.data_ptr());
    const auto count = static_cast<size_t>(t.numel());
    if (count == 0) continue;  // adds nothing to the message, and shares no byte
    if (!segments.empty()) {
      AllreduceSegment& last = segments.back();
      if (static_cast<char*>(last.data) + last.count * esize == data) {
        last.count += count;
        continue;
      }
    }
    segments.push_back({data, count});
  }
  if (segments.size() > 1) {
    std::vector<std::pair<const char*, const char*>> spans;  // each segment's bytes
    spans.reserve(segments.size());
    for (const AllreduceSegment& s : segments) {
      const auto* begin = static_cast<const char*>(s.data);
      spans.emplace_back(begin, begin + s.count * esize);
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first < spans[i - 1].second) return std::nullopt;
    }
  }
  return segments;
}

}  // namespace

std::optional<c10::intrusive_ptr<c10d::Work>> ProcessGroupRing::allreduceCoalescedOnHostChannel(
    const std::vector<at::Tensor>& tensors, const Reduction& red, const CallOptions& call) {
  size_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += t.nbytes();
  if (!runsOnCaller(call, bytes, throughHostChannel(bytes))) return std::nullopt;
  const int reduceOp = checkedReduceOp(red);
  // As the queued form fingerprints it (enqueue: the outputs' dtype and
  // their elements together), so that ranks that ran it either way agree.
  const CollectiveFingerprint fingerprint =
      fingerprintOf(c10d::OpType::COALESCED, tensors, CheckedArgs{-1, reduceOp});
  OpFields fields = fieldsOf(tensors[0], reduceOp);
  fields.count = static_cast<uint64_t>(fingerprint.numel);
  return runOnHostChannel(c10d::OpType::COALESCED, "allreduce_coalesced", call, fingerprint,
                          fields, tensors[0], [&](const Comm& c, const OpContext& ctx) {
                            if (auto segments = segmentsOf(tensors, red)) {
                              // (The dtype and op are supported: checkReduction
                              // raised otherwise.) The same turns as the fused buffer's
                              // hostAllreduce (the channel, as runsOnCaller
                              // checked), without the fused buffer.
                              return hostChannelAllreduceSegments(c, ctx, red.type, red.op,
                                                                  segments->data(),
                                                                  segments->size());
                            }
                            at::Tensor flat = flattenList(tensors);
                            if (red.premul) flat.mul_(*red.premul);
                            hostAllreduce(c, ctx,
                                          {flat.data_ptr(), static_cast<size_t>(flat.numel()),
                                           red.type, red.op});
                            if (!ctx.stoppedAhead()) unflattenInto(flat, tensors);
                          });
}

}  // namespace ringreduce
