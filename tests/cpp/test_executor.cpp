#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "rank_threads.h"
#include "engine/executor.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;

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
