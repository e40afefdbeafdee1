// The Executor: issue order, pollers, callers running their own tasks, the worker's grace
#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "rank_threads.h"
#include "engine/executor.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;
using ringreduce::testing::TransportKind;

TEST(Executor, RunsTasksInSubmissionOrderFromSeveralThreads) {
  runRanks(1, [](Transport& t, int) {
    std::vector<int> order;
    std::mutex orderMutex;
    {
      Executor executor(t);
      // Each submitter's own tasks must run in its order.
      std::vector<std::thread> submitters;
      for (int s = 0; s < 4; ++s) {
        submitters.emplace_back([&, s] {
          for (int i = 0; i < 200; ++i) {
            executor.submit([&, s, i] {
              std::lock_guard<std::mutex> lock(orderMutex);
              order.push_back(s * 1000 + i);
            });
          }
        });
      }
      for (auto& th : submitters) th.join();
    }  // the destructor runs what was queued
    ASSERT_EQ(order.size(), 800u);
    std::vector<int> last(4, -1);
    for (int v : order) {
      EXPECT_GT(v % 1000, last[v / 1000]);
      last[v / 1000] = v % 1000;
    }
  });
}

TEST(Executor, PollersRunUntilDoneAndAreAbandonedAtStop) {
  runRanks(1, [](Transport& t, int) {
    std::atomic<int> polls{0};
    std::atomic<bool> finished{false};
    std::atomic<bool> abandoned{false};
    std::promise<void> firstDone;
    {
      Executor executor(t);
      executor.submit([&] {
        executor.addPoller([&](bool abandon) {
          if (abandon) return true;
          if (++polls == 5) {
            finished = true;
            firstDone.set_value();
            return true;
          }
          return false;
        });
        // A poller that never finishes by itself: the stop must give up on it.
        executor.addPoller([&](bool abandon) {
          if (abandon) abandoned = true;
          return abandon;
        });
      });
      // Tasks behind a pending poller still run.
      std::promise<void> ran;
      executor.submit([&] { ran.set_value(); });
      EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
      EXPECT_EQ(firstDone.get_future().wait_for(std::chrono::seconds(5)),
                std::future_status::ready);
    }
    EXPECT_TRUE(finished);
    EXPECT_EQ(polls.load(), 5);
    EXPECT_TRUE(abandoned);
  });
}

namespace {
// An hour is beyond Config's int of microseconds (3.6e9): such a grace was
// negative, every task due at once, and the worker took the callers' tasks
// whenever it looked (a test that polled while it started failed, 54 of 300
// runs beside three busy loops). The longest grace the config holds stands
// for "never" here.
Config withGrace(std::chrono::microseconds grace) {
  Config config;
  config.callerGraceMicroseconds = static_cast<int>(
      std::min<int64_t>(grace.count(), std::numeric_limits<int>::max()));
  return config;
}

// Whether `done` came true within 20 s of waits. Where the grace is short
// the worker may hold the drive (running the task) when the test waits, and
// helpUntil then polls only a moment before it returns false: the test waits
// again, as a caller's wait() would block.
bool helpedWithin20s(Executor& executor, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!executor.helpUntil(done)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}
}  // namespace

// A caller that waits runs the queued task itself: with a long grace the
// worker would not have started it yet, so where it ran is certain.
TEST(Executor, WaitingCallerRunsTheQueuedTasksOnItsOwnThread) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<int> ran{0};
        std::thread::id ranOn;
        executor.submit([&] { ++ran; });
        executor.submit([&] {
          ranOn = std::this_thread::get_id();
          ++ran;
        });
        EXPECT_TRUE(executor.helpUntil([&] { return ran.load() == 2; }));
        EXPECT_EQ(ranOn, std::this_thread::get_id());
      },
      withGrace(std::chrono::seconds(60)));
}

// isend, irecv, then a wait for each: the first wait's drive also starts the
// receive queued behind its send (a post never waits), so the worker is not
// woken for it; a task that is not a post stays for its own caller.
TEST(Executor, ACallersDriveStartsTheSendsAndReceivesQueuedBehindItsTask) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<int> ran{0};
        std::thread::id postedOn;
        std::atomic<bool> collectiveRan{false};
        executor.submit([&] { ++ran; }, Runner::CallerOrWorker, /*posts=*/true);
        executor.submit(
            [&] {
              postedOn = std::this_thread::get_id();
              ++ran;
            },
            Runner::CallerOrWorker, /*posts=*/true);
        executor.submit([&] { collectiveRan = true; });
        EXPECT_TRUE(executor.helpUntil([&] { return ran.load() >= 1; }));
        EXPECT_EQ(ran.load(), 2);
        EXPECT_EQ(postedOn, std::this_thread::get_id());
        EXPECT_FALSE(collectiveRan.load());  // the grace is a minute: nobody took it
        EXPECT_TRUE(executor.helpUntil([&] { return collectiveRan.load(); }));
      },
      withGrace(std::chrono::seconds(60)));
}

