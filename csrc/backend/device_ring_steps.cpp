// The device ring's device side on CUDA (device_ring_steps.h)
#include "backend/device_ring_steps.h"

#ifdef RINGREDUCE_WITH_CUDA

#include <cstdint>
#include <string>

#include "core/observe/log.h"
#include "cuda/ipc/ipc_memory.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/signal/stream_memops.h"
#include "cuda/stream_tracker.h"
#include "cuda/stream_wake.h"

namespace ringreduce {

CudaRingSteps::CudaRingSteps(int device)
    : device_(device),
      slots_(std::make_unique<cuda::DeviceBuffer>(device, kSlots * kSlotBytes)) {
  std::string why;
  if (cuda::streamMemOpsAvailable(&why)) {
    counter_ = std::make_unique<cuda::PinnedMirror>(device, sizeof(uint32_t));
  }
}

// Tickets still pending after a failure keep their events; the slots go
// only with a group that closed (DevicePath keeps a failed group's state).
CudaRingSteps::~CudaRingSteps() {
  for (auto& [ticket, event] : pending_) cuda::freeMark(event);
  for (void* event : spare_) cuda::freeMark(event);
}

void* CudaRingSteps::slot(int index) {
  return static_cast<uint8_t*>(slots_->data()) + static_cast<size_t>(index) * kSlotBytes;
}

void CudaRingSteps::useEvents() {
  // Tickets so far are counted: the first event covers them too, being in
  // stream order after them.
  counter_.reset();
}

DeviceSteps::Ticket CudaRingSteps::mark() {
  if (counter_) {
    try {
      cuda::streamWriteValue32(stream_, static_cast<uint32_t*>(counter_->device()),
                               static_cast<uint32_t>(next_ + 1));
      return ++next_;
    } catch (const std::exception& e) {
      RR_LOG(Warn, -1, "the device ring's tickets go through events: " << e.what());
      useEvents();
    }
  }
  void* event = nullptr;
  if (spare_.empty()) {
    event = cuda::recordMark(device_, stream_);
  } else {
    event = spare_.back();
    cuda::recordMarkAgain(event, stream_);
    spare_.pop_back();  // after the record, which may throw: the event stays owned
  }
  pending_.emplace_back(++next_, event);
  return next_;
}

DeviceSteps::Ticket CudaRingSteps::reduce(void* dst, const void* received, void* alsoTo,
                                          size_t count, DataType type, ReduceOp op,
                                          int avgDivisor) {
  cuda::ReduceCopyArgs args;
  args.srcs[0] = dst;
  args.srcs[1] = received;
  args.nsrc = 2;
  args.dsts[0] = dst;
  args.ndst = 1;
  if (alsoTo != nullptr) args.dsts[args.ndst++] = alsoTo;
  args.count = count;
  args.srcType = args.dstType = type;
  // AVG adds as SUM until its last step, which divides.
  args.op = op == ReduceOp::Avg && avgDivisor == 0 ? ReduceOp::Sum : op;
  args.avgDivisor = args.op == ReduceOp::Avg ? avgDivisor : 0;
  cuda::launchReduceCopy(args, device_, stream_);
  return mark();
}

DeviceSteps::Ticket CudaRingSteps::copy(void* dst, const void* src, size_t bytes) {
  cuda::copyOnStream(device_, dst, src, bytes, stream_);
  return mark();
}

// The fused kernel's wire cast: one source, float32 <-> float16/bfloat16.
DeviceSteps::Ticket CudaRingSteps::convert(void* dst, DataType dstType, const void* src,
                                           DataType srcType, size_t count) {
  cuda::launchCast(src, srcType, dst, dstType, count, 0, device_, stream_);
  return mark();
}

// Grown only between collectives: the ring returns with all its device work
// done, so nothing still reads or writes the smaller one.
void* CudaRingSteps::workspace(size_t bytes) {
  if (!workspace_ || workspace_->bytes() < bytes) {
    workspace_.reset();
    workspace_ = std::make_unique<cuda::DeviceBuffer>(device_, bytes);
  }
  return workspace_->data();
}

DeviceSteps::Ticket CudaRingSteps::fence() { return mark(); }

bool CudaRingSteps::done(Ticket ticket) {
  if (counter_) {
    // The stream's count, compared in cyclic order (it is 32 bits wide).
    const uint32_t passed = *static_cast<volatile uint32_t*>(counter_->host());
    return static_cast<int32_t>(passed - static_cast<uint32_t>(ticket)) >= 0;
  }
  while (!pending_.empty() && cuda::markReached(pending_.front().second)) {
    reached_ = pending_.front().first;
    spare_.push_back(pending_.front().second);
    pending_.pop_front();
  }
  return ticket <= reached_;
}

int CudaRingSteps::wakeFd(Ticket ticket) {
  if (!wake_) wake_ = std::make_unique<cuda::StreamWake>();
  wake_->clear();
  // A host function queued now runs after everything enqueued so far, so
  // it covers every ticket up to next_: a waiter that the network woke
  // sleeps again on the one already queued. (It may wake a little after
  // `ticket`, once the later work queued before it is done too.)
  if (wakeArmedThrough_ < ticket) {
    wake_->armAfter(stream_);
    wakeArmedThrough_ = next_;
  }
  return wake_->fd();
}

}  // namespace ringreduce

#endif
