// What the engine's tests share: an Engine per rank over the in-process
// loopback transport, ranks as threads, and a bounded wait until the
// engine would run a collective directly.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "transport/loopback/loopback_transport.h"

namespace ringreduce::testing {

inline std::unique_ptr<Engine> loopbackEngine(const std::shared_ptr<LoopbackFabric>& fabric,
                                              int rank, const Config& config,
                                              bool checkCollectives = false) {
  return std::make_unique<Engine>(std::make_unique<LoopbackTransport>(fabric, rank, config),
                                  config, "test", checkCollectives,
                                  [](const CollectiveFingerprint&) { return std::string("op"); });
}

// Waits (up to 10 s) until runOnCaller would run now. A collective's outcome
// is delivered from inside its task, so the executor may still count it as
// running for a moment after outcome() or waitForQueued() returned.
inline bool becomesIdle(const Engine& engine) {
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (!engine.canRunOnCaller()) {
    if (Clock::now() >= limit) return false;
    std::this_thread::yield();
  }
  return true;
}

// Runs body(rank) for each of n ranks, each on its own thread; joins them all.
inline void eachRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) ranks.emplace_back([&, r] { body(r); });
  for (auto& t : ranks) t.join();
}

}  // namespace ringreduce::testing