// A post claimed by its issuing thread (Engine::submitPointToPoint, nothing
// queued): it runs there, counted as running until it has; behind a queued
// task there is no claim, so issue order holds; a poller it leaves goes to
// the worker once its in-flight grace has passed.
TEST(Executor, AClaimedPostRunsOnItsCallersThreadOnlyWithNothingQueued) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        // The worker drives while awake, and sleeps soon after it starts.
        const auto limit = Clock::now() + std::chrono::seconds(10);
        bool claimed = false;
        while (!(claimed = executor.claimIdle()) && Clock::now() < limit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(claimed);
        EXPECT_TRUE(executor.busy());
        std::thread::id ranOn;
        std::atomic<bool> release{false};
        std::promise<std::thread::id> polledOn;
        executor.runClaimed([&] {
          ranOn = std::this_thread::get_id();
          executor.addPoller([&](bool) {
            if (!release.load()) return false;
            polledOn.set_value(std::this_thread::get_id());
            return true;
          });
        });
        EXPECT_EQ(ranOn, std::this_thread::get_id());
        EXPECT_FALSE(executor.busy());
        release = true;  // its message comes after the caller went on
        auto result = polledOn.get_future();
        ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
        EXPECT_NE(result.get(), std::this_thread::get_id());

        // A task queued for its caller: a post issued behind it is not claimed.
        std::atomic<bool> first{false};
        executor.submit([&] { first = true; }, Runner::Caller);
        EXPECT_FALSE(executor.claimIdle());
        // The worker may be driving its poller just then: helpUntil only
        // polls a moment before it would block.
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (!executor.helpUntil([&] { return first.load(); }) && Clock::now() < until) {
        }
        EXPECT_TRUE(first.load());
      },
      withGrace(std::chrono::milliseconds(50)));
}

// A receive still in flight when its caller's drive ends (irecv, then no
// wait yet): the worker takes its poller over once its in-flight grace
// (kInFlightGrace, at least the caller grace) has passed.
TEST(Executor, APollerACallerLeftIsDrivenByTheWorkerAfterTheGrace) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<bool> release{false};
        std::promise<std::thread::id> doneOn;
        std::atomic<bool> added{false};
        executor.submit(
            [&] {
              executor.addPoller([&](bool) {
                if (!release.load()) return false;
                doneOn.set_value(std::this_thread::get_id());
                return true;
              });
              added = true;
            },
            Runner::CallerOrWorker, /*posts=*/true);
        EXPECT_TRUE(helpedWithin20s(executor, [&] { return added.load(); }));
        release = true;  // the message arrives after the caller went on
        auto result = doneOn.get_future();
        ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
        EXPECT_NE(result.get(), std::this_thread::get_id());
      },
      withGrace(std::chrono::milliseconds(2)));
}

// Asynchronous work nobody waits for still runs: on the worker, once the
// grace period has passed.
TEST(Executor, UnclaimedTaskRunsOnTheWorkerAfterTheGrace) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::promise<std::thread::id> ranOn;
        executor.submit([&] { ranOn.set_value(std::this_thread::get_id()); });
        auto result = ranOn.get_future();
        ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
        EXPECT_NE(result.get(), std::this_thread::get_id());
      },
      withGrace(std::chrono::milliseconds(2)));
}

// A task whose completion waits for a later task (a callback calling wait())
// must not drive recursively: helpUntil returns, and the later task runs
// after it.
TEST(Executor, HelpFromInsideATaskDoesNotRunOtherTasks) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<bool> secondRan{false};
        std::atomic<bool> helpedInside{true};
        std::promise<void> bothDone;
        executor.submit([&] {
          helpedInside = executor.helpUntil([&] { return secondRan.load(); });
        });
        executor.submit([&] {
          secondRan = true;
          bothDone.set_value();
        });
        EXPECT_TRUE(executor.helpUntil([&] { return secondRan.load(); }));
        EXPECT_EQ(bothDone.get_future().wait_for(std::chrono::seconds(5)),
                  std::future_status::ready);
        EXPECT_FALSE(helpedInside);
      },
      withGrace(std::chrono::seconds(60)));
}

// Stopping with tasks queued and the worker asleep in a grace of an hour:
// stop() runs them at once (waiting for the grace would trip ctest's limit).
TEST(Executor, StopRunsQueuedTasksWithoutWaitingForTheGrace) {
  runRanks(
      1,
      [](Transport& t, int) {
        std::atomic<int> ran{0};
        {
          Executor executor(t);
          for (int i = 0; i < 3; ++i) executor.submit([&] { ++ran; });
        }
        EXPECT_EQ(ran.load(), 3);
      },
      withGrace(std::chrono::hours(1)));
}

