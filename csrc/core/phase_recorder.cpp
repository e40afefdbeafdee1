#include "core/phase_recorder.h"

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
  if (end - begin < kMinSpan) return;
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
