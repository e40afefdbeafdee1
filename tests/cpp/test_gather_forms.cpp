// The agreed choice between reading a gather's blocks in place and the
// host channel's buffers (core/plan/gather_forms.h): each round, after its
// warm-up, holds trials of both forms, the buffers first; the last trial carries the votes;
// every rank that reads the same votes takes the same decision, which holds
// until the next round's trials; a slow outlier in one trial does not turn it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/plan/gather_forms.h"

namespace ringreduce {
namespace {

using Form = GatherForms::Form;
constexpr size_t kMiB = size_t{1} << 20;

// Runs a round's warm-up (the form decided so far) and its trials on `forms`
// with every in-place call taking `inPlace` ns and every buffered one
// `buffers` ns; returns the voting call.
GatherForms::Call runTrials(GatherForms& forms, size_t bytes, uint64_t inPlace,
                            uint64_t buffers) {
  const Form before = forms.decided(bytes);
  for (uint32_t i = 0; i < GatherForms::kWarmUp; ++i) {
    const GatherForms::Call call = forms.next(bytes);
    EXPECT_EQ(call.form, before) << "warm-up call " << i;
    EXPECT_FALSE(call.votes);
    forms.record(call, 1);  // not a trial: counts for no vote
  }
  for (uint32_t i = 0; i < 2 * GatherForms::kTrials; ++i) {
    const GatherForms::Call call = forms.next(bytes);
    EXPECT_EQ(call.form, i % 2 == 0 ? Form::Buffers : Form::InPlace) << "trial " << i;
    EXPECT_EQ(call.votes, i == 2 * GatherForms::kTrials - 1) << "trial " << i;
    if (call.votes) return call;
    forms.record(call, call.form == Form::InPlace ? inPlace : buffers);
  }
  ADD_FAILURE() << "no trial carried the votes";
  return {};
}

TEST(GatherForms, SizesFallIntoPowerOfTwoClassesFromTheFirst) {
  EXPECT_EQ(GatherForms::classOf(256 * 1024), 0);
  EXPECT_EQ(GatherForms::classOf(512 * 1024 - 1), 0);
  EXPECT_EQ(GatherForms::classOf(512 * 1024), 1);
  EXPECT_EQ(GatherForms::classOf(kMiB), 2);
  EXPECT_EQ(GatherForms::classOf(~size_t{0}), GatherForms::kClasses - 1);
}

TEST(GatherForms, TheRoundFollowsTheFasterFormOnceTheVotesAreIn) {
  for (const bool inPlaceFaster : {true, false}) {
    GatherForms forms;
    const GatherForms::Call voting =
        runTrials(forms, kMiB, inPlaceFaster ? 60000 : 100000, 66000);
    const GatherForms::Vote mine = forms.vote(voting);
    EXPECT_EQ(mine.inPlaceNanos, inPlaceFaster ? 60000u : 100000u);
    EXPECT_EQ(mine.buffersNanos, 66000u);
    forms.decide(voting, {mine, mine});
    forms.record(voting, 1);  // the voting call's own time counts for no vote
    const Form want = inPlaceFaster ? Form::InPlace : Form::Buffers;
    EXPECT_EQ(forms.decided(kMiB), want);
    for (uint32_t i = GatherForms::kWarmUp + 2 * GatherForms::kTrials;
         i < GatherForms::kRoundEvery; ++i) {
      const GatherForms::Call call = forms.next(kMiB);
      ASSERT_EQ(call.form, want) << "call " << i;
      ASSERT_FALSE(call.votes);
      forms.record(call, want == Form::InPlace ? 1000000 : 1);  // outside the trials: ignored
    }
    // The next round keeps the decision through its warm-up, then tries
    // both forms again from a clean vote.
    for (uint32_t i = 0; i < GatherForms::kWarmUp; ++i) ASSERT_EQ(forms.next(kMiB).form, want);
    const GatherForms::Call next = forms.next(kMiB);
    EXPECT_EQ(next.form, Form::Buffers);
    forms.record(next, 70000);
    EXPECT_EQ(forms.vote(next).inPlaceNanos, 0u);
    EXPECT_EQ(forms.vote(next).buffersNanos, 70000u);
  }
}

TEST(GatherForms, RanksThatReadTheSameVotesDecideAlikeWhateverTheirOwnTimings) {
  // Rank 0 saw the buffers faster, rank 1 in place by more: the sum decides.
  GatherForms rank0, rank1;
  const GatherForms::Call v0 = runTrials(rank0, kMiB, 80000, 70000);
  const GatherForms::Call v1 = runTrials(rank1, kMiB, 50000, 75000);
  const std::vector<GatherForms::Vote> votes{rank0.vote(v0), rank1.vote(v1)};
  rank0.decide(v0, votes);
  rank1.decide(v1, votes);
  EXPECT_EQ(rank0.decided(kMiB), Form::InPlace);
  EXPECT_EQ(rank1.decided(kMiB), Form::InPlace);
}

TEST(GatherForms, ASlowOutlierInOneTrialDoesNotTurnTheChoice) {
  GatherForms forms;
  GatherForms::Call voting{};
  for (uint32_t i = 0; i < GatherForms::kWarmUp; ++i) forms.record(forms.next(kMiB), 1);
  for (uint32_t i = 0; i < 2 * GatherForms::kTrials; ++i) {
    const GatherForms::Call call = forms.next(kMiB);
    if (call.votes) {
      voting = call;
      break;
    }
    // The first in-place trial was preempted; the buffers were 66 us each time.
    const uint64_t nanos = call.form == Form::Buffers ? 66000 : (i == 1 ? 900000 : 50000);
    forms.record(call, nanos);
  }
  forms.decide(voting, {forms.vote(voting)});
  EXPECT_EQ(forms.decided(kMiB), Form::InPlace);
}

// A run that only publishes ahead peeks; the later run of the same
// collective takes the same call.
TEST(GatherForms, APeekGivesWhatTheNextCallTakesWithoutCountingIt) {
  GatherForms forms;
  for (uint32_t i = 0; i < GatherForms::kWarmUp + 2 * GatherForms::kTrials + 2; ++i) {
    const GatherForms::Call peeked = forms.peek(kMiB);
    EXPECT_EQ(forms.peek(kMiB).form, peeked.form);
    const GatherForms::Call taken = forms.next(kMiB);
    ASSERT_EQ(taken.form, peeked.form) << "call " << i;
    ASSERT_EQ(taken.votes, peeked.votes) << "call " << i;
    if (taken.votes) forms.decide(taken, {GatherForms::Vote{1, 2}});
  }
}

TEST(GatherForms, EachSizeClassKeepsItsOwnCountAndDecision) {
  GatherForms forms;
  const GatherForms::Call small = runTrials(forms, 256 * 1024, 30000, 15000);
  forms.decide(small, {forms.vote(small)});
  EXPECT_EQ(forms.decided(256 * 1024), Form::Buffers);
  EXPECT_EQ(forms.next(256 * 1024).form, Form::Buffers);
  // A class not seen yet reads in place until its own trials.
  EXPECT_EQ(forms.decided(4 * kMiB), Form::InPlace);
  EXPECT_EQ(forms.next(4 * kMiB).form, Form::InPlace);
}

}  // namespace
}  // namespace ringreduce
