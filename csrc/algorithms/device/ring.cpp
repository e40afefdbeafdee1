// The device ring's schedule: ring collectives on device memory across nodes (ring.h)
#include "algorithms/device/ring.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/device/poll.h"
#include "algorithms/ring_allgather.h"
#include "core/base/errors.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/partition.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

using Ticket = DeviceSteps::Ticket;

std::string where(const OpContext& op, int rank) {
  return "ringreduce: " + op.describe() + " on rank " + std::to_string(rank);
}

// The host ring's pattern (ring_allreduce.cpp), so the same order of
// combination: with shift d, reduce-scatter step s (0..n-2) sends chunk
// r-s+d and receives chunk r-s-1+d; allreduce (d = 0) continues with an
// allgather whose step t (tag step n-1+t) receives chunk r-t and forwards
// it; reduce-scatter alone (d = -1) ends with chunk r on rank r.
//
// Reduce-scatter item i = s * segments + k is received into slot
// i % window, reduced there by the device, and once its ticket is done the
// slot takes item i + window and the reduced segment goes on as step s+1's
// segment k. Tickets finish in order, so only the oldest is polled; items
// are reduced in order, so that the device's queue holds them in order.
class DeviceRing {
 public:
  enum class Mode { Allreduce, ReduceScatter };

  DeviceRing(Mode mode, const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
             DeviceSteps& steps, int avgDivisor)
      : allgather_(mode == Mode::Allreduce), shift_(allgather_ ? 0 : -1), t_(comm.transport),
        op_(op), steps_(steps), poller_(comm.transport, op), data_(static_cast<char*>(args.data)),
        output_(static_cast<char*>(args.output)), count_(args.count), type_(args.type),
        reduceOp_(args.op), avgDivisor_(avgDivisor), n_(t_.size()), rank_(t_.rank()),
        left_((rank_ - 1 + n_) % n_), right_((rank_ + 1) % n_), esize_(elementSize(args.type)) {
    if (steps.slots() < 1 || steps.slotBytes() < esize_) {
      throw InvalidArgument(where(op, rank_) + ": the device ring needs a staging slot of at " +
                            "least one element (" + std::to_string(steps.slots()) + " slots of " +
                            std::to_string(steps.slotBytes()) + " bytes)");
    }
    // As the host ring: every chunk gets the largest one's number of
    // segments, within two steps' worth of tag slots; and no segment is
    // larger than a staging slot.
    const size_t ringSteps = 2 * static_cast<size_t>(n_ - 1);
    const size_t largestChunk = chunkOf(count_, n_, 0).count;
    const size_t segmentBytes =
        deviceSegmentBytes(comm.config.segmentBytes, largestChunk * esize_, steps.slotBytes());
    plan_ = planSegments(largestChunk, esize_, segmentBytes, (kMaxSlot + 1) / ringSteps);
    if (plan_.elemsPerSegment * esize_ > steps.slotBytes()) {
      throw InvalidArgument(where(op, rank_) + ": " + std::to_string(count_) +
                            " elements need segments of " +
                            std::to_string(plan_.elemsPerSegment * esize_) +
                            " bytes, more than the device's staging slots hold (" +
                            std::to_string(steps.slotBytes()) + ")");
    }
    rsTotal_ = static_cast<size_t>(n_ - 1) * plan_.segments;
    window_ = std::min(rsTotal_, static_cast<size_t>(steps.slots()));
    rsRecvs_.resize(rsTotal_);
  }

  void run() {
    // The caller's data must be on the device before the first send.
    const Ticket ready = steps_.fence();
    // Allgather receives land in their final place, which the device has
    // finished with by the time they can arrive (the data needs this rank's
    // own contribution, sent after its last reduction there): post them now.
    for (int t = 0; allgather_ && t < n_ - 1; ++t) {
      for (size_t k = 0; k < plan_.segments; ++k) {
        const Range seg = segment(rank_ - t, k);
        agRecvs_.push_back(t_.irecv(left_, tag(left_, n_ - 1 + t, k), at(seg), bytes(seg), op_));
      }
    }
    while (nextPost_ < window_) postSlotRecv(nextPost_++);
    poller_.waitFor(steps_, ready,
                    [] { return std::string("finish the work before the collective"); });
    for (size_t k = 0; k < plan_.segments; ++k) send(segment(rank_ + shift_, k), 0, k);

    while (nextReduce_ < rsTotal_ || !pending_.empty() || nextAg_ < agRecvs_.size()) {
      // Before the pass looks: what advance() then enqueues and sends is
      // its work, not a sign that this thread was away.
      const auto passStart = poller_.now();
      if (advance()) {
        poller_.moved(passStart);
      } else if (!pending_.empty()) {
        // The oldest reduction on the device: what the sleep waits for.
        poller_.idle(steps_, pending_.front().ticket,
                     [this] { return describe(pending_.front().item); });
      } else {
        // Nothing on the device: only the network moves things on, and the
        // transport's own wait (spin, sleep, checks, timeout) waits for it.
        t_.wait(nextReduce_ < rsTotal_ ? rsRecvs_[nextReduce_] : agRecvs_[nextAg_], op_);
      }
    }
    t_.waitAll(sends_, op_);
  }

