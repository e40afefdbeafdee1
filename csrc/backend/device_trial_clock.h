// The autotuner's clock for the CUDA candidates across nodes
// (AllreduceTuner::cudaPaths): the device's own time on the group's stream,
// between a mark queued before the candidate and one queued after it. Both
// candidates' work ends there: NCCL's kernels, and the device ring's
// reductions and the network it waits for (its schedule returns with its
// device work done, and the end mark is queued then). So both are timed
// alike, and no host wait (a poll's back-off) is added to one of them.
// stop() waits for the end mark asleep on a wake fd that the device writes
// (cuda/stream_wake.h), within the operation's deadline. Torch-free;
// defined only where the CUDA path is compiled (and on the tests' fake
// device).
#pragma once

#include "algorithms/tuning/autotune.h"
#include "core/base/op_context.h"

namespace ringreduce {

class StreamTrialClock : public TrialClock {
 public:
  // `stream`: the group's stream the candidates run on, of `device`.
  StreamTrialClock(int device, void* stream, const OpContext& op);
  ~StreamTrialClock() override;
  StreamTrialClock(const StreamTrialClock&) = delete;
  StreamTrialClock& operator=(const StreamTrialClock&) = delete;

  void start() override;
  // Throws TimeoutError when the device has not reached the end mark by
  // the operation's deadline.
  double stop() override;

 private:
  void release();

  const int device_;
  void* const stream_;
  const OpContext& op_;
  void* start_ = nullptr;
  void* end_ = nullptr;
};

}  // namespace ringreduce
