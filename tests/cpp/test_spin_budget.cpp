// How long waits spin (core/base/spin_budget.h), on a simulated clock with
// scripted waits: the budget stays at its ceiling while spins pay, falls to
// blocking at once when they stop paying or the thread is descheduled, and
// comes back when they pay again, each within a bounded number of waits.
#include <gtest/gtest.h>

#include <chrono>

#include "core/base/spin_budget.h"

using namespace ringreduce;
using std::chrono::microseconds;

namespace {

constexpr microseconds kCeiling{1000};
constexpr microseconds kPass{2};  // one idle pass of a wait loop

// One scripted wait and how it ended.
struct Script {
  microseconds arrivesAfter;         // when the awaited event comes
  microseconds descheduledFor{0};    // a gap in the spin (preemption, a late yield)
};
enum class Ended { WithoutSpinning, WhileSpinning, Blocked };

class SimulatedWaits {
 public:
  SimulatedWaits(microseconds ceiling = kCeiling, bool adaptive = true)
      : budget(ceiling, adaptive, [this] { return now; }) {}

  // Runs a wait loop as Transport::waitUntilDeadline does: idle passes that
  // spin until the event or until the budget says block; a block lasts
  // until the event.
  // `atLeast`: the loop asks for a minimum spin (startWait(atLeast)).
  Ended wait(const Script& script, microseconds atLeast = microseconds(0)) {
    const auto arrival = now + script.arrivesAfter;
    if (atLeast.count() > 0) {
      budget.startWait(atLeast);
    } else {
      budget.startWait();
    }
    spunBefore = false;
    bool gapDone = script.descheduledFor.count() == 0;
    while (true) {
      now += kPass;
      if (now >= arrival) {
        budget.finishWait();
        return spunBefore ? Ended::WhileSpinning : Ended::WithoutSpinning;
      }
      if (!budget.keepSpinning()) {
        ++blocks;
        now = arrival;
        return Ended::Blocked;
      }
      if (!spunBefore) ++spinningWaits;
      spunBefore = true;
      if (!gapDone) {  // the scheduler takes the core during the spin
        now += script.descheduledFor;
        gapDone = true;
      }
    }
  }

  // Runs `count` alike waits; how many of them ended while spinning.
  int run(int count, const Script& script, microseconds atLeast = microseconds(0)) {
    int paid = 0;
    for (int i = 0; i < count; ++i) {
      paid += wait(script, atLeast) == Ended::WhileSpinning ? 1 : 0;
    }
    return paid;
  }

  // Waits until the budget is back at its ceiling; how many it took
  // (limit + 1 if it never came back).
  int waitsUntilFullBudget(const Script& script, int limit) {
    for (int i = 1; i <= limit; ++i) {
      wait(script);
      if (budget.budget() == budget.ceiling()) return i;
    }
    return limit + 1;
  }

  int waitsUntilBlockingAtOnce(const Script& script, int limit) {
    for (int i = 1; i <= limit; ++i) {
      wait(script);
      if (budget.budget().count() == 0) return i;
    }
    return limit + 1;
  }

  SpinBudget::Clock::time_point now{std::chrono::seconds(1)};
  SpinBudget budget;
  int blocks = 0;
  int spinningWaits = 0;  // waits that spun at all
  bool spunBefore = false;  // this wait has spun
};

// A peer that answers within 30 us, on cores of its own.
const Script kQuiet{microseconds(30)};
// A peer whose message comes after 3 ms, the spinner preempted for 2 ms
// (busy processes on every core).
const Script kLoaded{microseconds(3000), microseconds(2000)};
// A peer that is late (its own compute), this thread never preempted.
const Script kLate{microseconds(5000)};

}  // namespace

TEST(SpinBudget, OnAQuietMachineEveryWaitSpinsAndThePeerIsCaughtSpinning) {
  SimulatedWaits sim;
  EXPECT_EQ(sim.run(200, kQuiet), 200);
  EXPECT_EQ(sim.blocks, 0);
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling());
}

