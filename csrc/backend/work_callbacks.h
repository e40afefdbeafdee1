// The backend's side of an engine operation (engine/operation.h): completes
// a WorkRing, translating the library's errors into the torch exceptions
// Python sees, and for CUDA tensors runs the transfers with the group's
// internal stream current, between the host staging copies (device_call.h).
#pragma once

#include <memory>
#include <vector>

#include "backend/completion_hooks.h"
#include "backend/device_call.h"
#include "backend/work_ring.h"
#include "engine/operation.h"

namespace ringreduce {

class WorkCallbacks : public OperationCallbacks {
 public:
  WorkCallbacks(c10::intrusive_ptr<WorkRing> work, std::shared_ptr<DeviceCall> device,
                std::shared_ptr<CompletionHooks> hooks = nullptr)
      : work_(std::move(work)), device_(std::move(device)), hooks_(std::move(hooks)) {}

  // The engine enters the device (a no-op for host work) as the operation
  // starts running, traced or not: its duration begins there.
  void started() override { work_->markStarted(); }
  void heldInBlock(bool held) override { work_->setHeldInBlock(held); }
  std::shared_ptr<void> enterDevice() override;
  void stageIn(const OpContext& op) override;
  void stageOut() override;
  void succeeded(int sourceRank) override;
  void failed(std::exception_ptr error) override;
  std::exception_ptr error() const override { return work_->exception(); }

  const c10::intrusive_ptr<WorkRing>& work() const { return work_; }
  const std::shared_ptr<DeviceCall>& device() const { return device_; }

 private:
  c10::intrusive_ptr<WorkRing> work_;
  std::shared_ptr<DeviceCall> device_;  // CUDA tensors: streams and host staging
  std::shared_ptr<CompletionHooks> hooks_;  // the group's, for collectives

  void report();
};

}  // namespace ringreduce
