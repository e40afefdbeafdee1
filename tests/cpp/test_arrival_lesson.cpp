// What an asynchronous caller's arrival wait learns after it gave up
// (engine/arrival_lesson.h): how long after the wait's start the queued form
// of that collective ended, once, from that collective only; and what its
// wait's budget then does with it (SpinBudget::wokeAfter, on a simulated
// clock).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/base/spin_budget.h"
#include "engine/arrival_lesson.h"

using namespace ringreduce;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

namespace {

const ArrivalLesson::Clock::time_point kStart{std::chrono::seconds(100)};

TEST(ArrivalLesson, NothingToLearnUntilTheGivenUpCollectiveRan) {
  ArrivalLesson lesson;
  EXPECT_FALSE(lesson.take().has_value());
  lesson.gaveUp(7, kStart);
  EXPECT_FALSE(lesson.take().has_value());
  lesson.ran(7, kStart + microseconds(12));
  const auto late = lesson.take();
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(*late, microseconds(12));
}

TEST(ArrivalLesson, OnlyTheCollectiveGivenUpTeachesAndOnlyOnce) {
  ArrivalLesson lesson;
  lesson.gaveUp(7, kStart);
  lesson.ran(6, kStart + microseconds(3));  // an earlier queued collective
  lesson.ran(8, kStart + microseconds(4));  // one queued later, not given up
  EXPECT_FALSE(lesson.take().has_value());
  lesson.ran(7, kStart + microseconds(9));
  lesson.ran(7, kStart + microseconds(500));  // told twice: the first end counts
  EXPECT_EQ(lesson.take(), nanoseconds(microseconds(9)));
  EXPECT_FALSE(lesson.take().has_value());  // taken once
}

TEST(ArrivalLesson, ALaterGiveUpReplacesOneWhoseCollectiveHasNotRun) {
  ArrivalLesson lesson;
  lesson.gaveUp(3, kStart);
  lesson.gaveUp(4, kStart + microseconds(100));
  lesson.ran(3, kStart + microseconds(5));
  EXPECT_FALSE(lesson.take().has_value());
  lesson.ran(4, kStart + microseconds(120));
  EXPECT_EQ(lesson.take(), nanoseconds(microseconds(20)));
}

TEST(ArrivalLesson, NumberZeroIsNoCollective) {
  ArrivalLesson lesson;
  lesson.ran(0, kStart);
  EXPECT_FALSE(lesson.take().has_value());
}

TEST(ArrivalLesson, TheQueuedFormMayRunOnAnotherThread) {
  ArrivalLesson lesson;
  lesson.gaveUp(11, kStart);
  std::thread worker([&] { lesson.ran(11, kStart + microseconds(15)); });
  worker.join();
  EXPECT_EQ(lesson.take(), nanoseconds(microseconds(15)));
}

// The engine hands the lesson to its arrival wait's budget
// (Engine::applyArrivalLesson): a budget that fell to blocking at once
// spins again, long enough for peers as late as those were (at least twice
// that, at least a probe's spin: for the arrival wait's 25 us, the whole
// ceiling); peers later than the ceiling leave it where it was.
TEST(ArrivalLesson, AWaitThatStoppedSpinningSpinsAgainWherePeersCameWithinItsCeiling) {
  ArrivalLesson::Clock::time_point now = kStart;
  const microseconds ceiling(25);
  SpinBudget budget(ceiling, true, [&] { return now; });
  const auto runOut = [&] {  // spins that run out, one after another, halve it to nothing
    for (int i = 0; i < 8; ++i) {
      budget.startWait();
      while (budget.keepSpinning(now)) now += microseconds(1);
    }
  };
  runOut();
  EXPECT_EQ(budget.budget(), nanoseconds(0));

  ArrivalLesson lesson;
  lesson.gaveUp(5, now);
  lesson.ran(5, now + microseconds(40));  // later than the ceiling
  budget.wokeAfter(*lesson.take());
  EXPECT_EQ(budget.budget(), nanoseconds(0));

  lesson.gaveUp(6, now);
  lesson.ran(6, now + microseconds(9));
  budget.wokeAfter(*lesson.take());
  EXPECT_EQ(budget.budget(), nanoseconds(ceiling));

  // A longer ceiling shows the rule itself: twice the lateness.
  SpinBudget longer(microseconds(1000), true, [&] { return now; });
  for (int i = 0; i < 8; ++i) {
    longer.startWait();
    while (longer.keepSpinning(now)) now += microseconds(10);
  }
  ASSERT_EQ(longer.budget(), nanoseconds(0));
  lesson.gaveUp(7, now);
  lesson.ran(7, now + microseconds(300));
  longer.wokeAfter(*lesson.take());
  EXPECT_EQ(longer.budget(), nanoseconds(microseconds(600)));
}

}  // namespace

namespace {

// Both arrival waits of Engine::runOnCaller, each spun out to nothing, then
// taught by lessons (teachArrivalWaits): peers within the first wait's
// ceiling raise that one only; later peers, within the longer wait's, raise
// the longer one (twice the lateness, at most its ceiling); later still,
// neither.
TEST(ArrivalLesson, PeersLaterThanTheFirstWaitTeachTheLongerOne) {
  ArrivalLesson::Clock::time_point now = kStart;
  SpinBudget first(microseconds(25), true, [&] { return now; });
  SpinBudget longer(microseconds(100), true, [&] { return now; });
  const auto runOut = [&](SpinBudget& budget) {
    for (int i = 0; i < 8; ++i) {
      budget.startWait();
      while (budget.keepSpinning(now)) now += microseconds(1);
    }
    ASSERT_EQ(budget.budget(), nanoseconds(0));
  };
  runOut(first);
  runOut(longer);

  teachArrivalWaits(microseconds(150), first, longer);  // beyond both ceilings
  EXPECT_EQ(first.budget(), nanoseconds(0));
  EXPECT_EQ(longer.budget(), nanoseconds(0));

  teachArrivalWaits(microseconds(40), first, longer);
  EXPECT_EQ(first.budget(), nanoseconds(0));
  EXPECT_EQ(longer.budget(), nanoseconds(microseconds(80)));

  runOut(longer);
  teachArrivalWaits(microseconds(9), first, longer);  // the first wait catches these
  EXPECT_EQ(first.budget(), nanoseconds(microseconds(25)));
  EXPECT_EQ(longer.budget(), nanoseconds(0));
}

}  // namespace