TEST(SpinBudget, UnderLoadWaitsSoonBlockWithoutSpinning) {
  SimulatedWaits sim;
  EXPECT_EQ(sim.wait(kLoaded), Ended::Blocked);
  EXPECT_LE(sim.waitsUntilBlockingAtOnce(kLoaded, 10), 5);
  // Under lasting load only the rare probes spin: the cores go to the
  // processes that need them. But it keeps looking, or it could never come
  // back.
  sim.spinningWaits = 0;
  sim.run(400, kLoaded);
  EXPECT_LE(sim.spinningWaits, 400 / SpinBudget::kMinProbeInterval);
  EXPECT_GE(sim.spinningWaits, 400 / SpinBudget::kMaxProbeInterval);
  EXPECT_EQ(sim.budget.budget().count(), 0);
}

TEST(SpinBudget, SpinsThatRunOutShrinkToBlockingWithinAFewWaits) {
  SimulatedWaits sim;
  EXPECT_LE(sim.waitsUntilBlockingAtOnce(kLate, 10), 6);
}

TEST(SpinBudget, ItComesBackToFullSpinsWhenTheLoadGoes) {
  SimulatedWaits sim;
  sim.run(1000, kLoaded);  // long enough for the probes to be as rare as they get
  ASSERT_EQ(sim.budget.budget().count(), 0);
  const int bound = SpinBudget::kMaxProbeInterval + 1 + 4;  // a probe, then doublings
  EXPECT_LE(sim.waitsUntilFullBudget(kQuiet, 2 * bound), bound);
  // And it stays there.
  EXPECT_EQ(sim.run(100, kQuiet), 100);
}

TEST(SpinBudget, LoadThatComesAndGoesIsFollowedEachTime) {
  SimulatedWaits sim;
  for (int round = 0; round < 3; ++round) {
    EXPECT_LE(sim.waitsUntilBlockingAtOnce(kLoaded, 10), 5) << "round " << round;
    sim.run(50, kLoaded);
    EXPECT_LE(sim.waitsUntilFullBudget(kQuiet, 200), SpinBudget::kMaxProbeInterval + 5)
        << "round " << round;
  }
}

TEST(SpinBudget, OneMissAmongPaidSpinsKeepsSpinning) {
  // Skew between ranks makes a wait run out now and then on a quiet machine:
  // that alone must not turn spinning off.
  SimulatedWaits sim;
  for (int i = 0; i < 50; ++i) {
    sim.wait(kLate);
    sim.run(3, kQuiet);
  }
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling());
  // So must a preemption now and then (a little background load).
  int paid = 0;
  for (int i = 0; i < 50; ++i) {
    sim.wait(kLoaded);
    paid += sim.run(3, kQuiet);
  }
  EXPECT_EQ(paid, 150);
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling());
}

TEST(SpinBudget, ADescheduledSpinStopsAtOnceButAPassesOwnWorkIsNoSign) {
  SimulatedWaits sim;
  sim.budget.startWait();
  ASSERT_TRUE(sim.budget.keepSpinning());
  sim.now += kPass;
  const auto passStart = sim.now;  // the pass reads the clock, then looks
  sim.now += microseconds(300);    // and copies a large message
  sim.budget.moved(passStart);
  EXPECT_TRUE(sim.budget.keepSpinning());
  sim.now += microseconds(300);  // the same gap with nothing done: preempted
  EXPECT_FALSE(sim.budget.keepSpinning());  // well inside its budget
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling() / 2);
}