namespace {
// Whether the executor's worker (the thread named "ringreduce-work"; one
// executor lives at a time in these tests) is asleep, as the kernel tells:
// blocked in poll(), where Executor::sleep waits on its timerfd (alone or
// beside the transport's event fd).
bool workerBlockedInPoll() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return false;
  bool asleep = false;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    std::ifstream comm(task + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "ringreduce-work") continue;
    std::ifstream syscall(task + "/syscall");
    long number = -1;
    if (!(syscall >> number)) continue;  // "running": not in a system call
#ifdef SYS_poll
    asleep = number == SYS_poll;
#endif
    asleep = asleep || number == SYS_ppoll;
  }
  closedir(tasks);
  return asleep;
}

// Runs one task through helpUntil, so that the worker has seen activity,
// then waits (bounded) until the worker sleeps on its slow tick.
void makeRecentActivity(Executor& executor) {
  std::atomic<bool> ran{false};
  executor.submit([&] { ran = true; }, Runner::Caller);
  ASSERT_TRUE(helpedWithin20s(executor, [&] { return ran.load(); }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!workerBlockedInPoll()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the worker did not go to sleep (block in poll) within 20 s of its last task";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

// A synchronous task is queued without arming the worker's wake-up (its
// caller runs it): where it ran is the caller's thread, and a loop of them
// completes.
// `calls` tasks submitted as `runner`, each waited for at once: each runs
// on the waiting caller's own thread.
void expectWaitingCallerRunsEach(Runner runner, int calls, std::chrono::microseconds grace) {
  runRanks(
      1,
      [&](Transport& t, int) {
        Executor executor(t);
        makeRecentActivity(executor);
        for (int i = 0; i < calls; ++i) {
          std::atomic<bool> ran{false};
          std::thread::id ranOn;
          executor.submit(
              [&] {
                ranOn = std::this_thread::get_id();
                ran = true;
              },
              runner);
          ASSERT_TRUE(executor.helpUntil([&] { return ran.load(); }));
          EXPECT_EQ(ranOn, std::this_thread::get_id());
        }
      },
      withGrace(grace));
}

TEST(Executor, TasksWhoseCallerWaitsRunOnTheCallersThread) {
  expectWaitingCallerRunsEach(Runner::Caller, 100, std::chrono::seconds(60));
}

// A task submitted as `runner` that no caller waits for (expedite(): its
// future asked for): the worker runs it, within `bound`.
void expectTheWorkerRunsIt(Runner runner, bool expedite, std::chrono::seconds bound,
                           std::chrono::microseconds grace) {
  runRanks(
      1,
      [&](Transport& t, int) {
        Executor executor(t);
        makeRecentActivity(executor);
        std::promise<std::thread::id> ranOn;
        executor.submit([&] { ranOn.set_value(std::this_thread::get_id()); }, runner);
        if (expedite) executor.expedite();
        auto result = ranOn.get_future();
        ASSERT_EQ(result.wait_for(bound), std::future_status::ready);
        EXPECT_NE(result.get(), std::this_thread::get_id());
      },
      withGrace(grace));
}

// A caller that said it would wait and then does not: no alarm was armed,
// but the worker's slow tick still finds the task; it is late, never lost.
TEST(Executor, ATaskWhoseCallerNeverWaitsStillRunsOnTheWorker) {
  expectTheWorkerRunsIt(Runner::Caller, false, std::chrono::seconds(5),
                        std::chrono::milliseconds(2));
}

// While another thread drives (a long task of another caller), a waiting
// caller cannot run its own task: it arms the worker's wake-up itself, and
// its task runs once the driver is done, within its deadline.
TEST(Executor, ACallerThatCannotDriveStillGetsItsTaskRun) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        makeRecentActivity(executor);
        std::promise<void> longStarted;
        std::atomic<bool> longDone{false};
        // How often the waiting caller has looked at its result. helpUntil
        // looks once, finds the drive taken, arms the worker, and looks
        // again: the long task holds the drive until that second look.
        std::mutex looksMutex;
        std::condition_variable looked;
        int looks = 0;
        std::atomic<bool> heldUntilLooked{false};
        std::thread other([&] {
          executor.submit(
              [&] {
                longStarted.set_value();
                std::unique_lock<std::mutex> lock(looksMutex);
                heldUntilLooked = looked.wait_for(lock, std::chrono::seconds(30),
                                                  [&] { return looks >= 2; });
                longDone = true;
              },
              Runner::Caller);
          executor.helpUntil([&] { return longDone.load(); });
        });
        // Bounded: were the task never started, `other` would help forever
        // and nothing could join it, so the test ends the process, saying why.
        if (longStarted.get_future().wait_for(std::chrono::seconds(30)) !=
            std::future_status::ready) {
          std::fprintf(stderr, "the caller's long task did not start within 30 s\n");
          std::abort();
        }
        std::promise<void> mineRan;
        executor.submit([&] { mineRan.set_value(); }, Runner::Caller);
        auto mine = mineRan.get_future();
        const auto ready = [&] {
          {
            std::lock_guard<std::mutex> lock(looksMutex);
            ++looks;
          }
          looked.notify_all();
          return mine.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
        };
        if (!executor.helpUntil(ready)) {
          EXPECT_EQ(mine.wait_for(std::chrono::seconds(5)), std::future_status::ready);
        }
        other.join();
        EXPECT_TRUE(longDone.load());
        EXPECT_TRUE(heldUntilLooked.load())
            << "the waiting caller did not look at its result twice while the long task drove";
      },
      withGrace(std::chrono::milliseconds(2)));
}