 private:
  struct Reduction {
    size_t item;
    bool onDevice;  // false: an empty segment, nothing enqueued
    Ticket ticket;
  };

  // One pass over everything that may have finished; true if anything had.
  bool advance() {
    bool moved = false;
    while (!pending_.empty() &&
           (!pending_.front().onDevice || steps_.done(pending_.front().ticket))) {
      const size_t item = pending_.front().item;
      pending_.pop_front();
      retire(item);
      moved = true;
    }
    while (nextReduce_ < nextPost_ && t_.test(rsRecvs_[nextReduce_], op_)) {
      enqueueReduction(nextReduce_++);
      moved = true;
    }
    while (nextAg_ < agRecvs_.size() && t_.test(agRecvs_[nextAg_], op_)) {
      forward(nextAg_++);
      moved = true;
    }
    return moved;
  }

  void postSlotRecv(size_t item) {
    const int s = step(item);
    const Range seg = segment(rank_ - s - 1 + shift_, segmentIndex(item));
    rsRecvs_[item] = t_.irecv(left_, tag(left_, s, segmentIndex(item)), slotOf(item), bytes(seg),
                              op_);
  }

  // The device reduces `item`'s slot into its place; the last step also
  // divides (AVG) and writes the reduce-scatter's output.
  void enqueueReduction(size_t item) {
    const int s = step(item);
    const Range seg = segment(rank_ - s - 1 + shift_, segmentIndex(item));
    if (seg.count == 0) {  // a short chunk's empty tail: nothing to reduce
      pending_.push_back({item, false, 0});
      return;
    }
    const bool last = s == n_ - 2;
    char* alsoTo = last && output_ != nullptr
                       ? output_ + (seg.offset - chunkOf(count_, n_, rank_).offset) * esize_
                       : nullptr;
    const Ticket ticket = steps_.reduce(at(seg), slotOf(item), alsoTo, seg.count, type_,
                                        reduceOp_, last ? avgDivisor_ : 0);
    pending_.push_back({item, true, ticket});
  }

  // `item`'s reduction is done: its slot takes the next receive, and the
  // reduced segment goes on (the next reduce-scatter step, or allgather
  // step 0 with the finished chunk).
  void retire(size_t item) {
    if (nextPost_ < rsTotal_) postSlotRecv(nextPost_++);  // item + window_: the same slot
    const int s = step(item);
    if (s + 1 < n_ - 1 || allgather_) {
      send(segment(rank_ - s - 1 + shift_, segmentIndex(item)), s + 1, segmentIndex(item));
    }
  }

  // Allgather receive j arrived in place: forward it unless this is the
  // last step (its chunk then came from this rank's right neighbour).
  void forward(size_t j) {
    const int t = static_cast<int>(j / plan_.segments);
    const size_t k = j % plan_.segments;
    if (t + 1 < n_ - 1) send(segment(rank_ - t, k), n_ + t, k);
  }

  void send(const Range& seg, int tagStep, size_t k) {
    sends_.push_back(t_.isend(right_, tag(rank_, tagStep, k), at(seg), bytes(seg), op_));
  }

  std::string describe(size_t item) const {
    return "reduce segment " + std::to_string(segmentIndex(item)) + " of ring step " +
           std::to_string(step(item)) + " (received from rank " + std::to_string(left_) + ")";
  }

  int step(size_t item) const { return static_cast<int>(item / plan_.segments); }
  size_t segmentIndex(size_t item) const { return item % plan_.segments; }
  void* slotOf(size_t item) { return steps_.slot(static_cast<int>(item % window_)); }
  Range segment(int chunk, size_t k) const {
    return segmentOf(chunkOf(count_, n_, ((chunk % n_) + n_) % n_), plan_.elemsPerSegment, k);
  }
  char* at(const Range& r) const { return data_ + r.offset * esize_; }
  size_t bytes(const Range& r) const { return r.count * esize_; }
  uint64_t tag(int source, int tagStep, size_t k) const {
    return makeTag(source, op_.seq, static_cast<uint32_t>(tagStep * plan_.segments + k));
  }

