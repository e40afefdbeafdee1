#include "backend/work_ring.h"

#include "core/observe/latency_probe.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

namespace ringreduce {

namespace {
std::vector<c10::Device> devicesOf(const DeviceCall* device) {
  if (device == nullptr) return {};
  return {device->device};
}
}  // namespace

WorkRing::WorkRing(int rank, c10d::OpType opType, uint64_t seq, std::vector<at::Tensor> outputs,
                   const DeviceCall* device, std::weak_ptr<Executor> executor)
    : c10d::Work(rank, opType),
      seq_(seq),
      outputs_(std::move(outputs)),
      executor_(std::move(executor)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), devicesOf(device))) {
  if (device != nullptr) stream_ = device->stream;
}

bool WorkRing::wait(std::chrono::milliseconds timeout) {
  probe::mark(ProbePoint::WaitEntered);
  // A CUDA work's wait() must not block the host on the GPU, so only host
  // works are run by the waiting thread.
  if (!stream_) {
    if (std::shared_ptr<Executor> executor = executor_.lock()) {
      executor->helpUntil([this] { return isCompleted(); });
    }
  }
  const bool completed = c10d::Work::wait(timeout);  // the host part; throws its error
  synchronize();
  probe::mark(ProbePoint::WaitReturned);
  return completed;
}

// The caller's current stream waits on the events the future recorded on
// the internal stream: the host does not wait for the GPU.
void WorkRing::synchronize() {
  if (stream_) future_->wait();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkRing::getFuture() { return future_; }

std::vector<at::Tensor> WorkRing::result() { return outputs_; }

float WorkRing::getDuration() const {
  TORCH_CHECK(started_ != std::chrono::steady_clock::time_point{} &&
                  finished_ != std::chrono::steady_clock::time_point{},
              "ringreduce: get_duration() of ", c10d::opTypeToString(opType_),
              " #", seq_, ": the work has not completed yet");
  return std::chrono::duration<float, std::milli>(finished_ - started_).count();
}

void WorkRing::markSucceeded() {
  finished_ = std::chrono::steady_clock::now();
  if (started_ == std::chrono::steady_clock::time_point{}) started_ = finished_;
  std::optional<c10::StreamGuard> onInternalStream;
  if (stream_) onInternalStream.emplace(*stream_);  // the future's events go there
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void WorkRing::markFailed(std::exception_ptr error) {
  finished_ = std::chrono::steady_clock::now();
  if (started_ == std::chrono::steady_clock::time_point{}) started_ = finished_;
  finish(error);
  future_->setError(error);
}

}  // namespace ringreduce
