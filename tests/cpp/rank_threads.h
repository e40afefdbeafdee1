// Runs one function per rank, each on its own thread with its own
// UcxTransport, all bootstrapped through one InMemoryStore.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/config.h"
#include "transport/in_memory_store.h"
#include "transport/ucx_transport.h"

namespace ringreduce::testing {

inline Config smallSegments() {
  Config c;
  c.segmentBytes = 1024;  // many segments even for small test buffers
  return c;
}

// Rethrows the first rank's exception (as a test failure) after joining all.
inline void runRanks(int n, const std::function<void(UcxTransport&, int)>& body,
                     const Config& config = smallSegments()) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        UcxTransport transport(rank, n, store, std::chrono::seconds(20), config);
        body(transport, rank);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < n; ++rank) {
    if (errors[rank]) {
      try {
        std::rethrow_exception(errors[rank]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
      }
    }
  }
}

}  // namespace ringreduce::testing
