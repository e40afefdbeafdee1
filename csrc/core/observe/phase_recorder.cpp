// The phases of one operation for the timeline (phase_recorder.h)
#include "core/observe/phase_recorder.h"

namespace ringreduce {

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::Queued: return "queued";
    case Phase::CopyIn: return "copy in";
    case Phase::Transfer: return "transfer";
    case Phase::WaitPeers: return "waiting for peers";
    case Phase::Reduce: return "reduce";
    case Phase::CopyOut: return "copy out";
    case Phase::Kernel: return "kernel";
  }
  return "?";
}

void PhaseRecorder::add(Phase phase, Clock::time_point begin, Clock::time_point end) {
  totals_[static_cast<size_t>(phase)] += end - begin;
  // A span that follows one of its kind almost at once continues it (the
  // waits for a step's sends, one after the other): one span to draw. No
  // span of another kind ended in between, so nesting is kept.
  if (!spans_.empty() && spans_.back().phase == phase && begin - spans_.back().end < kMinSpan) {
    spans_.back().end = end;
    return;
  }
  if (end - begin < kMinSpan && phase != Phase::Transfer) return;
  // The phases an operation passes once are always kept, so the spans
  // that repeat (waits, reductions) cannot crowd out the ones around them.
  const bool once = phase == Phase::Queued || phase == Phase::CopyIn ||
                    phase == Phase::Transfer || phase == Phase::CopyOut;
  if (!once && repeated_++ >= kMaxSpans) {
    ++dropped_;
    return;
  }
  spans_.push_back({phase, begin, end});
}

}  // namespace ringreduce
