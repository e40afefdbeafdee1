// What makes a collective on CUDA tensors behave like ProcessGroupNCCL's:
//   - the work runs on an internal stream of the group that first waits on
//     an event recorded on the caller's current stream at issue time;
//   - the caller's stream, not the host, waits on the result (WorkRing's
//     future records its events on the internal stream; wait() blocks the
//     caller's current stream on them);
//   - the tensors are recorded on the internal stream, so the caching
//     allocator does not hand their memory out while the work may touch it.
// Everything goes through c10's device-generic interfaces (DeviceGuardImpl,
// c10::Event, c10::Stream), so this compiles against the CPU-only torch.
//
// A DeviceCall may also carry host staging: pinned host copies the CPU
// algorithms work on, copied in before and out after.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <memory>
#include <utility>
#include <vector>

#include "core/base/op_context.h"

namespace ringreduce {

struct DeviceCall {
  c10::Device device;
  c10::Stream stream;                     // the group's internal stream for `device`
  std::shared_ptr<c10::Event> ready;      // recorded on the caller's stream at issue
  std::vector<std::pair<at::Tensor, at::Tensor>> copiesIn;   // device -> pinned host
  std::vector<std::pair<at::Tensor, at::Tensor>> copiesOut;  // pinned host -> device
  // Host shadow -> the device tensor it stands for (host_staging.h).
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> shadows;

  DeviceCall(c10::Device d, c10::Stream s) : device(d), stream(s) {}
};

// Caller's thread, at issue: records `ready` on the current stream of the
// call's device and protects `tensors` on the internal stream.
void issueDeviceCall(DeviceCall& call, const std::vector<at::Tensor>& tensors);

// Executor thread, with the internal stream current: waits (on the device)
// for the caller's stream, then copies staged inputs to the host and waits
// (on the host, bounded by the op's deadline) until they are there.
void startDeviceCall(const DeviceCall& call, const OpContext& op);

// Executor thread: copies staged outputs back, on the internal stream.
void finishDeviceCall(const DeviceCall& call);

// Host wait for the work queued so far on `stream`, polling so that it is
// bounded by the op's deadline (a peer's kernel that never comes would
// otherwise block forever). Throws TimeoutError.
void waitForStream(const c10::Stream& stream, const OpContext& op, const char* what);

// A pinned host tensor shaped like `tensor` (contiguous).
at::Tensor pinnedLike(const at::Tensor& tensor);

}  // namespace ringreduce
