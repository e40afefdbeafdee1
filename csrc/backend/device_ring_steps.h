// The device ring's device side on CUDA (algorithms/device/ring.h):
// staging slots of the group's own, reductions by the fused reduce-copy
// kernel on the group's stream, and tickets the host schedule polls while
// it drives the transport, never waiting for the whole device. A ticket is
// a count the stream writes into pinned host memory after its work
// (cuStreamWriteValue32), so a poll is a load, no CUDA call; where the
// driver has no stream memory operations, or the write fails, an event
// per ticket, re-recorded once reached. A waiter whose spin is over sleeps
// on a wake fd that a host function queued on the stream writes
// (cuda/stream_wake.h), armed only then. Torch-free; defined only where
// the CUDA path is compiled (and on the tests' fake device).
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "algorithms/device/ring.h"

namespace ringreduce {

namespace cuda {
class DeviceBuffer;
class PinnedMirror;
class StreamWake;
}

class CudaRingSteps : public DeviceSteps {
 public:
  // Eight 1 MiB slots: the segment size of the device ring (the same on
  // every rank, as it must be) and a receive window deep enough to keep a
  // link of tens of GB/s busy while segments are reduced.
  static constexpr int kSlots = 8;
  static constexpr size_t kSlotBytes = size_t{1} << 20;

  explicit CudaRingSteps(int device);
  ~CudaRingSteps() override;
  CudaRingSteps(const CudaRingSteps&) = delete;
  CudaRingSteps& operator=(const CudaRingSteps&) = delete;

  // Where the next collective's work goes: the group's stream, which
  // already waits for the caller's (so fence() covers the caller's work).
  void bind(void* stream) { stream_ = stream; }

  int slots() const override { return kSlots; }
  size_t slotBytes() const override { return kSlotBytes; }
  void* slot(int index) override;
  Ticket reduce(void* dst, const void* received, void* alsoTo, size_t count, DataType type,
                ReduceOp op, int avgDivisor) override;
  Ticket copy(void* dst, const void* src, size_t bytes) override;
  Ticket convert(void* dst, DataType dstType, const void* src, DataType srcType,
                 size_t count) override;
  void* workspace(size_t bytes) override;
  Ticket fence() override;
  bool done(Ticket ticket) override;
  int wakeFd(Ticket ticket) override;

 private:
  Ticket mark();
  // Events instead of the counter from now on (the counter's write failed).
  void useEvents();

  const int device_;
  void* stream_ = nullptr;
  std::unique_ptr<cuda::DeviceBuffer> slots_;
  std::unique_ptr<cuda::DeviceBuffer> workspace_;  // the 16-bit wire's copy, grown on demand
  // The last ticket the stream has passed, written by the stream; null:
  // tickets are events.
  std::unique_ptr<cuda::PinnedMirror> counter_;
  std::deque<std::pair<Ticket, void*>> pending_;  // events only: tickets and their events, in order
  // Events of reached tickets, recorded again for later ones: a ring step
  // then costs one record and its queries, not an event created and
  // destroyed (cudaEventCreate/Destroy) per segment.
  std::vector<void*> spare_;
  Ticket next_ = 0;
  Ticket reached_ = 0;  // every ticket up to this one is done
  std::unique_ptr<cuda::StreamWake> wake_;  // made for the first sleep
  Ticket wakeArmedThrough_ = 0;  // a host function queued after this ticket will wake it
};

}  // namespace ringreduce