// A task no caller will run (a CUDA collective, whose wait() never runs the
// host part) is not held for the grace period: with a grace of an hour, the
// sleeping worker still starts it, on its own thread.
TEST(Executor, ATaskOnlyTheWorkerRunsIsNotHeldForTheGracePeriod) {
  expectTheWorkerRunsIt(Runner::Worker, false, std::chrono::seconds(30), std::chrono::hours(1));
}

// A task no peer waits for (its rank's part is on the host channel already:
// Engine::runOnCaller's publish-ahead) is its caller's: a caller that waits
// runs it on its own thread, even with the usual grace long past.
TEST(Executor, ATaskNoPeerWaitsForRunsOnItsWaitingCallersThread) {
  expectWaitingCallerRunsEach(Runner::CallerWhenWaited, 20, std::chrono::microseconds(1));
}

// Its caller never waits and never asks for its future: the worker still
// runs it (late, never lost).
TEST(Executor, ATaskNoPeerWaitsForStillRunsOnTheWorkerWhenNeverWaitedFor) {
  expectTheWorkerRunsIt(Runner::CallerWhenWaited, false, std::chrono::seconds(30),
                        std::chrono::milliseconds(2));
}

// A task queued behind it that only the worker runs takes both to the
// worker, in order: a task no peer waits for never holds back the queue.
TEST(Executor, ATaskQueuedBehindOneNoPeerWaitsForTakesBothToTheWorkerInOrder) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        makeRecentActivity(executor);
        std::mutex mutex;
        std::vector<int> order;
        std::vector<std::thread::id> threads;
        std::promise<void> both;
        executor.submit(
            [&] {
              std::lock_guard<std::mutex> lock(mutex);
              order.push_back(1);
              threads.push_back(std::this_thread::get_id());
            },
            Runner::CallerWhenWaited);
        executor.submit(
            [&] {
              {
                std::lock_guard<std::mutex> lock(mutex);
                order.push_back(2);
                threads.push_back(std::this_thread::get_id());
              }
              both.set_value();
            },
            Runner::Worker);
        ASSERT_EQ(both.get_future().wait_for(std::chrono::seconds(30)),
                  std::future_status::ready);
        std::lock_guard<std::mutex> lock(mutex);
        EXPECT_EQ(order, (std::vector<int>{1, 2}));
        for (const std::thread::id& id : threads) EXPECT_NE(id, std::this_thread::get_id());
      },
      withGrace(std::chrono::hours(1)));
}

// Its future was asked for (a future's wait never runs tasks): expedite()
// hands it to the worker, which runs it at once, not after a grace that
// waits for a caller's wait() (here an hour).
TEST(Executor, AnExpeditedTaskNoPeerWaitsForRunsOnTheWorkerWithoutTheGrace) {
  expectTheWorkerRunsIt(Runner::CallerWhenWaited, true, std::chrono::seconds(30),
                        std::chrono::hours(1));
}

// The same for an asynchronous task whose peers do wait for it (a queued
// collective: DDP's buckets, whose futures DDP waits for).
TEST(Executor, AnExpeditedAsynchronousTaskRunsOnTheWorkerWithoutTheGrace) {
  expectTheWorkerRunsIt(Runner::CallerOrWorker, true, std::chrono::seconds(30),
                        std::chrono::hours(1));
}

// runIfReady() until it runs a task, a bounded number of times: a poll that
// finds the worker between two turns of its loop (it holds the drive for a
// moment in each, more often while it starts) returns false at once rather
// than wait for it, as is_completed() must; under load that moment can be
// the one the test polls in.
static bool pollRunsATask(Executor& executor) {
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < giveUp) {
    if (executor.runIfReady()) return true;
    std::this_thread::yield();
  }
  return false;
}

