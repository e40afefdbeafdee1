// The peer monitor tells a rank that left on purpose from one that died.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "transport/ucx/peer_monitor.h"

using namespace ringreduce;

namespace {

// Two monitors in one process, connected to each other, their first
// connections wired up.
struct Pair {
  std::unique_ptr<PeerMonitor> a = std::make_unique<PeerMonitor>(0, 2);
  std::unique_ptr<PeerMonitor> b = std::make_unique<PeerMonitor>(1, 2);

  // Both wait for their connections, as UcxTransport's constructor does;
  // after that neither is progressed until the test says so.
  Pair() {
    const std::vector<std::vector<uint8_t>> addresses{a->address(), b->address()};
    a->connect(addresses);
    b->connect(addresses);
    int unconnectedB = -1;
    std::thread other([&] { unconnectedB = b->awaitConnected(std::chrono::seconds(10)); });
    const int unconnectedA = a->awaitConnected(std::chrono::seconds(10));
    other.join();
    EXPECT_EQ(unconnectedA, 0);
    EXPECT_EQ(unconnectedB, 0);
  }
};

// Progresses a monitor as a waiting rank would, until it has heard what
// became of `peer` (a departure or a death), or `limit` has passed: a bound
// for a lost goodbye, far above the milliseconds it takes on a busy machine.
void progressUntilHeardOf(PeerMonitor& monitor, int peer, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    monitor.progress();
    if (monitor.hasDeparted(peer) || monitor.anyDead()) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

// A rank that destroys its group says goodbye, then closes its connections.
// When the survivor progresses only afterwards (it was busy, as a loaded rank
// finishing its last collective is), the goodbye and the closed connection
// arrive together: the departure must win. (Without the wait for the
// connections, the goodbye of a rank whose connection was still being wired
// was never sent, and the survivor saw a death: CI's flake.)
TEST(PeerMonitor, AGoodbyeSeenTogetherWithTheClosedConnectionIsNotADeath) {
  for (int round = 0; round < 4; ++round) {
    Pair pair;
    pair.b.reset();  // says goodbye, closes; pair.a is not progressed meanwhile
    progressUntilHeardOf(*pair.a, 1, std::chrono::seconds(20));
    // Once more after the news: a closed connection handled after the
    // goodbye must not turn the departure into a death either.
    pair.a->progress();
    EXPECT_TRUE(pair.a->hasDeparted(1)) << "round " << round;
    EXPECT_FALSE(pair.a->anyDead()) << "round " << round;
    EXPECT_EQ(pair.a->firstDeadPeer(), -1) << "round " << round;
  }
}

// The other half, a connection lost without a goodbye named as a death within
// milliseconds, is tested with real processes killed mid-collective
// (tests/python/test_failures.py).
