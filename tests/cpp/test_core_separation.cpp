// Moving a waiting thread off the core it shares with its peer
// (core/base/core_separation.h): after kStreak waits in a row beside the
// peer, under load, at most once per kMinInterval; and the move itself,
// which leaves the thread's mask as it was.
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <thread>

#include "core/base/core_separation.h"

using namespace ringreduce;

namespace {

struct Scripted {
  CoreSeparation::Clock::time_point now{std::chrono::seconds(1)};
  int moves = 0;
  bool contended = true;
  CoreSeparation separation{true, [this] { return now; }, [this] {
                              ++moves;
                              return true;
                            }};
  bool wait(bool beside) {
    return separation.noteWait(beside, [this] { return contended; });
  }
};

}  // namespace

TEST(CoreSeparation, MovesAfterAStreakOfWaitsBesideThePeerUnderLoad) {
  Scripted s;
  for (int i = 1; i < CoreSeparation::kStreak; ++i) EXPECT_FALSE(s.wait(true)) << "wait " << i;
  EXPECT_TRUE(s.wait(true));
  EXPECT_EQ(s.moves, 1);
  EXPECT_EQ(s.separation.moves(), 1);
}

TEST(CoreSeparation, AWaitForAPeerElsewhereStartsTheStreakAgain) {
  Scripted s;
  for (int i = 1; i < CoreSeparation::kStreak; ++i) s.wait(true);
  s.wait(false);
  for (int i = 1; i < CoreSeparation::kStreak; ++i) s.wait(true);
  EXPECT_EQ(s.moves, 0);
  s.wait(true);
  EXPECT_EQ(s.moves, 1);
}

TEST(CoreSeparation, NoMoveWhereTheCoresAreFreeOrItIsTurnedOff) {
  Scripted free;
  free.contended = false;
  for (int i = 0; i < 4 * CoreSeparation::kStreak; ++i) free.wait(true);
  EXPECT_EQ(free.moves, 0);
  int moves = 0;
  CoreSeparation off(false, nullptr, [&] { return ++moves > 0; });
  for (int i = 0; i < 4 * CoreSeparation::kStreak; ++i) {
    off.noteWait(true, [] { return true; });
  }
  EXPECT_EQ(moves, 0);
}

TEST(CoreSeparation, AtMostOneMovePerInterval) {
  Scripted s;
  for (int i = 0; i < CoreSeparation::kStreak; ++i) s.wait(true);
  ASSERT_EQ(s.moves, 1);
  // Met beside the peer again at once: not before the interval is over.
  s.now += CoreSeparation::kMinInterval / 2;
  for (int i = 0; i < 3 * CoreSeparation::kStreak; ++i) s.wait(true);
  EXPECT_EQ(s.moves, 1);
  s.now += CoreSeparation::kMinInterval;
  for (int i = 0; i < CoreSeparation::kStreak; ++i) s.wait(true);
  EXPECT_EQ(s.moves, 2);
}

// The real move: a thread allowed two CPUs and running on one of them ends
// on the other, with both allowed again afterwards. On a machine that
// gives this process one CPU there is nowhere to go, and it says so.
TEST(CoreSeparation, TheMoveLeavesTheCpuAndKeepsTheMask) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int cpus[2] = {-1, -1};
  for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c) {
    if (CPU_ISSET(c, &mine)) cpus[found++] = c;
  }
  std::thread([&] {
    if (cpus[1] < 0) {
      EXPECT_FALSE(moveThreadOffItsCpu()) << "one CPU: nowhere to go";
      return;
    }
    // Onto the first CPU, then allowed both: it stays on the first until moved.
    cpu_set_t one, two;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    ASSERT_EQ(sched_getcpu(), cpus[0]);
    CPU_ZERO(&two);
    CPU_SET(cpus[0], &two);
    CPU_SET(cpus[1], &two);
    ASSERT_EQ(sched_setaffinity(0, sizeof(two), &two), 0);
    const int before = sched_getcpu();
    ASSERT_TRUE(moveThreadOffItsCpu());
    EXPECT_NE(sched_getcpu(), before);
    cpu_set_t after;
    CPU_ZERO(&after);
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&after, &two)) << "the mask it had is back";
    // Allowed one CPU only: nothing moves, and the mask stays.
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    EXPECT_FALSE(moveThreadOffItsCpu());
    CPU_ZERO(&after);
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&after, &one));
  }).join();
}