// The rule of spin_budget.h: a gap between two reads of a spin is a
// preemption even when the event came meanwhile and the loop found it on
// its next pass. Each of the three ways a wait can find it: at the end of
// the wait (finishWait's read), on a pass that reports it (moved(passStart)
// of the pass after the gap), and on one that reads the clock itself
// (moved()).
TEST(SpinBudget, APreemptedSpinWhoseEventCameMeanwhileIsNotPaid) {
  // The simulated loop: spinning, preempted for 2 ms, during which the
  // peer's message came; the first pass after it finds it.
  SimulatedWaits sim;
  EXPECT_EQ(sim.wait({microseconds(1000), microseconds(2000)}), Ended::WhileSpinning);
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling() / 2);

  SimulatedWaits reported;
  reported.budget.startWait();
  ASSERT_TRUE(reported.budget.keepSpinning());
  reported.now += microseconds(2000);
  reported.budget.moved(reported.now);  // the pass that found it started after the gap
  EXPECT_EQ(reported.budget.budget(), reported.budget.ceiling() / 2);
  EXPECT_FALSE(reported.budget.waiting());  // its spin is over
  EXPECT_FALSE(reported.budget.keepSpinning());
  reported.budget.finishWait();  // closed already: nothing more to learn
  EXPECT_EQ(reported.budget.budget(), reported.budget.ceiling() / 2);

  SimulatedWaits unmarked;
  unmarked.budget.startWait();
  ASSERT_TRUE(unmarked.budget.keepSpinning());
  unmarked.now += microseconds(2000);
  unmarked.budget.moved();
  unmarked.budget.finishWait();
  EXPECT_EQ(unmarked.budget.budget(), unmarked.budget.ceiling() / 2);
}

TEST(SpinBudget, AGapJustWithinTheThresholdStillPays) {
  SimulatedWaits sim;
  sim.budget.startWait();
  ASSERT_TRUE(sim.budget.keepSpinning());
  sim.now += SpinBudget::kDescheduledGap;  // not longer than the gap
  sim.budget.finishWait();
  sim.budget.startWait();
  ASSERT_TRUE(sim.budget.keepSpinning());
  sim.now += SpinBudget::kDescheduledGap + microseconds(1);
  sim.budget.finishWait();
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling() / 2);
}

TEST(SpinBudget, ASpinThatFoundItsEventBeforeSpinningLearnsNothing) {
  // Found on the first pass, before any idle one: no spin to judge, and
  // no clock read to pay for (the clock below would fail the test).
  SimulatedWaits sim;
  sim.run(3, kLate);  // below the ceiling
  const auto before = sim.budget.budget();
  ASSERT_LT(before, sim.budget.ceiling());
  sim.budget.startWait();
  sim.budget.setClock([]() -> SpinBudget::Clock::time_point {
    ADD_FAILURE() << "the budget read its clock";
    return {};
  });
  sim.budget.moved();
  sim.budget.finishWait();
  EXPECT_EQ(sim.budget.budget(), before);
}

TEST(SpinBudget, FixedSpinsNeverAdapt) {
  SimulatedWaits sim(kCeiling, /*adaptive=*/false);
  sim.run(20, kLoaded);
  sim.run(20, kLate);
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling());
  // Each spins its whole length, preempted or not.
  sim.budget.startWait();
  EXPECT_TRUE(sim.budget.keepSpinning());
  sim.now += microseconds(500);
  EXPECT_TRUE(sim.budget.keepSpinning());
  sim.now += kCeiling;
  EXPECT_FALSE(sim.budget.keepSpinning());
}

TEST(SpinBudget, ACeilingOfZeroNeverSpinsNorProbes) {
  for (bool adaptive : {true, false}) {
    SimulatedWaits sim(microseconds(0), adaptive);
    EXPECT_EQ(sim.run(200, kQuiet), 0);
    EXPECT_EQ(sim.blocks, 200);
  }
}

TEST(SpinBudget, ALowerCeilingClampsAndAHigherOneIsGrownInto) {
  SimulatedWaits sim;
  sim.run(1, kQuiet);  // learnt from a wait: the account is its own now
  sim.budget.setLimits(microseconds(100), true);
  EXPECT_EQ(sim.budget.budget(), microseconds(100));
  sim.budget.setLimits(kCeiling, true);
  EXPECT_LE(sim.waitsUntilFullBudget(kQuiet, 10), 4);
}

TEST(SpinBudget, AYieldingLoopTakesItsPeersTurnsForNoLoad) {
  SimulatedWaits sim;
  sim.budget.setDescheduledGap(microseconds(1000));
  EXPECT_EQ(sim.wait({microseconds(900), microseconds(500)}), Ended::WhileSpinning);
  EXPECT_EQ(sim.budget.budget(), sim.budget.ceiling());
  EXPECT_EQ(sim.wait({microseconds(3000), microseconds(1500)}), Ended::Blocked);
  EXPECT_LT(sim.budget.budget(), sim.budget.ceiling());
}