// A poll (is_completed()) runs the first queued task on its own thread only
// once that task's `ready` says so, and never one without a `ready` or one
// behind a task that is not ready: a poll must return at once. (Runner::Caller
// with a grace of an hour: the worker leaves the tasks alone meanwhile.)
TEST(Executor, APollRunsOnlyTheFirstTaskAndOnlyOnceItIsReady) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<bool> firstReady{false};
        std::atomic<int> ran{0};
        std::thread::id ranOn;
        executor.submit(
            [&] {
              ranOn = std::this_thread::get_id();
              ran = 1;
            },
            Runner::Caller, false, [&] { return firstReady.load(); });
        executor.submit([&] { ran = 2; }, Runner::Caller, false, [] { return true; });
        executor.submit([&] { ran = 3; }, Runner::Caller);  // no `ready`
        EXPECT_FALSE(executor.runIfReady());  // the first is not ready; the second waits behind it
        EXPECT_EQ(ran.load(), 0);
        firstReady = true;
        EXPECT_TRUE(pollRunsATask(executor));
        EXPECT_EQ(ran.load(), 1);
        EXPECT_EQ(ranOn, std::this_thread::get_id());
        EXPECT_TRUE(pollRunsATask(executor));  // the second, ready from the start
        EXPECT_EQ(ran.load(), 2);
        EXPECT_FALSE(executor.runIfReady());  // the third has no `ready`: only a wait runs it
        EXPECT_EQ(ran.load(), 2);
        ASSERT_TRUE(executor.helpUntil([&] { return ran.load() == 3; }));
        EXPECT_FALSE(executor.busy());
      },
      withGrace(std::chrono::hours(1)));
}

// A fixed spin: every wait for a task's readiness spins its whole ceiling
// (the caller grace, 20 ms here, capped at kLongestReadyWait: long beside
// the test's own steps), whatever earlier waits taught. The worker, never
// woken for it, leaves a Runner::Caller task alone meanwhile.
static Config fixedSpinNoGrace() {
  Config config = withGrace(std::chrono::milliseconds(20));
  config.adaptiveSpin = false;
  return config;
}

// A task that records that it ran (`ran` becomes its value) and on which thread.
struct RecordedTask {
  std::atomic<int> ran{0};
  std::thread::id ranOn;  // written before `ran`
  Executor::Task as(int value) {
    return [this, value] {
      ranOn = std::this_thread::get_id();
      ran = value;
    };
  }
};

// Whether `task` ran with value `value`, and the executor finished with it
// (the only task queued), within 20 s of waits (its grace is short:
// fixedSpinNoGrace).
static bool ranWithin20s(Executor& executor, const RecordedTask& task, int value = 1) {
  return helpedWithin20s(executor, [&] { return task.ran.load() == value && !executor.busy(); });
}

// A `ready` that never says yes, counting how often it was asked.
static Executor::Ready neverReady(std::atomic<int>& asked) {
  return [&asked] {
    ++asked;
    return false;
  };
}

// The asker of a future (get_future()) whose first queued task waits only
// for its peers (a published-ahead collective) waits for them a moment and
// runs it on its own thread once they are in: here `ready` says no twice,
// then yes, within one call. Up to five tries, each with a task of its own:
// a try may meet the worker holding the drive between two turns of its
// loop, or a preemption that outlasts the spin.
TEST(Executor, AFutureAskerWaitsForItsTasksPeersAndRunsItOnItsOwnThread) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        bool ranInOneCall = false;
        for (int attempt = 0; attempt < 5 && !ranInOneCall; ++attempt) {
          std::atomic<int> asked{0};
          RecordedTask task;
          executor.submit(task.as(1), Runner::Caller, false, [&] { return ++asked > 2; });
          ranInOneCall = executor.awaitReadyAndRun() && task.ran.load() == 1;
          if (ranInOneCall) {
            EXPECT_EQ(task.ranOn, std::this_thread::get_id());
            EXPECT_GE(asked.load(), 3);  // it asked again while it waited
          } else {
            ASSERT_TRUE(ranWithin20s(executor, task));  // clear the queue
          }
        }
        EXPECT_TRUE(ranInOneCall) << "no try ran its task within the wait";
        EXPECT_FALSE(executor.busy());
      },
      fixedSpinNoGrace());
}

// Its peers never come within the wait: the asker stops waiting and runs
// nothing, leaving the task to a wait or to the worker (which, its grace
// past, may take it meanwhile: a spin preempted under load outlasts the
// grace); a task without a `ready` (one whose peers may wait for this rank)
// it never waits for or runs.
TEST(Executor, AFutureAskerWhoseTasksPeersDoNotComeLeavesItQueued) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        const std::thread::id me = std::this_thread::get_id();
        std::atomic<int> asked{0};
        RecordedTask task;
        executor.submit(task.as(1), Runner::Caller, false, neverReady(asked));
        EXPECT_FALSE(executor.awaitReadyAndRun());
        if (task.ran.load() == 1) {
          EXPECT_NE(task.ranOn, me);  // the worker's, not the asker's
        }
        EXPECT_GE(asked.load(), 1);
        ASSERT_TRUE(ranWithin20s(executor, task));  // a wait runs it
        executor.submit(task.as(2), Runner::Caller);  // no `ready`
        EXPECT_FALSE(executor.awaitReadyAndRun());
        if (task.ran.load() == 2) {
          EXPECT_NE(task.ranOn, me);
        }
        ASSERT_TRUE(ranWithin20s(executor, task, 2));
        EXPECT_FALSE(executor.busy());
      },
      fixedSpinNoGrace());
}

