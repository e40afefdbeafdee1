// The agreed choice between reading in place and the buffers (gather_forms.h)
#include "core/plan/gather_forms.h"

#include <algorithm>

namespace ringreduce {

namespace {

void keepFastest(uint64_t& best, uint64_t nanos) {
  nanos = std::max<uint64_t>(nanos, 1);  // 0 means "none"
  best = best == 0 ? nanos : std::min(best, nanos);
}

}  // namespace

int GatherForms::classOf(size_t bytes) {
  int c = 0;
  for (size_t top = kFirstClassBytes * 2; bytes >= top && c < kClasses - 1; top *= 2) ++c;
  return c;
}

GatherForms::Call GatherForms::peek(size_t bytes) const {
  Call call;
  call.sizeClass = classOf(bytes);
  const SizeClass& c = classes_[static_cast<size_t>(call.sizeClass)];
  const uint64_t trial = c.calls % kRoundEvery - kWarmUp;  // wraps below the warm-up
  if (trial < 2 * kTrials) {
    call.form = trial % 2 == 0 ? Form::Buffers : Form::InPlace;
    call.votes = trial == 2 * kTrials - 1;
  } else {
    call.form = c.decided;
  }
  return call;
}

GatherForms::Call GatherForms::next(size_t bytes) {
  const Call call = peek(bytes);
  SizeClass& c = classes_[static_cast<size_t>(call.sizeClass)];
  if (c.calls % kRoundEvery == kWarmUp) c.best = Vote{};  // the round's first trial
  ++c.calls;
  return call;
}

void GatherForms::record(const Call& call, uint64_t nanos) {
  SizeClass& c = classes_[static_cast<size_t>(call.sizeClass)];
  // Only the trials count: the rest of the round runs one form alone.
  if ((c.calls - 1) % kRoundEvery - kWarmUp >= 2 * kTrials) return;
  keepFastest(call.form == Form::InPlace ? c.best.inPlaceNanos : c.best.buffersNanos, nanos);
}

GatherForms::Vote GatherForms::vote(const Call& call) const {
  return classes_[static_cast<size_t>(call.sizeClass)].best;
}

void GatherForms::decide(const Call& call, const std::vector<Vote>& everyRank) {
  uint64_t inPlace = 0;
  uint64_t buffers = 0;
  for (const Vote& v : everyRank) {
    inPlace += v.inPlaceNanos;
    buffers += v.buffersNanos;
  }
  classes_[static_cast<size_t>(call.sizeClass)].decided =
      inPlace < buffers ? Form::InPlace : Form::Buffers;
}

}  // namespace ringreduce
