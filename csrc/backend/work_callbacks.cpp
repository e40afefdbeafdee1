// The backend's side of an engine operation (work_callbacks.h)
#include "backend/work_callbacks.h"

#include <c10/core/StreamGuard.h>

#include "backend/error_translation.h"
#include "backend/work_result.h"

namespace ringreduce {

std::shared_ptr<void> WorkCallbacks::enterDevice() {
  work_->markStarted();
  if (!device_) return nullptr;
  return std::make_shared<c10::StreamGuard>(device_->stream);
}

void WorkCallbacks::stageIn(const OpContext& op) {
  if (!device_) return;
  startDeviceCall(*device_, op);
  work_->markDeviceStarted();
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
    work_->markFailed(translateCurrentException(), workResultOf(error));
  }
  report();
}

void WorkCallbacks::report() {
  if (!hooks_ || !hooks_->active()) return;
  // One that never ran (its group had failed) began as it ended.
  const auto end = work_->endTime();
  const auto start = work_->startTime() == std::chrono::steady_clock::time_point{}
                         ? end
                         : work_->startTime();
  const auto active = std::chrono::duration<float>(end - start);
  hooks_->push(std::make_shared<c10d::WorkInfo>(work_->opType(), work_->getSequencenumber(),
                                                start, end, active));
}

}  // namespace ringreduce
