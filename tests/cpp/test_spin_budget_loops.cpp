// The spin budget (core/base/spin_budget.h) as the product's own waiting
// loops drive it, on a clock each test controls: Transport::wait on the
// loopback transport, and the Executor's worker spinning after a task. A
// preempted spin is a jump of the clock between two of the loop's reads;
// the peer's message or the next task comes where the test puts it. What
// the tests observe is the budget itself, after the loop: halved when a
// spin did not pay (ran out, or was preempted even though its event came
// meanwhile), doubled back when one did. So a loop that stops telling its
// budget how a wait ended (no finishWait, no keepSpinning, a pass's time
// read after its work) fails here, not only in a copy of the loop.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/base/spin_budget.h"
#include "engine/executor.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/tag.h"

using namespace ringreduce;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

using TimePoint = SpinBudget::Clock::time_point;

// A clock for one budget. Each read may advance it by a pass, and calls
// `onRead(n)` (n: this read's number, from 1) first, where a test sends
// the peer's message or jumps the clock (a preemption). Thread safe: the
// executor's worker reads it while the test moves it.
class TestClock {
 public:
  explicit TestClock(microseconds perRead) : perRead_(perRead) {}
  TimePoint read() {
    const uint64_t n = reads_.fetch_add(1) + 1;
    if (onRead) onRead(n);
    return TimePoint(std::chrono::nanoseconds(
        ns_.fetch_add(std::chrono::nanoseconds(perRead_).count()) +
        std::chrono::nanoseconds(perRead_).count()));
  }
  SpinBudget::Now now() {
    return [this] { return read(); };
  }
  void jump(microseconds by) { ns_.fetch_add(std::chrono::nanoseconds(by).count()); }
  uint64_t reads() const { return reads_.load(); }

  std::function<void(uint64_t)> onRead;  // set before the loop runs

 private:
  const microseconds perRead_;
  // From the steady clock's now: the loops compare it with op deadlines.
  std::atomic<int64_t> ns_{std::chrono::duration_cast<std::chrono::nanoseconds>(
                               SpinBudget::Clock::now().time_since_epoch())
                               .count()};
  std::atomic<uint64_t> reads_{0};
};

Config spinning(int spinMicroseconds) {
  Config config;
  config.spinMicroseconds = spinMicroseconds;
  config.adaptiveSpin = true;
  config.spinYields = false;
  return config;
}

std::vector<int64_t> freshValues(std::mt19937_64& random) {
  std::vector<int64_t> values(16);
  for (auto& v : values) v = static_cast<int64_t>(random() >> 1);
  return values;
}

// A loopback transport whose sleeps a test can count: the executor's worker
// sleeps here (sleepArmed) while it watches the transport.
class CountingLoopback : public LoopbackTransport {
 public:
  using LoopbackTransport::LoopbackTransport;
  void sleepArmed(int extraFd, int timeoutMs) override {
    sleeps.fetch_add(1, std::memory_order_release);
    LoopbackTransport::sleepArmed(extraFd, timeoutMs);
  }
  std::atomic<int> sleeps{0};
};

// Waits (bounded) until `condition`; false if it never came.
bool eventually(const std::function<bool()>& condition) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::sleep_for(microseconds(100));
  }
  return true;
}

// Two loopback ranks in one thread: rank 0 waits (Transport::wait) for a
// message that rank 1 sends from inside rank 0's clock, at the read the
// test picks; sends complete at once on the loopback.
class TransportWaits : public ::testing::Test {
 protected:
  static constexpr int kSpinUs = 1000;
  TransportWaits()
      : fabric_(std::make_shared<LoopbackFabric>(2)),
        waiter_(fabric_, 0, spinning(kSpinUs)),
        peer_(fabric_, 1, spinning(kSpinUs)),
        clock_(microseconds(1)) {
    waiter_.spinBudget().setClock(clock_.now());
  }

  SpinBudget& budget() { return waiter_.spinBudget(); }

  // Where the thread is when the peer's message comes.
  enum class Comes {
    WhilePolling,  // at the start of a pass: the pass's poll finds it
    AfterLooking,  // after a pass found nothing: the wait ends by finding it done
    AfterSleeping, // once the wait has slept (its spin ran out first)
  };
  // One wait; the message comes at the `at`-th read of the wait's clock
  // (counted from this wait's start) or later, as `comes` says, the clock
  // jumped by `awayFor` there first (a preemption; 0: none).
  void waitOnce(uint64_t at, microseconds awayFor, Comes comes = Comes::WhilePolling) {
    const uint64_t seq = ++seq_;
    const OpContext op("recv", seq, std::chrono::seconds(30));
    const std::vector<int64_t> sent = freshValues(random_);
    std::vector<int64_t> got(sent.size(), -1);
    const uint64_t tag = makeTag(1, seq, 0);
    Request recv = waiter_.irecv(1, tag, got.data(), got.size() * sizeof(int64_t), op);
    bool fired = false;
    auto send = [&] {
      if (fired) return;
      fired = true;
      clock_.jump(awayFor);
      Request s = peer_.isend(0, tag, sent.data(), sent.size() * sizeof(int64_t), op);
      EXPECT_TRUE(s.done);  // the loopback copies at once
    };
    const uint64_t base = clock_.reads();
    const int sleptBefore = waiter_.sleeps.load();
    bool due = false;
    clock_.onRead = [&](uint64_t n) {
      due = n - base >= at;
      if (comes == Comes::WhilePolling && due) send();
      if (comes == Comes::AfterSleeping && waiter_.sleeps.load() > sleptBefore) send();
    };
    waiter_.setWatch([&] {
      if (comes == Comes::AfterLooking && due) send();
    });
    waiter_.wait(recv, op);
    clock_.onRead = nullptr;
    waiter_.setWatch(nullptr);
    EXPECT_TRUE(fired) << "the wait ended before its message was sent";
    EXPECT_EQ(got, sent);
  }

