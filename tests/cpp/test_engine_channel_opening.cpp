// Engine::needChannel: the group's host channel opens on the first host
// collective, queued in sequence; every caller returns only once it has
// opened (or failed), so each chooses its path with the channel in its final
// state, also a second thread of the rank that arrives while the first
// thread's opening still runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "engine/engine.h"
#include "engine_ranks.h"
#include "transport/host/host_channel.h"
#include "transport/loopback/loopback_transport.h"

using namespace ringreduce;
using ringreduce::testing::loopbackEngine;

namespace {

bool becomesTrue(const std::atomic<bool>& flag) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() >= limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST(EngineChannelOpening, ASecondThreadWaitsForTheOpeningTheFirstQueued) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = loopbackEngine(fabric, 0, Config{});
  std::atomic<bool> openerStarted{false};
  std::atomic<bool> openerDone{false};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  engine->openChannelWhenFirstNeeded([&](Transport&) -> std::unique_ptr<HostChannel> {
    openerStarted = true;
    released.wait();  // the opening takes until the test lets it end
    openerDone = true;
    return nullptr;  // no channel: what matters is when the callers return
  });

  std::thread first([&] { engine->needChannel(); });
  ASSERT_TRUE(becomesTrue(openerStarted));
  std::atomic<bool> secondReturned{false};
  std::atomic<bool> openedWhenSecondReturned{false};
  std::thread second([&] {
    engine->needChannel();
    openedWhenSecondReturned = openerDone.load();
    secondReturned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(secondReturned.load()) << "the second caller returned before the channel opened";
  release.set_value();
  first.join();
  second.join();
  EXPECT_TRUE(openedWhenSecondReturned.load());
  EXPECT_EQ(engine->channel(), nullptr);
  engine->needChannel();  // settled: returns at once, opens nothing again
  engine->shutdown();
}
