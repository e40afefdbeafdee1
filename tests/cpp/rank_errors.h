// Runs one function per rank on threads of this process and collects what
// each rank raised: for tests whose ranks are expected to fail, and say why.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace ringreduce::testing {

// Runs body(rank) on one thread per rank; returns each rank's error text ("" if none).
inline std::vector<std::string> onEachRank(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace ringreduce::testing