  const bool allgather_;
  const int shift_;
  Transport& t_;
  const OpContext& op_;
  DeviceSteps& steps_;
  DevicePoller poller_;
  char* data_;
  char* output_;  // reduce-scatter's extra copy of chunk r, or null
  size_t count_;
  DataType type_;
  ReduceOp reduceOp_;
  int avgDivisor_;
  int n_, rank_, left_, right_;
  size_t esize_;
  SegmentPlan plan_;
  size_t rsTotal_ = 0;
  size_t window_ = 1;
  std::vector<Request> rsRecvs_;  // by item; posted below nextPost_
  std::vector<Request> agRecvs_;  // by t * segments + k
  std::vector<Request> sends_;
  std::deque<Reduction> pending_;  // enqueued, not yet retired, oldest first
  size_t nextPost_ = 0;            // reduce-scatter receives posted: items below
  size_t nextReduce_ = 0;          // reductions enqueued: items below
  size_t nextAg_ = 0;              // allgather receives forwarded: below
};

void runDeviceRing(DeviceRing::Mode mode, const Comm& comm, const OpContext& op,
                   const DeviceRingArgs& args, DeviceSteps& steps) {
  const int rank = comm.rank();
  if (!reductionSupported(args.type, args.op)) {
    throw InvalidArgument(where(op, rank) + ": " + unsupportedReason(args.type, args.op));
  }
  if (mode == DeviceRing::Mode::Allreduce && args.output != nullptr) {
    throw InvalidArgument(where(op, rank) + ": an allreduce has no separate output");
  }
  if (args.count == 0) return;
  if (comm.size() == 1) {  // AVG over one rank is the identity
    if (args.output != nullptr) {
      DevicePoller poller(comm.transport, op);
      const Ticket copied = steps.copy(args.output, args.data, args.count * elementSize(args.type));
      poller.waitFor(steps, copied, [] { return std::string("copy the result to the output"); });
    }
    return;
  }
  const int divisor =
      args.op == ReduceOp::Avg ? (args.avgDivisor > 0 ? args.avgDivisor : comm.size()) : 0;
  DeviceRing(mode, comm, op, args, steps, divisor).run();
}

}  // namespace

// Each segment costs the ring a transfer's start and a ticket's polls,
// whatever its size: tens of microseconds over a device link, where the host
// ring's 256 KiB take 8 us to move at 32 GB/s. So a large message travels in
// segments up to a slot, and a small one still in the host ring's, which
// keep a step's transfer and reduction overlapping.
size_t deviceSegmentBytes(size_t hostSegmentBytes, size_t chunkBytes, size_t slotBytes) {
  return std::min(slotBytes, std::max(hostSegmentBytes, chunkBytes / 4));
}

void withDeviceWire(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                    DeviceSteps& steps, const std::function<void(const DeviceRingArgs&)>& run) {
  const bool onWire = args.wire != WireDtype::None && args.type == DataType::Float32 &&
                      (args.op == ReduceOp::Sum || args.op == ReduceOp::Avg) &&
                      comm.size() > 1 && args.count > 0;
  if (!onWire) return run(args);
  // The collective on a 16-bit copy: the ring's fence covers the narrowing
  // (tickets are in order), so nothing is sent before the copy is whole.
  DeviceRingArgs narrow = args;
  narrow.type = args.wire == WireDtype::Fp16 ? DataType::Float16 : DataType::BFloat16;
  narrow.data = steps.workspace(args.count * elementSize(narrow.type));
  narrow.wire = WireDtype::None;
  steps.convert(narrow.data, narrow.type, args.data, args.type, args.count);
  run(narrow);
  const Ticket widened = steps.convert(args.data, args.type, narrow.data, narrow.type, args.count);
  DevicePoller(comm.transport, op).waitFor(steps, widened, [] {
    return std::string("widen the 16-bit result");
  });
}

void deviceRingAllreduce(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                         DeviceSteps& steps) {
  withDeviceWire(comm, op, args, steps, [&](const DeviceRingArgs& onWire) {
    runDeviceRing(DeviceRing::Mode::Allreduce, comm, op, onWire, steps);
  });
}

void deviceRingReduceScatter(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                             DeviceSteps& steps) {
  runDeviceRing(DeviceRing::Mode::ReduceScatter, comm, op, args, steps);
}

void deviceRingAllgather(const Comm& comm, const OpContext& op, const DeviceAllgatherArgs& args,
                         DeviceSteps& steps) {
  if (args.blockBytes == 0) return;
  char* out = static_cast<char*>(args.output);
  char* mine = out + static_cast<size_t>(comm.rank()) * args.blockBytes;
  // Either ticket covers the caller's work on the input too (tickets are in
  // order): nothing is sent before the rank's own block is in place.
  const Ticket ready =
      args.input == mine ? steps.fence() : steps.copy(mine, args.input, args.blockBytes);
  DevicePoller(comm.transport, op).waitFor(steps, ready, [] {
    return std::string("place this rank's own block");
  });
  if (comm.size() == 1) return;
  // The rest is the host allgather: the transport moves device memory, and
  // the device has nothing to compute.
  ringAllgatherInPlace(comm, op, out,
                       ChunkLayout::ofSizes(std::vector<size_t>(comm.size(), args.blockBytes)));
}

}  // namespace ringreduce