// An abort from another thread ends the wait at once: the asker runs
// nothing (the queued form then fails with the abort's reason).
TEST(Executor, AFutureAskerStopsWaitingOnceTheTransportIsAborted) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        std::atomic<int> asked{0};
        RecordedTask task;
        executor.submit(task.as(1), Runner::Caller, false, neverReady(asked));
        t.abort("the test aborts it");
        EXPECT_FALSE(executor.awaitReadyAndRun());
        EXPECT_EQ(task.ran.load(), 0);
        EXPECT_LE(asked.load(), 1);  // asked once, then saw the abort
        ASSERT_TRUE(ranWithin20s(executor, task));
      },
      fixedSpinNoGrace());
}

// The lesson from the worker (Executor::awaitReadyAndRun): an asker whose
// budget fell to 0 hands its task over at once; where the worker, taking it
// over, finds the peers already in (here: `ready` says yes from its second
// question on, the worker's), the next wait spins again, unless other work
// wants the cores. The budget is read after a wait for a task without a
// `ready` (it applies the lesson, then waits for nothing): no spin, no
// probe, decides it. The grace (the ceiling) is 1 ms: the worker asks only
// when it takes the task over within that of the give-up, so a try may miss
// under load (20 tries).
namespace {

// Spins that run out until the budget is 0 (a sixteenth of the ceiling and
// below is 0: five at most; a preempted one counts as run out too).
void spinDown(Executor& executor) {
  for (int i = 0; i < 12 && executor.readySpin().budget().count() > 0; ++i) {
    std::atomic<int> asked{0};
    RecordedTask task;
    executor.submit(task.as(1), Runner::Caller, false, neverReady(asked));
    EXPECT_FALSE(executor.awaitReadyAndRun());
    ASSERT_TRUE(ranWithin20s(executor, task));
  }
  ASSERT_EQ(executor.readySpin().budget().count(), 0) << "the ready wait never stopped spinning";
}

// One give-up at budget 0 whose peers are in by the worker's pickup, taken
// over by the worker; then the budget the next wait starts from.
std::chrono::nanoseconds budgetAfterAHandOffWhosePeersCameSoon(Executor& executor) {
  spinDown(executor);
  std::atomic<int> asked{0};
  RecordedTask task;
  executor.submit(task.as(1), Runner::CallerOrWorker, false, [&asked] { return ++asked > 1; });
  EXPECT_FALSE(executor.awaitReadyAndRun());  // asked once: not yet; no spin at 0
  EXPECT_EQ(asked.load(), 1);
  executor.expedite();  // the future's asker: the worker's now
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (task.ran.load() != 1) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the worker did not take the task over within 20 s";
      return std::chrono::nanoseconds(-1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  EXPECT_NE(task.ranOn, std::this_thread::get_id());
  RecordedTask noReadyCheck;
  executor.submit(noReadyCheck.as(1), Runner::Caller);
  EXPECT_FALSE(executor.awaitReadyAndRun());
  EXPECT_TRUE(ranWithin20s(executor, noReadyCheck));
  return executor.readySpin().budget();
}
}  // namespace

TEST(Executor, AnAskerThatStoppedWaitingAtOnceSpinsAgainOnceTheWorkerFoundItsPeersSoonIn) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t, nullptr, [] { return false; });
        bool learnt = false;
        for (int attempt = 0; attempt < 20 && !learnt; ++attempt) {
          learnt = budgetAfterAHandOffWhosePeersCameSoon(executor).count() > 0;
        }
        EXPECT_TRUE(learnt) << "no try's hand-off brought the spin back";
        EXPECT_FALSE(executor.busy());
      },
      withGrace(std::chrono::milliseconds(1)));
}

TEST(Executor, AnAskerThatStoppedWaitingAtOnceStaysStoppedWhileOtherWorkWantsTheCores) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t, nullptr, [] { return true; });
        for (int attempt = 0; attempt < 3; ++attempt) {
          EXPECT_EQ(budgetAfterAHandOffWhosePeersCameSoon(executor).count(), 0);
        }
        EXPECT_FALSE(executor.busy());
      },
      withGrace(std::chrono::milliseconds(1)));
}