  std::shared_ptr<LoopbackFabric> fabric_;
  CountingLoopback waiter_;
  LoopbackTransport peer_;
  TestClock clock_;
  std::mt19937_64 random_{std::random_device{}()};
  uint64_t seq_ = 0;
};

}  // namespace

TEST_F(TransportWaits, APreemptedSpinNeverCountsAsPaidAndSpinsThatPayGrowItBack) {
  const auto ceiling = budget().ceiling();
  ASSERT_EQ(ceiling, microseconds(kSpinUs));
  ASSERT_EQ(budget().budget(), ceiling);
  // The thread is away 5 ms while the message comes; the pass after the
  // gap finds it (progress reports it): not paid, halved.
  waitOnce(5, microseconds(5000));
  EXPECT_EQ(budget().budget(), ceiling / 2);
  // Away after its pass looked: the wait ends by finding the message
  // done, and the read that ends the wait sees the gap.
  waitOnce(5, microseconds(5000), Comes::AfterLooking);
  EXPECT_EQ(budget().budget(), ceiling / 4);
  // Messages that come while it spins: each wait pays, doubling it back.
  waitOnce(5, microseconds(0));
  EXPECT_EQ(budget().budget(), ceiling / 2);
  waitOnce(5, microseconds(0), Comes::AfterLooking);
  EXPECT_EQ(budget().budget(), ceiling);
}

TEST_F(TransportWaits, ASpinThatRunsOutHalvesAndTheWaitStillGetsItsMessage) {
  // A microsecond per pass: the 1 ms spin runs out after a thousand passes
  // and the wait sleeps; the message comes after that.
  waitOnce(0, microseconds(0), Comes::AfterSleeping);
  EXPECT_EQ(budget().budget(), budget().ceiling() / 2);
}

// The worker spins after each task it runs (Executor::run). On a clock that
// stands still its spin lasts until the test moves the clock or a task
// comes, so the test decides how each spin ends.
TEST(WorkerSpin, ItHalvesWhenNoTaskComesAndDoublesWhenOneComesWhileItSpins) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  CountingLoopback transport(fabric, 0, spinning(1000));
  TestClock clock(microseconds(0));
  Executor executor(transport, clock.now());
  const auto ceiling = executor.workerSpin().ceiling();
  ASSERT_EQ(ceiling, microseconds(1000));

  std::atomic<int> ran{0};
  // The worker spins: its clock is read pass after pass.
  auto workerSpins = [&] {
    const uint64_t reads = clock.reads();
    return eventually([&] { return clock.reads() >= reads + 3; });
  };
  auto runOnWorker = [&](int expected) {
    executor.submit([&] { ++ran; }, Runner::Worker);
    return eventually([&] { return ran.load() == expected; });
  };

  // A pending receive of its own keeps the worker watching the transport
  // whenever it sleeps (so every sleep is one the test can count).
  executor.submit([&] { executor.addPoller([](bool abandon) { return abandon; }); },
                  Runner::Worker);
  ASSERT_TRUE(runOnWorker(1));
  ASSERT_TRUE(workerSpins());
  // No task comes: the clock moves on by 5 ms and the worker's spin is over
  // (descheduled or run out: either way it did not pay).
  int sleeps = transport.sleeps.load(std::memory_order_acquire);
  clock.jump(microseconds(5000));
  ASSERT_TRUE(eventually([&] { return transport.sleeps.load(std::memory_order_acquire) > sleeps; }))
      << "the worker never stopped spinning";
  EXPECT_EQ(executor.workerSpin().budget(), ceiling / 2);

  // A task, then another one while the worker spins after it: that spin
  // paid, the budget doubles back; then the worker's spin after the last
  // task runs out again.
  ASSERT_TRUE(runOnWorker(2));
  ASSERT_TRUE(workerSpins());
  ASSERT_TRUE(runOnWorker(3));
  ASSERT_TRUE(workerSpins());
  sleeps = transport.sleeps.load(std::memory_order_acquire);
  clock.jump(microseconds(5000));
  ASSERT_TRUE(eventually([&] { return transport.sleeps.load(std::memory_order_acquire) > sleeps; }))
      << "the worker never stopped spinning";
  EXPECT_EQ(executor.workerSpin().budget(), ceiling / 2);
  executor.stop();
}