// A budget given its limits after it was made (the transport's: made with
// the defaults, told RINGREDUCE_SPIN_US later) starts at that ceiling, as
// one made with it does: quiet until its waits say otherwise.
TEST(SpinBudget, LimitsGivenBeforeAnyWaitStartAtTheCeiling) {
  SpinBudget later;
  later.setLimits(kCeiling, true);
  EXPECT_EQ(later.budget(), kCeiling);
  later.setLimits(microseconds(300), true);
  EXPECT_EQ(later.budget(), microseconds(300));
}

// Two threads that wait for each other can both end at 0, each one's event
// coming only after the other's wake-up: a sleep that ended within a probe's
// spin says a spin would have paid, and brings the spin back at once.
TEST(SpinBudget, ASleepThatEndedSoonBringsTheSpinBack) {
  SimulatedWaits sim;
  sim.run(1000, kLoaded);
  ASSERT_EQ(sim.budget.budget().count(), 0);
  sim.budget.wokeAfter(microseconds(250));  // a quiet machine's wake-up, beyond a probe
  EXPECT_GT(sim.budget.budget().count(), 0);
  EXPECT_EQ(sim.wait(kQuiet), Ended::WhileSpinning);
  const int doublings = 4;  // from the probe's eighth of the ceiling
  EXPECT_LE(sim.waitsUntilFullBudget(kQuiet, 2 * doublings), doublings);
}

// The equilibrium the probe's budget alone did not break: after waking, the
// next wait is for a peer that itself sleeps, and its wake-up takes as long
// as this one's did. The budget a sleep brings back outlasts that wake-up,
// also where the budget had only halved (not reached 0) before the sleep.
TEST(SpinBudget, ASleepBringsBackASpinThatOutlastsThePeersWakeUp) {
  const microseconds wakeUp{250};
  const Script peerWakingUp{wakeUp};
  for (const bool fromZero : {true, false}) {
    SimulatedWaits sim;
    if (fromZero) {
      sim.run(1000, kLoaded);
      ASSERT_EQ(sim.budget.budget().count(), 0);
    } else {
      while (sim.budget.budget() >= 2 * wakeUp) {  // spins that did not pay
        ASSERT_EQ(sim.wait(kLoaded), Ended::Blocked);
      }
      ASSERT_GT(sim.budget.budget().count(), 0);
      ASSERT_LT(sim.budget.budget(), 2 * wakeUp);
    }
    sim.budget.wokeAfter(wakeUp);
    EXPECT_GE(sim.budget.budget(), 2 * wakeUp) << (fromZero ? "from 0" : "after halving");
    EXPECT_EQ(sim.wait(peerWakingUp), Ended::WhileSpinning);
    EXPECT_EQ(sim.wait(peerWakingUp), Ended::WhileSpinning);
  }
}

TEST(SpinBudget, ALongSleepOrAFixedSpinLearnsNothingFromWaking) {
  SimulatedWaits sim;
  sim.run(1000, kLoaded);
  ASSERT_EQ(sim.budget.budget().count(), 0);
  sim.budget.wokeAfter(microseconds(3000));  // the wake-up of a loaded machine
  EXPECT_EQ(sim.budget.budget().count(), 0);
  // A budget that still spins is not changed by a sleep either.
  SimulatedWaits quiet;
  quiet.run(10, kQuiet);
  const auto before = quiet.budget.budget();
  quiet.budget.wokeAfter(microseconds(10));
  EXPECT_EQ(quiet.budget.budget(), before);
  SimulatedWaits fixed(kCeiling, /*adaptive=*/false);
  fixed.budget.wokeAfter(microseconds(10));
  EXPECT_EQ(fixed.budget.budget(), kCeiling);
}

