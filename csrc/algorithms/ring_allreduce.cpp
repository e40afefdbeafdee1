// Pipelined ring reductions on a host buffer: reduce-scatter then allgather (ring_allreduce.h)
#include "algorithms/ring_allreduce.h"

#include "algorithms/wire_dtype.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/plan/chunk_layout.h"
#include "core/base/errors.h"
#include "core/math/host_reduce.h"
#include "core/plan/partition.h"
#include "core/observe/phase_recorder.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// Reduce-scatter receives in flight at once. Enough to keep the link busy
// while a segment is reduced; few enough that the scratch stays in cache.
constexpr size_t kReceiveWindow = 8;

// With shift d, reduce-scatter step s (0..n-2) sends chunk r-s+d and
// receives chunk r-s-1+d; after n-1 steps rank r holds the full result of
// chunk r+1+d. Allreduce uses d = 0 and continues with an allgather: step t
// (tag step n-1+t) sends chunk r+1-t and receives chunk r-t. Reduce-scatter
// alone uses d = -1, so that rank r ends with chunk r. Chunk i is
// chunkOf(count, n, i), or chunk i of a given layout (a phase of the
// two-level reduce-scatter, whose ranks own unequal parts).
class RingReduction {
 public:
  enum class Mode { Allreduce, ReduceScatter };

  // `avgDivisor` (0: none) divides each element in its last reduce step.
  RingReduction(Mode mode, Transport& transport, const OpContext& op, char* data,
                size_t count, DataType type, ReduceOp reduceOp, int avgDivisor,
                const Config& config, Workspace& workspace, const ChunkLayout* chunks)
      : allgather_(mode == Mode::Allreduce), shift_(allgather_ ? 0 : -1), t_(transport),
        op_(op), data_(data), count_(count), type_(type), reduceOp_(reduceOp),
        avgDivisor_(avgDivisor), n_(transport.size()), rank_(transport.rank()),
        left_((rank_ - 1 + n_) % n_), right_((rank_ + 1) % n_), esize_(elementSize(type)),
        payloadFree_(config.payloadFree), chunks_(chunks) {
    // Every chunk gets the largest one's number of segments; a smaller
    // chunk's last ones are short or empty. Two steps' worth of slots even
    // for a reduce-scatter, whose slots so stay below kRingPhaseSlots
    // (transport/tag.h).
    const size_t steps = 2 * static_cast<size_t>(n_ - 1);
    const size_t largest = chunks_ ? chunks_->largest() : chunkOf(count, n_, 0).count;
    plan_ = planSegments(largest, esize_, config.segmentBytes, (kMaxSlot + 1) / steps);
    rsTotal_ = static_cast<size_t>(n_ - 1) * plan_.segments;
    window_ = std::min(rsTotal_, kReceiveWindow);
    slotBytes_ = plan_.elemsPerSegment * esize_;
    scratch_ = static_cast<char*>(workspace.get(Workspace::kRecvA, window_ * slotBytes_));
  }

  void run() {
    const int n = n_;
    std::vector<Request> sends;
    sends.reserve(2 * rsTotal_);
    std::vector<Request> rsRecvs(rsTotal_);
    std::vector<std::vector<Request>> agRecvs(static_cast<size_t>(allgather_ ? n - 1 : 0));

    // Allgather receives land directly in their final place; no other step
    // writes those bytes after the data can arrive, so post them all now.
    for (int t = 0; allgather_ && t < n - 1; ++t) {
      for (size_t k = 0; k < plan_.segments; ++k) {
        const Range seg = segment(rank_ - t, k);
        agRecvs[t].push_back(t_.irecv(left_, tag(left_, n - 1 + t, k), at(seg), bytes(seg), op_));
      }
    }
    for (size_t i = 0; i < window_; ++i) postReduceScatterRecv(i, rsRecvs);
    for (size_t k = 0; k < plan_.segments; ++k) {
      const Range seg = segment(rank_ + shift_, k);
      sends.push_back(t_.isend(right_, tag(rank_, 0, k), at(seg), bytes(seg), op_));
    }

    for (int s = 0; s < n - 1; ++s) {
      const bool last = (s == n - 2);
      for (size_t k = 0; k < plan_.segments; ++k) {
        const size_t i = static_cast<size_t>(s) * plan_.segments + k;
        t_.wait(rsRecvs[i], op_);
        const Range seg = segment(rank_ - s - 1 + shift_, k);
        if (payloadFree_) {
          // Simulated run (transport/simulated/): sizes only, no data.
        } else if (last && avgDivisor_ != 0) {
          PhaseScope reducing(op_.phases, Phase::Reduce);
          reduceAndAverage(type_, at(seg), slot(i), seg.count, avgDivisor_);
        } else {
          PhaseScope reducing(op_.phases, Phase::Reduce);
          reduceInto(type_, reduceOp_, at(seg), slot(i), seg.count);
        }
        if (i + window_ < rsTotal_) postReduceScatterRecv(i + window_, rsRecvs);  // slot is free again
        // Step s+1 is the next reduce-scatter step, or allgather step 0.
        if (!last || allgather_) {
          sends.push_back(t_.isend(right_, tag(rank_, s + 1, k), at(seg), bytes(seg), op_));
        }
      }
    }

    for (int t = 0; allgather_ && t < n - 1; ++t) {
      for (size_t k = 0; k < plan_.segments; ++k) {
        t_.wait(agRecvs[t][k], op_);
        if (t + 1 < n - 1) {
          const Range seg = segment(rank_ - t, k);
          sends.push_back(t_.isend(right_, tag(rank_, n + t, k), at(seg), bytes(seg), op_));
        }
      }
    }
    t_.waitAll(sends, op_);
  }

