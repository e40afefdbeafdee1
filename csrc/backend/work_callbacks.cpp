#include "backend/work_callbacks.h"

#include <c10/core/StreamGuard.h>

#include "backend/error_translation.h"

namespace ringreduce {

std::shared_ptr<void> WorkCallbacks::enterDevice() {
  if (!device_) return nullptr;
  return std::make_shared<c10::StreamGuard>(device_->stream);
}

void WorkCallbacks::stageIn(const OpContext& op) {
  if (device_) startDeviceCall(*device_, op);
}

void WorkCallbacks::stageOut() {
  if (device_) finishDeviceCall(*device_);
}

void WorkCallbacks::succeeded(int sourceRank) {
  if (sourceRank >= 0) work_->setSourceRank(sourceRank);
  work_->markSucceeded();
  report();
}

void WorkCallbacks::failed(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (...) {
    work_->markFailed(translateCurrentException());
  }
  report();
}

void WorkCallbacks::report() {
  if (!hooks_ || !hooks_->active()) return;
  const auto active = std::chrono::duration<float>(work_->endTime() - work_->startTime());
  hooks_->push(std::make_shared<c10d::WorkInfo>(work_->opType(), work_->getSequencenumber(),
                                                work_->startTime(), work_->endTime(), active));
}

}  // namespace ringreduce
