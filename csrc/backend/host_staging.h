// Collectives on CUDA tensors through pinned host copies: the fallback that
// gives every op the backend has a CUDA form. A public method that receives
// CUDA tensors maps them to host "shadows" here and calls its host form on
// the shadows inside run(), handing it the Staged call (copies in, copies
// out, stream semantics), which enqueue() attaches to the queued operation:
// the CPU algorithms run unchanged.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <vector>

#include "backend/device_call.h"
#include "backend/tensor_checks.h"

namespace ringreduce {

// The host-staged form of a call on CUDA tensors; null for host tensors.
using Staged = std::shared_ptr<DeviceCall>;

// The CUDA device of a call, or nothing for a CPU call. Raises ValueError
// when the call mixes devices.
std::optional<c10::Device> deviceOfCall(const CallSite& site, const std::vector<at::Tensor>& a,
                                        const std::vector<at::Tensor>& b = {});

class HostStaging {
 public:
  // `site`: the call, named where a device tensor it would write cannot be
  // written (write, readWrite): refused before anything is staged, as the
  // host forms refuse such a host tensor, where the copy back would fail
  // only after the collective, with the group then unusable.
  HostStaging(c10::Device device, c10::Stream stream, const CallSite& site)
      : call_(std::make_shared<DeviceCall>(device, stream)), site_(site) {}

  // A device tensor the op works on in place, on the device (no host copy):
  // only protected on the internal stream.
  void onDevice(const at::Tensor& t) { deviceTensors_.push_back(t); }
  // Input only: copied to the host before the op.
  at::Tensor read(const at::Tensor& t) { return shadow(t, true, false); }
  // Output only: copied back to the device after the op.
  at::Tensor write(const at::Tensor& t) { return shadow(t, false, true); }
  at::Tensor readWrite(const at::Tensor& t) { return shadow(t, true, true); }
  std::vector<at::Tensor> read(const std::vector<at::Tensor>& ts) { return map(ts, true, false); }
  std::vector<at::Tensor> write(const std::vector<at::Tensor>& ts) { return map(ts, false, true); }
  std::vector<at::Tensor> readWrite(const std::vector<at::Tensor>& ts) {
    return map(ts, true, true);
  }
  std::vector<std::vector<at::Tensor>> read(const std::vector<std::vector<at::Tensor>>& lists);
  std::vector<std::vector<at::Tensor>> write(const std::vector<std::vector<at::Tensor>>& lists);

  // Issues the call (caller's thread) and runs `hostForm(staged)`.
  template <typename Fn>
  auto run(Fn hostForm) {
    issueDeviceCall(*call_, deviceTensors_);
    return hostForm(static_cast<const Staged&>(call_));
  }

  // The device tensors behind `outputs` (shadows map back; others stay).
  static std::vector<at::Tensor> deviceOutputs(const DeviceCall& call,
                                               const std::vector<at::Tensor>& outputs);

 private:
  at::Tensor shadow(const at::Tensor& t, bool in, bool out);
  std::vector<at::Tensor> map(const std::vector<at::Tensor>& ts, bool in, bool out);
  void checkDeviceOutputsApart(const std::vector<at::Tensor>& outputs) const;

  std::shared_ptr<DeviceCall> call_;
  CallSite site_;
  std::vector<at::Tensor> deviceTensors_;
};

}  // namespace ringreduce
