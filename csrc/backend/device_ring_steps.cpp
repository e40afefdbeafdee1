#include "backend/device_ring_steps.h"

#ifdef RINGREDUCE_WITH_CUDA

#include "cuda/ipc/ipc_memory.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/stream_tracker.h"

namespace ringreduce {

CudaRingSteps::CudaRingSteps(int device)
    : device_(device),
      slots_(std::make_unique<cuda::DeviceBuffer>(device, kSlots * kSlotBytes)) {}

// Tickets still pending after a failure keep their events; the slots go
// only with a group that closed (DevicePath keeps a failed group's state).
CudaRingSteps::~CudaRingSteps() {
  for (auto& [ticket, event] : pending_) cuda::freeMark(event);
  for (void* event : spare_) cuda::freeMark(event);
}

void* CudaRingSteps::slot(int index) {
  return static_cast<uint8_t*>(slots_->data()) + static_cast<size_t>(index) * kSlotBytes;
}

DeviceSteps::Ticket CudaRingSteps::mark() {
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
  while (!pending_.empty() && cuda::markReached(pending_.front().second)) {
    reached_ = pending_.front().first;
    spare_.push_back(pending_.front().second);
    pending_.pop_front();
  }
  return ticket <= reached_;
}

}  // namespace ringreduce

#endif
