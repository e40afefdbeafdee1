// The ring collectives on device memory, for ranks on different nodes: the
// host schedule of the device ring. The host drives the transport (UCX
// sends device segments directly) and the device does the arithmetic
// through DeviceSteps, asynchronously: a received segment is reduced on the
// device while the next ones are in flight, and a reduced segment is sent on
// as soon as its ticket says the device has written it. The same rules as
// the host ring (algorithms/ring_allreduce.h): chunks, segments, tags,
// deadlines, errors; only the reduction moved to the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "algorithms/comm.h"
#include "core/base/data_type.h"
#include "core/base/op_context.h"
#include "core/base/reduce_op.h"
#include "core/config/cuda_choices.h"

namespace ringreduce {

// What the device ring needs of the device, and no more, so that the CUDA
// side (csrc/cuda) and a host fake in the tests can both provide it.
// Pointers are device memory that the transport can send from and receive
// into (UCX with CUDA memory support); the fake uses host memory.
//
// Work is enqueued in order on one queue (the group's stream) and runs in
// that order; a ticket stands for one piece of work and, being in order,
// for everything enqueued before it. Nothing here blocks the host: the
// schedule polls done() while it progresses the transport, and once its
// spin is over sleeps on wakeFd() beside the transport's event fd.
class DeviceSteps {
 public:
  using Ticket = uint64_t;
  virtual ~DeviceSteps() = default;

  // Staging slots for received segments, slotBytes() each: the schedule's
  // receive window is at most slots(), and no segment is larger than a
  // slot. Every rank must report the same slotBytes() (it sets the segment
  // size, which sender and receiver must agree on).
  virtual int slots() const = 0;
  virtual size_t slotBytes() const = 0;
  // The same memory every call; the schedule receives into it only while
  // no enqueued reduction still reads it.
  virtual void* slot(int index) = 0;

  // dst[i] = op(dst[i], received[i]) for `count` elements of `type`
  // (float16/bfloat16 combined in float32, rounded once). AVG combines as
  // SUM; avgDivisor > 0 divides the result by it (AVG's last step, fused
  // before the rounding), 0 does not. `alsoTo` (null: none) gets the result
  // too: a reduce-scatter's output, written in the same pass.
  virtual Ticket reduce(void* dst, const void* received, void* alsoTo, size_t count,
                        DataType type, ReduceOp op, int avgDivisor) = 0;
  // `bytes` from src to dst: an allgather's own block when the input is not
  // already in place, a one-rank reduce-scatter's output.
  virtual Ticket copy(void* dst, const void* src, size_t bytes) = 0;
  // `count` float32 values to float16/bfloat16 or back (rounding to nearest
  // even): the 16-bit wire's narrowing before the ring and widening after.
  virtual Ticket convert(void* dst, DataType dstType, const void* src, DataType srcType,
                         size_t count) = 0;
  // Device memory of at least `bytes` that the transport can send from and
  // receive into, kept (and reused) until a later call needs more: the
  // 16-bit copy that a wire-dtype allreduce travels as.
  virtual void* workspace(size_t bytes) = 0;
  // Everything enqueued so far, including what the queue itself waits for
  // (the caller's work that wrote the tensor): the schedule sends nothing
  // from the caller's memory before this is done.
  virtual Ticket fence() = 0;
  // Host poll, never blocking: the work of `ticket` and everything enqueued
  // before it has finished, and its output is visible to the transport.
  // May throw (a device error); the schedule lets the exception through.
  virtual bool done(Ticket ticket) = 0;
  // For a waiter about to sleep until `ticket` is done (its spin is over):
  // a file descriptor that the device itself makes readable once it has
  // passed the ticket, at the latest once it has finished everything
  // enqueued before this call (CUDA: a host function queued on the stream
  // writes an eventfd). Each call first clears what the fd said before, so
  // a readable fd afterwards is news; it may be readable early (the waiter
  // then polls done() again), never later than that. Asked only when the
  // waiter would otherwise sleep: a spin that finds its ticket done costs
  // nothing here. The fd belongs to the steps.
  virtual int wakeFd(Ticket ticket) = 0;
};

// `count` elements of `type` in device memory at `data`, reduced in place.
struct DeviceRingArgs {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  // Reduce-scatter only (null: none): rank r's result chunk is also written
  // here, chunkOf(count, n, r).count elements (reduce_scatter_tensor's
  // output, written by the last step's reductions themselves).
  void* output = nullptr;
  // Allreduce only: fp16 or bf16 sends float32 SUM/AVG as 16-bit floats
  // (RINGREDUCE_WIRE_DTYPE's scheme, algorithms/wire_dtype.h: rounded once
  // to the wire type, combined in float32 and rounded once per step,
  // widened back alike on every rank), so the host ring's bits with that
  // wire. Ignored for other types and ops, and for one rank.
  WireDtype wire = WireDtype::None;
  // AVG only, > 0: the divisor instead of the ring's size (a phase of a
  // larger collective, algorithms/device/two_level.h, divides by all of
  // its ranks).
  int avgDivisor = 0;
};

// The segment the device ring moves and reduces at a time, for chunks of
// `chunkBytes`: a quarter of a chunk (four segments of each ring step in
// flight), no smaller than the host ring's segment (RINGREDUCE_SEGMENT_BYTES)
// and no larger than a staging slot. Every rank computes the same.
size_t deviceSegmentBytes(size_t hostSegmentBytes, size_t chunkBytes, size_t slotBytes);

// In place: every rank ends with the reduction of all ranks' buffers, with
// the host ring's order of combination (so the same bits). Reduce-scatter
// with segment-wise pipelining through the slots, then allgather: received
// chunks go straight into place and are forwarded once received. AVG
// divides once, in the last reduce step. On return all device work is done.
void deviceRingAllreduce(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                         DeviceSteps& steps);

// Runs `run` on `args` as they travel: where args.wire applies (float32
// SUM/AVG, more than one rank), on a 16-bit copy in steps.workspace(),
// narrowed before and widened back into args.data after (waited for);
// otherwise on `args` themselves. The allreduces above and below use it.
void withDeviceWire(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                    DeviceSteps& steps, const std::function<void(const DeviceRingArgs&)>& run);

// In place, as ringReduceScatter: afterwards chunk r of `data`
// (chunkOf(count, n, r)) on rank r holds the reduction of that chunk over
// all ranks (and args.output a copy, if given); the other chunks hold
// partial sums. To keep an input intact, run it on a copy.
void deviceRingReduceScatter(const Comm& comm, const OpContext& op, const DeviceRingArgs& args,
                             DeviceSteps& steps);

// all_gather_into_tensor: rank r's `blockBytes` at `input` end up at offset
// r * blockBytes of every rank's `output` (device memory). `input` may be
// the rank's own block of `output`; otherwise the device copies it there.
struct DeviceAllgatherArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t blockBytes = 0;
};
void deviceRingAllgather(const Comm& comm, const OpContext& op, const DeviceAllgatherArgs& args,
                         DeviceSteps& steps);

}  // namespace ringreduce