 private:
  // Reduce-scatter receive i = step * segments + k goes to scratch slot
  // i % window: a small, cache-resident ring instead of a chunk-sized buffer.
  void postReduceScatterRecv(size_t i, std::vector<Request>& recvs) {
    const int step = static_cast<int>(i / plan_.segments);
    const size_t k = i % plan_.segments;
    const Range seg = segment(rank_ - step - 1 + shift_, k);
    recvs[i] = t_.irecv(left_, tag(left_, step, k), slot(i), bytes(seg), op_);
  }
  char* slot(size_t i) const { return scratch_ + (i % window_) * slotBytes_; }

  Range segment(int chunk, size_t k) const {
    const int index = ((chunk % n_) + n_) % n_;
    return segmentOf(chunks_ ? chunks_->chunk(index) : chunkOf(count_, n_, index),
                     plan_.elemsPerSegment, k);
  }
  char* at(const Range& r) const { return data_ + r.offset * esize_; }
  size_t bytes(const Range& r) const { return r.count * esize_; }
  uint64_t tag(int source, int step, size_t k) const {
    return makeTag(source, op_.seq, static_cast<uint32_t>(step * plan_.segments + k));
  }

  const bool allgather_;
  const int shift_;
  Transport& t_;
  const OpContext& op_;
  char* data_;
  size_t count_;
  DataType type_;
  ReduceOp reduceOp_;
  int avgDivisor_;
  int n_, rank_, left_, right_;
  size_t esize_;
  bool payloadFree_;
  const ChunkLayout* chunks_;  // null: chunkOf
  SegmentPlan plan_;
  size_t rsTotal_ = 0;
  size_t window_ = 1;
  size_t slotBytes_ = 0;
  char* scratch_ = nullptr;
};

// Runs `mode` on `data`. float16 and bfloat16 stay 16-bit on the wire; each
// step combines in float32 and rounds once (core/math/host_loops.h). AVG divides
// by the ring's size unless `avgDivisor` says otherwise.
void runRing(RingReduction::Mode mode, Transport& transport, const OpContext& op, void* data,
             size_t count, DataType type, ReduceOp reduceOp, const Config& config,
             Workspace& workspace, std::optional<int> avgDivisor = std::nullopt,
             const ChunkLayout* chunks = nullptr) {
  if (!reductionSupported(type, reduceOp)) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": " +
                          unsupportedReason(type, reduceOp));
  }
  const int divisor = avgDivisor.value_or(reduceOp == ReduceOp::Avg ? transport.size() : 0);
  if (count == 0) return;
  if (transport.size() == 1) {  // AVG over one rank is the identity; a given divisor still divides
    if (divisor > 1 && !config.payloadFree) finishAverage(type, data, count, divisor);
    return;
  }
  RingReduction(mode, transport, op, static_cast<char*>(data), count, type, reduceOp, divisor,
                config, workspace, chunks)
      .run();
}

}  // namespace

void ringAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  withWireDtype(comm, args, [&](const ReductionArgs& wire) {
    runRing(RingReduction::Mode::Allreduce, comm.transport, op, wire.data, wire.count, wire.type,
            wire.op, comm.config, comm.workspace);
  });
}

void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  runRing(RingReduction::Mode::ReduceScatter, comm.transport, op, args.data,
                          args.count, args.type, args.op, comm.config, comm.workspace);
}

void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int avgDivisor) {
  runRing(RingReduction::Mode::ReduceScatter, comm.transport, op, args.data, args.count,
          args.type, args.op, comm.config, comm.workspace, avgDivisor);
}

void ringReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       int avgDivisor, const ChunkLayout& chunks) {
  if (chunks.parts() != comm.size() || chunks.total() != args.count) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": a chunk layout of " + std::to_string(chunks.parts()) +
                          " chunks, " + std::to_string(chunks.total()) + " elements, for " +
                          std::to_string(comm.size()) + " ranks, " +
                          std::to_string(args.count) + " elements");
  }
  runRing(RingReduction::Mode::ReduceScatter, comm.transport, op, args.data, args.count,
          args.type, args.op, comm.config, comm.workspace, avgDivisor, &chunks);
}

}  // namespace ringreduce
