// What makes a collective on CUDA tensors behave like ProcessGroupNCCL's (device_call.h)
#include "backend/device_call.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <thread>

#include "core/base/errors.h"

#ifdef RINGREDUCE_WITH_CUDA
#include "cuda/capture_mode.h"
#endif

namespace ringreduce {

void issueDeviceCall(DeviceCall& call, const std::vector<at::Tensor>& tensors) {
  const c10::impl::DeviceGuardImplInterface* impl =
      c10::impl::getDeviceGuardImpl(call.device.type());
  call.ready = std::make_shared<c10::Event>(call.device.type());
  call.ready->record(impl->getStream(call.device));
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.device() == call.device && t.has_storage()) {
      impl->recordDataPtrOnStream(t.storage().data_ptr(), call.stream);
    }
  }
}

void waitForStream(const c10::Stream& stream, const OpContext& op, const char* what) {
  c10::Event done(stream.device_type());
  done.record(stream);
  // Copies take microseconds to milliseconds: poll, backing off to 1 ms.
  auto pause = std::chrono::microseconds(5);
#ifdef RINGREDUCE_WITH_CUDA
  // The executor's polls must not break a graph the user captures meanwhile.
  cuda::ThreadLocalCaptureMode relaxed;
#endif
  while (!done.query()) {
    if (Clock::now() >= op.deadline) {
      throw TimeoutError("ringreduce: " + op.describe() + " timed out after " +
                         std::to_string(op.timeout.count()) +
                         " ms (operation timeout reached) waiting for the GPU to " + what);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void startDeviceCall(const DeviceCall& call, const OpContext& op) {
  call.ready->block(call.stream);
  if (call.copiesIn.empty()) return;
  for (const auto& [device, host] : call.copiesIn) host.copy_(device, /*non_blocking=*/true);
  waitForStream(call.stream, op, "copy the inputs to the host");
}

void finishDeviceCall(const DeviceCall& call) {
  // From pinned memory, non-blocking: torch's host allocator keeps the
  // pinned block alive until the copy has run.
  for (const auto& [host, device] : call.copiesOut) device.copy_(host, /*non_blocking=*/true);
}

at::Tensor pinnedLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(),
                   tensor.options().device(at::kCPU).pinned_memory(true).memory_format(
                       at::MemoryFormat::Contiguous));
}

}  // namespace ringreduce
