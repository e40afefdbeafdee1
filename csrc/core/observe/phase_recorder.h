// The phases of one operation for the timeline (core/observe/timeline.h): when it
// was queued, copied in, waited for its peers, reduced, copied out.
//
// The engine gives each operation a recorder only while RINGREDUCE_TIMELINE
// is set, and passes it down in OpContext::phases; code marks a phase with a
// PhaseScope, which costs one test of that pointer when the timeline is off.
// One thread (the one running the operation) writes a recorder: no lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/op_context.h"
#include "core/observe/latency_probe.h"

namespace ringreduce {

enum class Phase : uint8_t {
  Queued,     // submitted, waiting for the operations before it
  CopyIn,     // staged inputs reach the host (CUDA tensors)
  Transfer,   // the algorithm: messages, and the waits and reductions inside
  WaitPeers,  // inside a transport wait: the peers' data has not arrived yet
  Reduce,     // a host reduction loop
  CopyOut,    // staged outputs go back to the device
  Kernel,     // device work (reserved for the CUDA path)
};
constexpr size_t kPhaseCount = 7;

// "queued", "copy in", "transfer", "waiting for peers", "reduce", "copy out", "kernel"
const char* phaseName(Phase phase);

struct PhaseSpan {
  Phase phase;
  Clock::time_point begin, end;
};

class PhaseRecorder {
 public:
  // Waits and reductions kept per operation: a large tensor cut into many
  // segments would otherwise write thousands; the totals count every span.
  static constexpr size_t kMaxSpans = 128;
  // Spans shorter than this count in the totals only: they would not show
  // in a viewer, and a no-op (the copies of a CPU tensor) would fill the file.
  // Except "transfer", always drawn: every operation shows where its
  // algorithm ran (a barrier whose peer had arrived takes less).
  // A span that begins less than this after the last one, of its kind,
  // extends it.
  static constexpr std::chrono::microseconds kMinSpan{1};

  void add(Phase phase, Clock::time_point begin, Clock::time_point end);

  // In the order they ended (an inner span before the one around it).
  const std::vector<PhaseSpan>& spans() const { return spans_; }
  Clock::duration total(Phase phase) const { return totals_[static_cast<size_t>(phase)]; }
  // Spans beyond kMaxSpans, counted in the totals but not kept.
  size_t dropped() const { return dropped_; }

 private:
  std::vector<PhaseSpan> spans_;
  std::array<Clock::duration, kPhaseCount> totals_{};
  size_t repeated_ = 0;  // waits and reductions seen
  size_t dropped_ = 0;
};

// Times the enclosing block as `phase` of the operation when it has a
// recorder; does nothing otherwise.
class PhaseScope {
 public:
  PhaseScope(PhaseRecorder* recorder, Phase phase) : recorder_(recorder), phase_(phase) {
    if (recorder_ != nullptr) begin_ = Clock::now();
  }
  ~PhaseScope() {
    if (recorder_ != nullptr) recorder_->add(phase_, begin_, Clock::now());
    // Every host reduction is inside one: the latency probe's mark too.
    if (phase_ == Phase::Reduce) probe::mark(ProbePoint::Reduced);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseRecorder* const recorder_;
  const Phase phase_;
  Clock::time_point begin_{};
};

}  // namespace ringreduce
