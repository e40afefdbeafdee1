// Runs one function per rank, each on its own thread with its own transport:
// UCX (all bootstrapped through one InMemoryStore) or the in-process
// loopback. Algorithm tests run on both: the loopback isolates the algorithm
// from the network, UCX checks it on the transport the backend uses.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/record_allgather.h"
#include "core/base/record_exchange.h"
#include "core/config/config.h"
#include "transport/rendezvous/in_memory_store.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace ringreduce::testing {

enum class TransportKind { Ucx, Loopback };

inline std::string kindName(TransportKind kind) {
  return kind == TransportKind::Ucx ? "Ucx" : "Loopback";
}

inline Config smallSegments() {
  Config c;
  c.segmentBytes = 1024;  // many segments even for small test buffers
  return c;
}

// Rethrows the first rank's exception (as a test failure) after joining all.
inline void runRanks(int n, const std::function<void(Transport&, int)>& body,
                     const Config& config = smallSegments(),
                     TransportKind kind = TransportKind::Ucx) {
  auto store = std::make_shared<InMemoryStore>();
  auto fabric = std::make_shared<LoopbackFabric>(n);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        std::unique_ptr<Transport> transport;
        if (kind == TransportKind::Ucx) {
          transport = std::make_unique<UcxTransport>(rank, n, store, std::chrono::seconds(20),
                                                     config);
        } else {
          transport = std::make_unique<LoopbackTransport>(fabric, rank, config);
        }
        body(*transport, rank);
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

// Keeps the ranks of a test in the group until all of them reached the end
// of their bodies. A rank whose body returns destroys its transport, which
// says goodbye: a peer still waiting on it would be told that it left
// (Transport::throwIfSenderLeft), where a test expects a timeout or a
// silent rank. Each body holds `auto stay = together.stay();` from its start.
class StayTogether {
 public:
  explicit StayTogether(int ranks) : ranks_(ranks) {}
  struct Stay {
    StayTogether& group;
    ~Stay() {  // also when an ASSERT returns early
      ++group.done_;
      const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (group.done_.load() < group.ranks_ && std::chrono::steady_clock::now() < limit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  };
  Stay stay() { return Stay{*this}; }

 private:
  const int ranks_;
  std::atomic<int> done_{0};
};

// The same, each rank with a Comm of its own (transport, config, workspace).
inline void runComms(int n, TransportKind kind,
                     const std::function<void(const Comm&, int)>& body,
                     const Config& config = smallSegments()) {
  runRanks(
      n,
      [&](Transport& transport, int rank) {
        Workspace workspace;
        const Comm comm{transport, config, workspace};
        body(comm, rank);
      },
      config, kind);
}

// A record exchange for the device paths' tests (one operation, rounds
// numbered from 0 within it), over rank `t`'s transport.
inline RecordExchange exchangeFor(Transport& t, uint64_t seq) {
  OpContext op("device path", seq, std::chrono::seconds(20));
  auto round = std::make_shared<uint32_t>(0);
  return [&t, op, round](const void* mine, void* all, size_t bytes) {
    Workspace unused;  // a record exchange needs no scratch memory
    exchangeRecords(Comm{t, t.config(), unused}, op, (*round)++, mine, all, bytes);
  };
}

}  // namespace ringreduce::testing