// The lesson from a blocked caller (Executor::learnFromBlockedWait): once
// the callers' budget for the messages they drive is 0, a caller whose
// result came within the ceiling (RINGREDUCE_WAIT_SPIN_US, 1 ms by
// default) of its give-up makes the next driving caller spin again; a
// result that came later, or cores other work wants, leave it at 0. The
// budget is read after a caller drove a task of its own (the drive applies
// the lesson, then waits for nothing: no spin decides it).
namespace {

// The callers' spins run out until their budget is 0 (halving from the
// ceiling: below a sixteenth it is 0), while no caller drives.
void spinCallersDown(Transport& t) {
  SpinBudget& spin = t.callerSpinBudget();
  for (int i = 0; i < 12 && spin.budget().count() > 0; ++i) {
    spin.startWait();
    while (spin.keepSpinning()) {
    }
  }
  ASSERT_EQ(spin.budget().count(), 0) << "the callers' spin never ran out";
}

// A caller drives a task of its own to its end; the callers' budget then.
std::chrono::nanoseconds callersBudgetAfterADrive(Executor& executor, Transport& t) {
  RecordedTask task;
  executor.submit(task.as(1), Runner::Caller);
  EXPECT_TRUE(helpedWithin20s(executor, [&] { return task.ran.load() == 1; }));
  EXPECT_EQ(task.ranOn, std::this_thread::get_id());
  return t.callerSpinBudget().budget();
}

std::chrono::nanoseconds budgetAfterABlockedWait(Executor& executor, Transport& t,
                                                 std::chrono::microseconds resultLate) {
  spinCallersDown(t);
  const Clock::time_point gaveUpAt = Clock::now();
  executor.learnFromBlockedWait(gaveUpAt, gaveUpAt + resultLate);
  return callersBudgetAfterADrive(executor, t);
}
}  // namespace

// On one rank's executor, `contended` answering whether other work wants
// the cores: the callers' budget after a blocked wait whose result came
// `resultLate` after the give-up, and after one more drive.
static std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> budgetsAfterABlockedWait(
    bool contended, std::chrono::microseconds resultLate) {
  std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> budgets;
  runRanks(
      1,
      [&](Transport& t, int) {
        Executor executor(t, nullptr, [contended] { return contended; });
        budgets.first = budgetAfterABlockedWait(executor, t, resultLate);
        budgets.second = callersBudgetAfterADrive(executor, t);
      },
      withGrace(std::chrono::seconds(60)));
  return budgets;
}

TEST(Executor, ACallerWhoseResultCameSoonAfterItBlockedMakesTheNextCallerSpin) {
  const auto [budget, next] = budgetsAfterABlockedWait(false, std::chrono::microseconds(300));
  // Twice the lateness: long enough to outlast the peer's own wake-up.
  EXPECT_EQ(budget, std::chrono::microseconds(600));
  // Learnt once: the next drive, with nothing new to learn, keeps it.
  EXPECT_EQ(next, std::chrono::microseconds(600));
}

TEST(Executor, ACallerWhoseResultCameLaterThanAnySpinLeavesTheCallersBlocking) {
  EXPECT_EQ(budgetsAfterABlockedWait(false, std::chrono::milliseconds(5)).first.count(), 0);
}

TEST(Executor, ACallerWhoseResultCameSoonLeavesTheCallersBlockingWhileOtherWorkWantsTheCores) {
  EXPECT_EQ(budgetsAfterABlockedWait(true, std::chrono::microseconds(300)).first.count(), 0);
}

// helpUntil says when its spin gave up, and only then: a wait for a
// message that has not come (a poller that says no) gives up; a wait whose
// result is in does not.
TEST(Executor, HelpUntilSaysWhenItsSpinGaveUpOnlyWhereItDid) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t, nullptr, [] { return false; });
        std::atomic<bool> arrived{false};
        std::atomic<bool> added{false};
        executor.submit(
            [&] {
              executor.addPoller([&](bool abandon) { return abandon || arrived.load(); });
              added = true;
            },
            Runner::CallerOrWorker, /*posts=*/true);
        Clock::time_point gaveUpAt{};
        ASSERT_TRUE(executor.helpUntil([&] { return added.load(); }, &gaveUpAt));
        EXPECT_EQ(gaveUpAt, Clock::time_point{});
        const Clock::time_point before = Clock::now();
        EXPECT_FALSE(executor.helpUntil([&] { return arrived.load(); }, &gaveUpAt));
        EXPECT_GE(gaveUpAt, before);
        EXPECT_LE(gaveUpAt, Clock::now());
        arrived = true;  // the message comes; the worker or the next wait completes it
        EXPECT_TRUE(helpedWithin20s(executor, [&] { return !executor.busy(); }));
      },
      withGrace(std::chrono::seconds(60)));
}

