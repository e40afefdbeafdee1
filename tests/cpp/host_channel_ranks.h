// n ranks on one host as threads of this process, each with its own host
// channel (mapping, doorbell, process fds), and the data the tests of the
// channel's collectives move (test_host_channel_collectives.cpp,
// test_host_channel_senders_leave.cpp).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/workspace.h"
#include "transport/host/host_channel.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/rendezvous/in_memory_store.h"
#include "rank_errors.h"

namespace ringreduce {
namespace channel_test {

using namespace std::chrono_literals;

// A small buffer, so that test messages of a few KiB go in several pieces.
constexpr size_t kBufferBytes = 4096;

inline HostChannel::Options channelOptions(std::chrono::microseconds spin = 100us,
                                    ChannelStores stores = ChannelStores::Auto) {
  HostChannel::Options o;
  o.bufferBytes = kBufferBytes;
  o.stores = stores;
  o.callerSpin = spin;
  o.adaptiveSpin = false;
  return o;
}

// n ranks on one host: a channel each, opened together, and what each
// rank's collectives run on (as Engine::callerComm gives them).
class Ranks {
 public:
  // `adjust`: changes rank r's channel options before it opens its channel.
  using Adjust = std::function<void(int, HostChannel::Options&)>;
  explicit Ranks(int n, std::chrono::microseconds spin = 100us,
                 ChannelStores stores = ChannelStores::Auto, const Adjust& adjust = nullptr)
      : n_(n), fabric_(std::make_shared<LoopbackFabric>(n)) {
    InMemoryStore store;
    channels_.resize(static_cast<size_t>(n));
    std::vector<std::string> whys(static_cast<size_t>(n));
    std::vector<std::thread> openers;
    for (int r = 0; r < n; ++r) {
      openers.emplace_back([&, r] {
        HostChannel::Options options = channelOptions(spin, stores);
        if (adjust) adjust(r, options);
        channels_[r] = HostChannel::open(store, "collectives/", r, n, options, 10s, &whys[r]);
      });
    }
    for (auto& t : openers) t.join();
    for (int r = 0; r < n; ++r) {
      if (!channels_[r]) throw std::runtime_error("no channel on rank " + std::to_string(r) + ": " + whys[r]);
      channels_[r]->setDescribe([](const void* detail, size_t bytes) {
        uint32_t word = 0;
        std::memcpy(&word, detail, std::min(bytes, sizeof(word)));
        return "op-" + std::to_string(word);
      });
      transports_.push_back(std::make_unique<LoopbackTransport>(fabric_, r, config_));
      workspaces_.push_back(std::make_unique<Workspace>());
    }
  }

  int size() const { return n_; }
  HostChannel& channel(int r) { return *channels_[r]; }
  // Rank r's scratch and the caller buffers it has noted (core/base/huge_pages.h).
  Workspace& workspace(int r) { return *workspaces_[r]; }
  void leave(int r) { channels_[r].reset(); }

  Comm comm(int r) {
    Comm c{*transports_[r], config_, *workspaces_[r]};
    c.channel = channels_[r].get();
    c.waitBudget = &channels_[r]->callerSpin();
    return c;
  }

  // Collective `seq` of rank r, with fingerprint word `word`, announced as
  // the engine announces every collective.
  OpContext enter(int r, const char* name, uint64_t seq, uint32_t word,
                  std::chrono::milliseconds limit = 20s) {
    OpContext op(name, seq, limit);
    op.fingerprintWord = word;
    channels_[r]->announce(seq, word, &word, sizeof(word), op.started());
    return op;
  }

  // body(rank) on a thread per rank; each rank's error text ("" if none).
  std::vector<std::string> run(const std::function<void(int)>& body) {
    return testing::onEachRank(n_, body);
  }

 private:
  const int n_;
  std::shared_ptr<LoopbackFabric> fabric_;
  Config config_;
  std::vector<std::unique_ptr<HostChannel>> channels_;
  std::vector<std::unique_ptr<LoopbackTransport>> transports_;
  std::vector<std::unique_ptr<Workspace>> workspaces_;
};

inline void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Byte i of rank r's data in collective k: distinct per rank, byte and collective.
inline uint8_t byteOf(int r, size_t i, uint64_t k) {
  return static_cast<uint8_t>(i * 31 + static_cast<size_t>(r) * 101 + k * 7 + 1);
}

inline std::vector<uint8_t> bytesOf(int r, size_t n, uint64_t k) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = byteOf(r, i, k);
  return v;
}

}  // namespace channel_test
}  // namespace ringreduce
