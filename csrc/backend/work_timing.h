// Work.get_duration() for every Work of the group, in milliseconds, measured
// as ProcessGroupNCCL measures where it applies:
//   - a collective on CUDA tensors: a pair of CUDA events around its device
//     work, made and recorded only while the group's timing is on
//     (ProcessGroup._enable_collectives_timing(), RINGREDUCE_ENABLE_TIMING,
//     TORCH_NCCL_ENABLE_TIMING), read once the device has passed the end;
//   - a host collective: host time from when it starts running (not when it
//     was queued) to its completion. A collective run from the caller's
//     thread (Engine::runOnCaller) takes its start from runOnCaller's one clock
//     read and reads the clock again at its end only while timing is on, so
//     that the untimed hot path costs nothing more.
// One rule for every path, ProcessGroupNCCL's: a Work has a duration iff the
// group's timing was on when it was issued, whichever thread ran it and
// whether or not the flight recorder is on. A Work without a duration says
// why and how to get one. (Completion hooks get host times whatever the
// timing: the executor reads them anyway.)
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <optional>

#include "core/base/op_context.h"

namespace ringreduce {

// CUDA events (timing-capable) around a collective's device work.
struct DeviceSpan {
  DeviceSpan();
  c10::Event start;
  c10::Event end;
};

// Whose duration: for the errors ("allreduce #3 on rank 0").
struct WorkName {
  c10d::OpType type;
  uint64_t seq;
  int rank;
};

// Why a Work has no measurement, for its error.
enum class Untimed {
  NotYet,        // it has not completed
  NeverRan,      // it failed before it started (the group had failed)
  TimingOff,     // it was not timed: timing was off when it was issued
  Captured,      // it was captured into a CUDA graph
};

// Raises: `who` has no duration, for `why` (on the device or the host).
[[noreturn]] void refuseDuration(const WorkName& who, Untimed why, bool onDevice);

// The elapsed milliseconds from `start` to `end`; raises naming `who`
// (`why` when they were not recorded; "not finished" while the device has
// not reached `end`).
float deviceMilliseconds(const WorkName& who, const c10::Event* start, const c10::Event* end,
                         Untimed why);
// The same between two host times; an unset one raises with `why` (an
// unset start: NeverRan).
float hostMilliseconds(const WorkName& who, Clock::time_point start, Clock::time_point end,
                       Untimed why);

// What a collective run from the caller's thread knows of its duration.
struct CallerTiming {
  Clock::time_point started{};          // runOnCaller's clock read (OpContext::started)
  Clock::time_point finished{};         // host, while timed: after the work
  std::shared_ptr<DeviceSpan> device;   // CUDA, while timed: around the work
  bool captured = false;                // CUDA: captured into a graph, not timed
};

// Times a collective run from the caller's thread through Engine::runOnCaller,
// any on-caller path alike: construct it before runOnCaller, call begin() and
// end() inside the launch around the work, and hand timing() to
// finishOnCaller. Untimed it costs a copy of runOnCaller's start time.
class CallerTimer {
 public:
  // `timed`: the group's timing is on. `output`: the collective's tensor;
  // on CUDA, `stream` is the stream its work goes on (none: it is being
  // captured into a CUDA graph, and is not timed).
  CallerTimer(bool timed, const at::Tensor& output,
              std::optional<c10::Stream> stream = std::nullopt);

  void begin(const OpContext& op);
  void end();
  const CallerTiming& timing() const { return timing_; }

 private:
  const bool timed_;
  const bool onHost_;
  const std::optional<c10::Stream> stream_;
  CallerTiming timing_;
};

}  // namespace ringreduce