// A poll of a send or receive (is_completed()) moves the messages in flight
// on its own thread: a message that came completes at that poll, not at the
// worker's next wake-up. It does nothing where none is in flight, and it
// never waits. (A grace of an hour: the worker leaves the poller alone; the
// poller completes only on the polling thread, so the worker's idle ticks
// cannot take it either.)
TEST(Executor, APollOfAMessageDrivesItsPollerOnItsOwnThread) {
  runRanks(
      1,
      [](Transport& t, int) {
        Executor executor(t);
        const std::thread::id me = std::this_thread::get_id();
        EXPECT_FALSE(executor.progressMessages());  // nothing in flight
        std::atomic<bool> arrived{false};
        std::atomic<int> pollsHere{0};
        std::atomic<bool> added{false};
        executor.submit(
            [&] {
              executor.addPoller([&](bool abandon) {
                if (abandon) return true;
                if (std::this_thread::get_id() != me) return false;
                ++pollsHere;
                return arrived.load();
              });
              added = true;
            },
            Runner::CallerOrWorker, /*posts=*/true);
        ASSERT_TRUE(executor.helpUntil([&] { return added.load(); }));
        // The worker holds the drive while awake: a poll then does nothing
        // and says so; it takes the drive once the worker sleeps.
        const auto limit = Clock::now() + std::chrono::seconds(10);
        const int before = pollsHere.load();
        while (!executor.progressMessages() && Clock::now() < limit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        EXPECT_GT(pollsHere.load(), before);  // it ran the poller here, which is still in flight
        arrived = true;  // the message comes
        bool ran = false;
        while (!(ran = executor.progressMessages()) && Clock::now() < limit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(ran);
        EXPECT_FALSE(executor.progressMessages());  // completed there: nothing left in flight
      },
      withGrace(std::chrono::hours(1)));
}

namespace {
std::vector<int> cpusIn(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::vector<int> thisThreadsCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return cpusIn(set);
}

void bindThisThreadTo(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
}

struct WhereItRan {
  int cpu = -1;
  std::vector<int> workerCpus;  // the worker's mask while it ran the task
};

// Submits a task only the worker runs, from a thread bound to `cpu`.
WhereItRan runOnWorkerFrom(Executor& executor, int cpu) {
  std::promise<WhereItRan> ran;
  std::thread caller([&] {
    bindThisThreadTo(cpu);
    executor.submit([&] { ran.set_value({sched_getcpu(), thisThreadsCpus()}); }, Runner::Worker);
  });
  caller.join();
  auto result = ran.get_future();
  if (result.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "the worker did not run the task within 30 s";
    std::fprintf(stderr, "the worker did not run the task within 30 s\n");
    std::abort();  // the task still refers to `ran`: no return while it may run
  }
  return result.get();
}

Config following(bool follow) {
  Config config = ringreduce::testing::smallSegments();
  config.workerFollowsCaller = follow;
  return config;
}
}  // namespace

// RINGREDUCE_WORKER_FOLLOWS_CALLER: the worker moves to the core of the
// thread that submitted its task, whichever core that is, and back again.
TEST(Executor, TheWorkerRunsOnItsCallersCoreWhenItFollows) {
  std::vector<int> cpus = thisThreadsCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to tell the caller's core from another";
  if (cpus.size() > 4) cpus.resize(4);
  runRanks(
      1,
      [&](Transport& t, int) {
        Executor executor(t);
        for (int round = 0; round < 2; ++round) {
          for (int cpu : cpus) {
            const WhereItRan ran = runOnWorkerFrom(executor, cpu);
            EXPECT_EQ(ran.cpu, cpu);
            EXPECT_EQ(ran.workerCpus, std::vector<int>{cpu});
          }
        }
      },
      following(true), TransportKind::Loopback);
}

TEST(Executor, TheWorkerKeepsItsCoresWhenItDoesNotFollow) {
  const std::vector<int> cpus = thisThreadsCpus();
  runRanks(
      1,
      [&](Transport& t, int) {
        Executor executor(t);
        for (int cpu : cpus) EXPECT_EQ(runOnWorkerFrom(executor, cpu).workerCpus, cpus);
      },
      following(false), TransportKind::Loopback);
}

// A caller bound to a core the worker was never allowed (the user's own
// binding of one thread) does not widen the worker's mask.
TEST(CallerCore, ACoreOutsideTheWorkersMaskIsNotTaken) {
  const std::vector<int> cpus = thisThreadsCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  CallerCore core(true);
  std::thread worker([&] {
    bindThisThreadTo(cpus[0]);
    std::thread caller([&] {
      bindThisThreadTo(cpus[1]);
      core.noteCaller();
    });
    caller.join();
    EXPECT_EQ(core.follow(), -1);
    EXPECT_EQ(thisThreadsCpus(), std::vector<int>{cpus[0]});
    core.noteCaller();  // a caller on the worker's own core
    EXPECT_EQ(core.follow(), cpus[0]);
  });
  worker.join();
}

TEST(CallerCore, OffItNeverMovesTheWorker) {
  const std::vector<int> before = thisThreadsCpus();
  CallerCore core(false);
  core.noteCaller();
  EXPECT_EQ(core.follow(), -1);
  EXPECT_EQ(thisThreadsCpus(), before);
}