// A loop that knows a sleep costs more than usual (a peer on another core
// under load, HostChannel::awaitPeers) spins at least a given window, even
// at a budget of 0; a spin that pays there brings the budget back, one that
// does not leaves it at 0; the window never exceeds the ceiling.
TEST(SpinBudget, AWaitGivenAMinimumSpinsItEvenWhereTheBudgetIsZero) {
  SimulatedWaits sim;
  sim.waitsUntilBlockingAtOnce(kLoaded, 10);
  ASSERT_EQ(sim.budget.budget().count(), 0);
  const microseconds window{100};
  // Unanswered: it spins the window, then blocks; the budget stays at 0.
  sim.budget.startWait(window);
  const auto start = sim.now;
  while (sim.budget.keepSpinning(sim.now)) sim.now += kPass;
  EXPECT_GE(sim.now - start, window);
  EXPECT_LT(sim.now - start, window + 2 * kPass);
  EXPECT_EQ(sim.budget.budget().count(), 0);
  // Answered within the window: the spin paid, and the budget grows back.
  sim.budget.startWait(window);
  for (int pass = 0; pass < 10; ++pass) {
    ASSERT_TRUE(sim.budget.keepSpinning(sim.now));
    sim.now += kPass;
  }
  sim.budget.finishWait();
  EXPECT_GE(sim.budget.budget(), sim.budget.probeBudget());
  // A window beyond the ceiling is cut to it; a ceiling of 0 never spins.
  SimulatedWaits small(microseconds(50));
  small.waitsUntilBlockingAtOnce(kLoaded, 10);
  small.budget.startWait(microseconds(5000));
  const auto from = small.now;
  while (small.budget.keepSpinning(small.now)) small.now += kPass;
  EXPECT_LE(small.now - from, microseconds(50) + 2 * kPass);
  SimulatedWaits none(microseconds(0));
  none.budget.startWait(window);
  EXPECT_FALSE(none.budget.keepSpinning(none.now));
}

// The minimum is given while it pays. A peer late by milliseconds, still
// computing, lets every minimum run out: after a few in a row it rests (the
// waits block at once but for the budget's probes), and a spin that pays
// again, or a sleep that shows one would have, brings it back. A minimum
// spin that was descheduled did not hold the core and does not count.
TEST(SpinBudget, AMinimumThatKeepsRunningOutRestsUntilASpinPays) {
  const microseconds window{125};
  SimulatedWaits sim;
  sim.waitsUntilBlockingAtOnce(kLate, 10);
  ASSERT_EQ(sim.budget.budget().count(), 0);
  sim.spinningWaits = 0;
  EXPECT_EQ(sim.run(SpinBudget::kMinimumMissesToRest, kLate, window), 0);
  EXPECT_EQ(sim.spinningWaits, SpinBudget::kMinimumMissesToRest);
  EXPECT_FALSE(sim.budget.givesMinimum());
  // Resting: only the probes spin.
  sim.spinningWaits = 0;
  sim.run(400, kLate, window);
  EXPECT_LE(sim.spinningWaits, 400 / SpinBudget::kMinProbeInterval);
  EXPECT_GE(sim.spinningWaits, 1);
  // The peer comes within the window again: the first probe that catches it
  // gives the minimum back, and every wait after it spins.
  int waits = 0;
  while (!sim.budget.givesMinimum() && waits <= SpinBudget::kMaxProbeInterval + 1) {
    sim.wait(kQuiet, window);
    ++waits;
  }
  EXPECT_TRUE(sim.budget.givesMinimum());
  EXPECT_EQ(sim.run(20, kQuiet, window), 20);
  // A sleep that a spin would have saved gives it back as well.
  sim.run(40, kLate, window);
  ASSERT_FALSE(sim.budget.givesMinimum());
  sim.budget.wokeAfter(microseconds(60));
  EXPECT_TRUE(sim.budget.givesMinimum());
  // Preempted minimum spins (busy processes on every core) are not misses.
  SimulatedWaits loaded;
  loaded.waitsUntilBlockingAtOnce(kLoaded, 10);
  loaded.spinningWaits = 0;
  loaded.run(40, kLoaded, window);
  EXPECT_TRUE(loaded.budget.givesMinimum());
  EXPECT_EQ(loaded.spinningWaits, 40);
}
