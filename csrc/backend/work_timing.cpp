// Work.get_duration() for every Work of the group (work_timing.h)
#include "backend/work_timing.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <string>

namespace ringreduce {

namespace {

const char* kHowToTime =
    "call ProcessGroup._enable_collectives_timing() before issuing it, or set "
    "RINGREDUCE_ENABLE_TIMING=1 (or NCCL's TORCH_NCCL_ENABLE_TIMING=1) before the group is "
    "made, as NCCL requires";

std::string reason(Untimed why, bool onDevice) {
  switch (why) {
    case Untimed::NotYet:
      return "it has not completed yet";
    case Untimed::NeverRan:
      return "it never ran (the group had failed before it started)";
    case Untimed::TimingOff:
      return std::string(onDevice ? "collectives on CUDA tensors are timed"
                                  : "collectives on host tensors are timed") +
             " only while timing is on: " + kHowToTime;
    case Untimed::Captured:
      return "it was captured into a CUDA graph and runs when the graph is replayed; time "
             "the replay with torch.cuda.Event";
  }
  return "it was not timed";
}

[[noreturn]] void refuse(const WorkName& who, const std::string& why) {
  TORCH_CHECK(false, "ringreduce: get_duration() of ", c10d::opTypeToString(who.type), " #",
              who.seq, " on rank ", who.rank, ": ", why);
}

}  // namespace

void refuseDuration(const WorkName& who, Untimed why, bool onDevice) {
  refuse(who, reason(why, onDevice));
}

DeviceSpan::DeviceSpan()
    : start(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT),
      end(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT) {}

float deviceMilliseconds(const WorkName& who, const c10::Event* start, const c10::Event* end,
                         Untimed why) {
  if (start == nullptr || end == nullptr || !start->was_marked_for_recording()) {
    refuse(who, reason(why, true));
  }
  if (!end->was_marked_for_recording()) refuse(who, reason(Untimed::NotYet, true));
  if (!end->query()) {
    refuse(who, "the device has not finished it yet: wait for it first (work.wait(), then "
                "torch.cuda.current_stream().synchronize())");
  }
  return static_cast<float>(start->elapsedTime(*end));
}

float hostMilliseconds(const WorkName& who, Clock::time_point start, Clock::time_point end,
                       Untimed why) {
  if (start == Clock::time_point{}) refuse(who, reason(Untimed::NeverRan, false));
  if (end == Clock::time_point{}) refuse(who, reason(why, false));
  return std::chrono::duration<float, std::milli>(end - start).count();
}

CallerTimer::CallerTimer(bool timed, const at::Tensor& output, std::optional<c10::Stream> stream)
    : timed_(timed), onHost_(!output.is_cuda()), stream_(stream) {
  timing_.captured = !onHost_ && !stream_;
  if (timed_ && !onHost_ && stream_) timing_.device = std::make_shared<DeviceSpan>();
}

void CallerTimer::begin(const OpContext& op) {
  timing_.started = op.started();
  if (timing_.device) timing_.device->start.record(*stream_);
}

void CallerTimer::end() {
  if (!timed_) return;
  if (timing_.device) {
    timing_.device->end.record(*stream_);
  } else if (onHost_) {
    timing_.finished = Clock::now();
  }
}

}  // namespace ringreduce
