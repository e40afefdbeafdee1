// The host channel (transport/host/host_channel.h) and the allreduce over it
// (algorithms/host_channel/allreduce.h): ranks as threads of this process
// (each with its own mapping, doorbell and process fds), and, for a death, a
// forked process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/host_channel/allreduce.h"
#include "algorithms/host_channel/turn.h"
#include "algorithms/workspace.h"
#include "core/base/errors.h"
#include "core/math/host_reduce.h"
#include "rank_errors.h"
#include "transport/rendezvous/file_store.h"
#include "transport/host/host_channel.h"
#include "transport/rendezvous/in_memory_store.h"
#include "transport/loopback/loopback_transport.h"

namespace ringreduce {
namespace {

using namespace std::chrono_literals;

HostChannel::Options options(size_t bufferBytes = 64 * 1024,
                             std::chrono::microseconds spin = 200us) {
  HostChannel::Options o;
  o.bufferBytes = bufferBytes;
  o.callerSpin = spin;
  o.adaptiveSpin = false;  // the tests choose: spin, or sleep at once
  return o;
}

// One channel per rank, opened together over one store (the group's set-up).
std::vector<std::unique_ptr<HostChannel>> openChannels(
    int n, const std::vector<HostChannel::Options>& perRank, std::vector<std::string>* whys) {
  InMemoryStore store;
  std::vector<std::unique_ptr<HostChannel>> channels(static_cast<size_t>(n));
  whys->assign(static_cast<size_t>(n), "");
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      channels[r] = HostChannel::open(store, "test/", r, n, perRank[r], 10s, &(*whys)[r]);
    });
  }
  for (auto& t : threads) t.join();
  return channels;
}

std::vector<std::unique_ptr<HostChannel>> openChannels(int n, const HostChannel::Options& o) {
  std::vector<std::string> whys;
  auto channels = openChannels(n, std::vector<HostChannel::Options>(n, o), &whys);
  for (int r = 0; r < n; ++r) {
    if (!channels[r]) ADD_FAILURE() << "rank " << r << " has no channel: " << whys[r];
  }
  return channels;
}

using testing::onEachRank;

OpContext opNumbered(uint64_t seq, uint32_t word, std::chrono::milliseconds limit = 10s) {
  OpContext op("allreduce", seq, limit);
  op.fingerprintWord = word;
  return op;
}

std::string describeWord(const void* detail, size_t bytes) {
  uint32_t word = 0;
  std::memcpy(&word, detail, std::min(bytes, sizeof(word)));
  return "collective-" + std::to_string(word);
}

// One turn of a test's collective: the channel's next turn, as the
// algorithm takes it.
void publishTurn(HostChannel& channel, const OpContext& op) {
  channel.publish(FlagKind::Input, HostChannel::Turn{op.seq, static_cast<int>(op.seq & 1)}, op);
}

void awaitTurn(HostChannel& channel, const OpContext& op) {
  channel.awaitPeers(FlagKind::Input, HostChannel::Turn{op.seq, static_cast<int>(op.seq & 1)}, op,
                     channel.callerSpin());
}

void announce(HostChannel& channel, const OpContext& op) {
  channel.setDescribe(describeWord);
  channel.announce(op.seq, op.fingerprintWord, &op.fingerprintWord, sizeof(op.fingerprintWord),
                   op.started());
}

// Each rank's allreduce through the channel, as the engine runs it.
struct ChannelRank {
  HostChannel& channel;
  std::shared_ptr<LoopbackFabric> fabric;
  Config config;
  LoopbackTransport transport;
  Workspace workspace;
  // RINGREDUCE_ALGORITHM=shm: the channel takes messages of several
  // buffers too (auto stops at one: AnAllreduceTakesTheChannelUpToOneBuffer).
  ChannelRank(HostChannel& c, std::shared_ptr<LoopbackFabric> f, int rank)
      : channel(c), fabric(std::move(f)), transport(fabric, rank, config) {
    config.allreduceAlgorithm = AllreduceAlgorithm::HostChannel;
  }
  void allreduce(const OpContext& op, const ReductionArgs& args) {
    Comm comm{transport, config, workspace};
    comm.channel = &channel;
    comm.waitBudget = &channel.callerSpin();
    ASSERT_TRUE(hostChannelAllreduceApplies(comm, args.count * elementSize(args.type)));
    announce(channel, op);
    hostChannelAllreduce(comm, op, args);
  }
};

// Rank r's input: distinct per rank, element and collective, small integers
// (so float sums are exact in any order).
float inputOf(int rank, size_t i, uint64_t seq) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 13 + seq * 3) % 41) - 20);
}

void expectAllreduceSums(int n, size_t count, int collectives,
                         size_t bufferBytes = size_t{1} << 20) {
  SCOPED_TRACE("world " + std::to_string(n) + ", " + std::to_string(count) + " floats");
  auto channels = openChannels(n, options(bufferBytes));
  auto fabric = std::make_shared<LoopbackFabric>(n);
  std::vector<std::vector<float>> results(static_cast<size_t>(n));
  const auto errors = onEachRank(n, [&](int r) {
    ChannelRank rank(*channels[r], fabric, r);
    std::mt19937 jitter(static_cast<unsigned>(r));
    for (int k = 1; k <= collectives; ++k) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = inputOf(r, i, k);
      // Ranks arrive in different orders, so buffers alternate under load.
      if (jitter() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 200));
      rank.allreduce(opNumbered(k, 7), {data.data(), count, DataType::Float32, ReduceOp::Sum});
      for (size_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int q = 0; q < n; ++q) expected += inputOf(q, i, k);
        if (data[i] != expected) {
          throw std::runtime_error("collective " + std::to_string(k) + " element " +
                                   std::to_string(i) + ": " + std::to_string(data[i]) +
                                   " != " + std::to_string(expected));
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A turn's bytes move round its buffer (HostChannel::takeTurn): every rank
// places them alike, inside the buffer, on cache lines of their own, and a
// run of turns of one small footprint does not reuse the previous turn's
// lines of the same buffer.
TEST(HostChannel, TurnsMoveRoundTheBufferAlikeOnEveryRank) {
  const size_t buffer = 64 * 1024;
  auto channels = openChannels(2, options(buffer));
  ASSERT_EQ(channels.size(), 2u);
  const size_t footprints[] = {0, 1, 100, 4096, 20000, 40000, buffer - 1, buffer, 64};
  for (int round = 0; round < 10; ++round) {
    for (size_t footprint : footprints) {
      std::vector<size_t> lastOffset(2, buffer);  // per parity, within this run
      for (int k = 0; k < 6; ++k) {
        const HostChannel::Turn a = channels[0]->takeTurn(footprint);
        const HostChannel::Turn b = channels[1]->takeTurn(footprint);
        ASSERT_EQ(a.number, b.number);
        ASSERT_EQ(a.offset, b.offset) << footprint << " bytes, turn " << a.number;
        EXPECT_EQ(a.offset % HostChannel::kLineBytes, 0u);
        EXPECT_LE(a.offset + footprint, buffer) << footprint << " bytes, turn " << a.number;
        EXPECT_EQ(channels[1]->buffer(0, a), channels[1]->buffer(0, a.parity) + a.offset);
        if (footprint > 0 && 2 * footprint <= buffer && lastOffset[a.parity] < buffer) {
          EXPECT_NE(a.offset, lastOffset[a.parity]) << footprint << " bytes, turn " << a.number;
        }
        lastOffset[a.parity] = a.offset;
      }
    }
  }
}

// A rank's note (HostChannel::setNote) goes with its flag for the turn it
// filled: a peer reads each turn's own two words, one slot per parity as
// the fingerprint words, so the next turn's note does not overwrite the
// one a peer still reads; each flag kind has its own.
TEST(HostChannel, ANoteGoesWithItsTurnsFlag) {
  auto channels = openChannels(2, options());
  ASSERT_EQ(channels.size(), 2u);
  const HostChannel::Turn first = channels[0]->takeTurn(64);
  channels[0]->setNote(FlagKind::Input, 7, 0x1000);
  const HostChannel::Turn second = channels[0]->takeTurn(64);
  channels[0]->setNote(FlagKind::Input, 9, 0x2000);
  channels[0]->setNote(FlagKind::Reduced, 11, 0x3000);
  EXPECT_EQ(channels[1]->note(0, FlagKind::Input, first), std::make_pair(uint64_t{7}, uint64_t{0x1000}));
  EXPECT_EQ(channels[1]->note(0, FlagKind::Input, second), std::make_pair(uint64_t{9}, uint64_t{0x2000}));
  EXPECT_EQ(channels[1]->note(0, FlagKind::Reduced, second),
            std::make_pair(uint64_t{11}, uint64_t{0x3000}));
  // Rank 1 gave none.
  EXPECT_EQ(channels[0]->note(1, FlagKind::Input, first), std::make_pair(uint64_t{0}, uint64_t{0}));
}

TEST(HostChannel, OnePassSumsAreExactAtEveryWorld) {
  for (int n : {2, 3, 4}) expectAllreduceSums(n, 1000, 60);
}

TEST(HostChannel, TwoPhaseSumsAreExactAtEveryWorld) {
  for (int n : {2, 3, 5}) {
    expectAllreduceSums(n, twoPhaseFromBytes(n) / sizeof(float) + 1001, 8);  // uneven chunks
  }
}

// Each rank's result of one collective over `inputs` (one per rank).
template <typename T>
std::vector<std::vector<T>> reduceOnEachRank(std::vector<std::vector<T>> data, DataType type,
                                             ReduceOp op, size_t bufferBytes = 64 * 1024) {
  const int n = static_cast<int>(data.size());
  auto channels = openChannels(n, options(bufferBytes));
  auto fabric = std::make_shared<LoopbackFabric>(n);
  const auto errors = onEachRank(n, [&](int r) {
    ChannelRank rank(*channels[r], fabric, r);
    rank.allreduce(opNumbered(1, 3), {data[r].data(), data[r].size(), type, op});
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return data;
}

TEST(HostChannel, MinAndMaxKeepRankOrderWhereTheOrderShows) {
  // Between -0 and +0, and between two NaNs, MIN and MAX pick by order:
  // both ranks of two must pick as rank order says (rank 1 may not swap).
  const auto floatOf = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  };
  const float nanA = floatOf(0x7fc00001u), nanB = floatOf(0x7fc00002u);
  const std::vector<std::vector<float>> inputs = {{-0.0f, +0.0f, nanA, 1.0f},
                                                  {+0.0f, -0.0f, nanB, nanB}};
  for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
    std::vector<float> expected = inputs[0];
    reduceInto(DataType::Float32, op, expected.data(), inputs[1].data(), expected.size());
    const auto results = reduceOnEachRank(inputs, DataType::Float32, op);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(std::memcmp(results[r].data(), expected.data(), expected.size() * 4), 0)
          << reduceOpName(op) << " rank " << r;
    }
  }
}

TEST(HostChannel, EveryRankHoldsTheFirstRanksNaNWhereTwoNaNsMeet) {
  // x86 keeps the first operand's NaN (payload and sign) when both are NaN:
  // of two ranks, rank 1 must not reduce in the other order, or its bits
  // differ from rank 0's. Every float type and op where that can show.
  const auto floatOf = [](uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  };
  const std::vector<std::vector<float>> inputs = {
      {floatOf(0x7fc00001u), floatOf(0xffc00003u), 1.0f, floatOf(0x7fc00005u)},
      {floatOf(0xffc00002u), floatOf(0x7fc00004u), 2.0f, floatOf(0x7fc00006u)}};
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Avg}) {
    std::vector<float> expected = inputs[0];
    if (op == ReduceOp::Avg) {
      reduceAndAverage(DataType::Float32, expected.data(), inputs[1].data(), expected.size(), 2);
    } else {
      reduceInto(DataType::Float32, op, expected.data(), inputs[1].data(), expected.size());
    }
    const auto results = reduceOnEachRank(inputs, DataType::Float32, op);
    // Rank order's bits (buffer 0 (op) buffer 1) on both ranks.
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(std::memcmp(results[r].data(), expected.data(), expected.size() * 4), 0)
          << reduceOpName(op) << " rank " << r;
    }
  }
  const auto doubleOf = [](uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  };
  // The same in two phases: rank 1 reduces its chunk with its own values
  // read in place, rank 0's first.
  std::vector<std::vector<float>> large(2, std::vector<float>(twoPhaseFromBytes(2) / 4 + 5));
  for (size_t i = 0; i < large[0].size(); ++i) {
    large[0][i] = floatOf(0x7fc00000u + static_cast<uint32_t>(i % 1000) + 1);
    large[1][i] = floatOf(0xffc00000u + static_cast<uint32_t>(i % 999) + 1);
  }
  std::vector<float> firsts = large[0];
  reduceInto(DataType::Float32, ReduceOp::Sum, firsts.data(), large[1].data(), firsts.size());
  const auto inTwoPhases =
      reduceOnEachRank(large, DataType::Float32, ReduceOp::Sum, twoPhaseFromBytes(2) * 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(std::memcmp(inTwoPhases[r].data(), firsts.data(), firsts.size() * 4), 0)
        << "two phases, rank " << r;
  }
  const std::vector<std::vector<double>> doubles = {{doubleOf(0x7ff8000000000011ull)},
                                                    {doubleOf(0xfff8000000000022ull)}};
  std::vector<double> expected = doubles[0];
  reduceInto(DataType::Float64, ReduceOp::Sum, expected.data(), doubles[1].data(), 1);
  const auto results = reduceOnEachRank(doubles, DataType::Float64, ReduceOp::Sum);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(std::memcmp(results[r].data(), expected.data(), 8), 0);
}

TEST(HostChannel, AMessageLargerThanABufferGoesInPieces) {
  // 512 KiB buffers: three two-phase pieces and a one-pass rest, each a
  // turn of its own, over several collectives.
  const size_t buffer = size_t{512} << 10;
  const size_t count = (3 * buffer + 150 * 1024) / sizeof(float) + 7;
  for (int n : {2, 3}) expectAllreduceSums(n, count, 5, buffer);
}

// Auto: an allreduce takes the channel where it fits one buffer, or up to
// four below kHostChannelAllreduceBelowBytes (4 MiB, from where cma's
// buffers go onto 2 MiB pages); beyond, cma. RINGREDUCE_ALGORITHM=shm: up to
// four buffers at any size. Every other collective: up to four buffers.
bool allreduceTakesChannel(size_t buffer, size_t bytes, AllreduceAlgorithm algorithm) {
  auto channels = openChannels(2, options(buffer));
  auto fabric = std::make_shared<LoopbackFabric>(2);
  Config config;
  config.allreduceAlgorithm = algorithm;
  LoopbackTransport transport(fabric, 0, config);
  Workspace workspace;
  Comm comm{transport, config, workspace};
  comm.channel = channels[0].get();
  return hostChannelAllreduceApplies(comm, bytes);
}

TEST(HostChannel, AnAllreduceTakesTheChannelUpToFourBuffersBelowFourMiB) {
  const auto takes = [](size_t buffer, size_t bytes) {
    return allreduceTakesChannel(buffer, bytes, AllreduceAlgorithm::Auto);
  };
  const size_t small = 64 * 1024;
  EXPECT_TRUE(takes(small, small));
  EXPECT_TRUE(takes(small, small + 4));
  EXPECT_TRUE(takes(small, kHostChannelMaxPieces * small));
  EXPECT_FALSE(takes(small, kHostChannelMaxPieces * small + 4));
  const size_t mib = size_t{1} << 20;
  EXPECT_TRUE(takes(mib, 2 * mib));
  EXPECT_TRUE(takes(mib, 3 * mib));
  EXPECT_TRUE(takes(mib, kHostChannelAllreduceBelowBytes - 4));
  EXPECT_FALSE(takes(mib, kHostChannelAllreduceBelowBytes));
  // A buffer of 4 MiB (RINGREDUCE_SHM_BYTES): one buffer still, not more.
  EXPECT_TRUE(takes(4 * mib, 4 * mib));
  EXPECT_FALSE(takes(4 * mib, 4 * mib + 4));
}

TEST(HostChannel, AnAllreduceAskedToTakeTheChannelTakesUpToFourBuffers) {
  const size_t mib = size_t{1} << 20;
  for (size_t buffer : {size_t{64} * 1024, mib}) {
    EXPECT_TRUE(allreduceTakesChannel(buffer, kHostChannelMaxPieces * buffer,
                                      AllreduceAlgorithm::HostChannel));
    EXPECT_FALSE(allreduceTakesChannel(buffer, kHostChannelMaxPieces * buffer + 4,
                                       AllreduceAlgorithm::HostChannel));
  }
  // Another algorithm asked for: never the channel.
  EXPECT_FALSE(allreduceTakesChannel(mib, 4096, AllreduceAlgorithm::Ring));
}

TEST(HostChannel, EveryOtherCollectiveTakesTheChannelUpToFourBuffers) {
  const size_t buffer = 64 * 1024;
  auto channels = openChannels(2, options(buffer));
  auto fabric = std::make_shared<LoopbackFabric>(2);
  Config config;
  LoopbackTransport transport(fabric, 0, config);
  Workspace workspace;
  Comm comm{transport, config, workspace};
  comm.channel = channels[0].get();
  EXPECT_TRUE(hostChannelCollectiveApplies(comm, kHostChannelMaxPieces * buffer));
  EXPECT_FALSE(hostChannelCollectiveApplies(comm, kHostChannelMaxPieces * buffer + 4));
}

TEST(HostChannel, EveryRankHoldsTheSameBitsInRankOrder) {
  // float16 rounds at every step, so the order of the reduction shows in the
  // bits: every rank must compute buffer 0 + buffer 1 + ... in that order,
  // in one pass and in two phases (where a rank's own chunk is read from
  // its input, in place, not from its buffer), with uneven chunks.
  for (const auto& [n, count] : {std::pair<int, size_t>{2, 4097}, {4, 4097},
                                 {2, twoPhaseFromBytes(2) / 2 + 4097},
                                 {3, twoPhaseFromBytes(3) / 2 + 4097},
                                 {4, twoPhaseFromBytes(4) / 2 + 4097}}) {
    std::vector<std::vector<uint16_t>> inputs(n, std::vector<uint16_t>(count));
    std::mt19937 random(5);
    for (auto& input : inputs) {
      for (auto& h : input) h = static_cast<uint16_t>(0x3000 + random() % 0x0fff);  // 0.125..1
    }
    std::vector<uint16_t> expected = inputs[0];
    for (int r = 1; r < n; ++r) {
      reduceInto(DataType::Float16, ReduceOp::Sum, expected.data(), inputs[r].data(), count);
    }
    const auto results =
        reduceOnEachRank(inputs, DataType::Float16, ReduceOp::Sum, size_t{1} << 20);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(results[r], expected) << "world " << n << ", " << count << " halves, rank " << r;
    }
  }
}

TEST(HostChannel, AverageAndMaxOverIntegers) {
  const int n = 3;
  const size_t count = 513;
  auto channels = openChannels(n, options());
  auto fabric = std::make_shared<LoopbackFabric>(n);
  const auto errors = onEachRank(n, [&](int r) {
    ChannelRank rank(*channels[r], fabric, r);
    std::vector<int64_t> maxima(count), sums(count);
    for (size_t i = 0; i < count; ++i) maxima[i] = sums[i] = static_cast<int64_t>(i * (r + 1)) - 300;
    rank.allreduce(opNumbered(1, 1), {maxima.data(), count, DataType::Int64, ReduceOp::Max});
    rank.allreduce(opNumbered(2, 2), {sums.data(), count, DataType::Int64, ReduceOp::Avg});
    for (size_t i = 0; i < count; ++i) {
      const int64_t values[3] = {static_cast<int64_t>(i) - 300, static_cast<int64_t>(2 * i) - 300,
                                 static_cast<int64_t>(3 * i) - 300};
      if (maxima[i] != std::max({values[0], values[1], values[2]})) throw std::runtime_error("max");
      // Integer AVG truncates toward zero, as the ring's does.
      if (sums[i] != (values[0] + values[1] + values[2]) / 3) throw std::runtime_error("avg");
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(HostChannel, APeerInAnotherCollectiveIsNamedAtOnce) {
  auto channels = openChannels(2, options());
  const auto errors = onEachRank(2, [&](int r) {
    // Same number, different fingerprints: both see it, neither waits for a timeout.
    const OpContext op = opNumbered(1, r == 0 ? 11 : 22, 60s);
    announce(*channels[r], op);
    if (r == 0) publishTurn(*channels[r], op);  // rank 1 never sets its flag
    awaitTurn(*channels[r], op);
  });
  EXPECT_NE(errors[0].find("rank 1 is in a different collective: it is in collective-22 #1"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 0 is in a different collective: it is in collective-11 #1"),
            std::string::npos)
      << errors[1];
}

// When the peers announced a collective, for an asynchronous caller's
// arrival wait to learn from (engine/arrival_lesson.h): the last peer's
// stamp, only while every peer is in that collective.
TEST(HostChannel, ThePeersAnnouncementsSayWhenTheLastOfThemCame) {
  auto channels = openChannels(3, options());
  const std::chrono::steady_clock::time_point t0{std::chrono::seconds(50)};
  const auto stamp = [&](int r, uint64_t seq, std::chrono::microseconds after) {
    channels[r]->announce(seq, 7, &seq, sizeof(seq), t0 + after);
  };
  EXPECT_FALSE(channels[0]->peersAnnouncedAt(1).has_value());  // nobody in #1 yet
  stamp(0, 1, std::chrono::microseconds(0));
  stamp(1, 1, std::chrono::microseconds(12));
  EXPECT_FALSE(channels[0]->peersAnnouncedAt(1).has_value());  // rank 2 not in #1 yet
  stamp(2, 1, std::chrono::microseconds(5));
  EXPECT_EQ(channels[0]->peersAnnouncedAt(1), t0 + std::chrono::microseconds(12));
  EXPECT_EQ(channels[1]->peersAnnouncedAt(1), t0 + std::chrono::microseconds(5));
  stamp(2, 2, std::chrono::microseconds(30));  // rank 2 moved on: #1's stamp is gone
  EXPECT_FALSE(channels[0]->peersAnnouncedAt(1).has_value());
  EXPECT_FALSE(channels[0]->peersAnnouncedAt(2).has_value());  // rank 1 not in #2
}

// Ranks whose CLOCK_MONOTONIC differs (containers in their own time
// namespaces) keep the channel, but no stamp of one is read on another's
// clock: the arrival wait learns nothing from them.
TEST(HostChannel, RanksOnDifferentClocksTellNoAnnouncementTimes) {
  std::vector<HostChannel::Options> perRank(2, options());
  perRank[0].clock = 101;
  perRank[1].clock = 202;
  std::vector<std::string> whys;
  auto channels = openChannels(2, perRank, &whys);
  ASSERT_TRUE(channels[0] && channels[1]) << whys[0] << " / " << whys[1];
  EXPECT_FALSE(channels[0]->sharesClock());
  EXPECT_FALSE(channels[1]->sharesClock());
  const std::chrono::steady_clock::time_point t0{std::chrono::seconds(50)};
  for (int r = 0; r < 2; ++r) {
    const uint64_t seq = 1;
    channels[r]->announce(seq, 7, &seq, sizeof(seq), t0);
  }
  EXPECT_TRUE(channels[0]->peersAnnounced(1));  // the channel itself works as before
  EXPECT_FALSE(channels[0]->peersAnnouncedAt(1).has_value());
  EXPECT_FALSE(channels[1]->peersAnnouncedAt(1).has_value());

  // One clock (the same namespace on every rank): the stamps are read.
  perRank[1].clock = 101;
  auto same = openChannels(2, perRank, &whys);
  ASSERT_TRUE(same[0] && same[1]) << whys[0] << " / " << whys[1];
  EXPECT_TRUE(same[0]->sharesClock());
  for (int r = 0; r < 2; ++r) {
    const uint64_t seq = 1;
    same[r]->announce(seq, 7, &seq, sizeof(seq), t0 + std::chrono::microseconds(r));
  }
  EXPECT_EQ(same[0]->peersAnnouncedAt(1), t0 + std::chrono::microseconds(1));
}

TEST(HostChannel, DataFromAnotherCollectiveIsRefusedEvenOnceItsRankMovedOn) {
  // Rank 1 set its flag for #1 in another collective, then went on to #2
  // (as a rank that failed does): its position no longer says #1, its flag
  // still does.
  auto channels = openChannels(2, options());
  const OpContext mine = opNumbered(1, 11, 60s);
  const OpContext theirs = opNumbered(1, 22, 60s);
  announce(*channels[1], theirs);
  publishTurn(*channels[1], theirs);
  announce(*channels[1], opNumbered(2, 33));
  announce(*channels[0], mine);
  publishTurn(*channels[0], mine);
  try {
    awaitTurn(*channels[0], mine);
    ADD_FAILURE() << "rank 0 took rank 1's data";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce #1 on rank 0: rank 1 is in a different "
                                         "collective"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostChannel, ASleeperWakesWhenItsPeerCallsAnotherCollective) {
  // Rank 0 sleeps before rank 1 says where it is; rank 1 then announces
  // another collective under the same number (and sets no flag): that
  // alone must wake rank 0, long before its minute's deadline.
  auto channels = openChannels(2, options(64 * 1024, 0us));
  const auto errors = onEachRank(2, [&](int r) {
    if (r == 1) {
      while (!channels[0]->asleep(0)) std::this_thread::yield();
      announce(*channels[1], opNumbered(1, 22));
      return;
    }
    const OpContext op = opNumbered(1, 11, 60s);
    announce(*channels[0], op);
    publishTurn(*channels[0], op);
    awaitTurn(*channels[0], op);
  });
  EXPECT_NE(errors[0].find("rank 1 is in a different collective: it is in collective-22 #1"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(channels[0]->sleeps(), 1u);
}

TEST(HostChannel, ATimeoutNamesTheLateRankAndWhereItIs) {
  auto channels = openChannels(3, options(64 * 1024, 0us));
  const OpContext first = opNumbered(1, 5, 20s);
  const auto errors = onEachRank(3, [&](int r) {
    announce(*channels[r], first);
    publishTurn(*channels[r], first);
    awaitTurn(*channels[r], first);
    if (r == 2) return;  // rank 2 stays in #1
    const OpContext second = opNumbered(2, 5, 300ms);
    announce(*channels[r], second);
    publishTurn(*channels[r], second);
    awaitTurn(*channels[r], second);
  });
  for (int r : {0, 1}) {
    EXPECT_NE(errors[r].find("allreduce #2 timed out after 300 ms on rank " + std::to_string(r) +
                             " (operation timeout reached): still waiting for rank 2 (is that "
                             "rank alive and calling the same collective?); rank(s) not seen in "
                             "allreduce #2: 2 (it is in collective-5 #1)"),
              std::string::npos)
        << errors[r];
  }
  EXPECT_EQ(errors[2], "");
}

TEST(HostChannel, ARankThatLeftOrFailedEndsTheWait) {
  for (bool leaves : {true, false}) {
    auto channels = openChannels(2, options(64 * 1024, 0us));
    const auto errors = onEachRank(2, [&](int r) {
      const OpContext op = opNumbered(1, 9, 60s);
      if (r == 1) {
        // Once rank 0 sleeps, so that the news must wake it.
        while (!channels[0]->asleep(0)) std::this_thread::yield();
        if (leaves) {
          channels[1].reset();
        } else {
          channels[1]->fail("its own timeout");
        }
        return;
      }
      announce(*channels[r], op);
      publishTurn(*channels[r], op);
      awaitTurn(*channels[r], op);
    });
    const std::string expected =
        leaves ? "allreduce #1 on rank 0: rank 1 has left the group"
               : "allreduce #1 on rank 0 failed: rank 1 gave up on the group: its own timeout";
    EXPECT_NE(errors[0].find(expected), std::string::npos) << errors[0];
  }
}

TEST(HostChannel, AnAbortWakesThisRanksOwnSleep) {
  auto channels = openChannels(2, options(64 * 1024, 0us));
  std::string error;
  std::thread waiter([&] {
    try {
      const OpContext op = opNumbered(1, 9, 60s);
      announce(*channels[0], op);
      publishTurn(*channels[0], op);
      awaitTurn(*channels[0], op);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  while (!channels[0]->asleep(0)) std::this_thread::yield();
  channels[0]->abort("process group 'g' was aborted on rank 0");
  waiter.join();
  EXPECT_NE(error.find("allreduce #1 on rank 0: process group 'g' was aborted on rank 0"),
            std::string::npos)
      << error;
  // And the peer hears that this rank gave up (rank 0 set its flag for #1
  // only: #2 needs the flag it never sets).
  const OpContext op = opNumbered(2, 9, 60s);
  announce(*channels[1], op);
  try {
    awaitTurn(*channels[1], op);
    ADD_FAILURE() << "rank 1's wait returned";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 gave up on the group: process group 'g' was "
                                         "aborted"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostChannel, APeerThatGaveUpAfterItsFlagFailsTheCollectiveNotTheOneBefore) {
  auto channels = openChannels(2, options());
  for (int k = 1; k <= 2; ++k) {
    const OpContext op = opNumbered(k, 6, 60s);
    announce(*channels[0], op);
    publishTurn(*channels[0], op);
  }
  channels[0]->abort("aborted on rank 0");  // while in #2, its flag set
  const auto await = [&](uint64_t seq) -> std::string {
    try {
      const OpContext op = opNumbered(seq, 6, 60s);
      announce(*channels[1], op);
      publishTurn(*channels[1], op);
      awaitTurn(*channels[1], op);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  EXPECT_EQ(await(1), "");  // #1 was over on rank 0 before it gave up
  EXPECT_NE(await(2).find("allreduce #2 on rank 1 failed: rank 0 gave up on the group: aborted "
                          "on rank 0"),
            std::string::npos);
}

TEST(HostChannel, APeerThatGaveUpAfterFinishingTheCollectiveLeavesItComplete) {
  // Rank 0 is done with #1 and gives up before it calls anything else (a
  // shrink aborting the old group right after an allreduce): rank 1, still
  // in #1, completes it; without the engine's word that #1 was done, the
  // same abort fails #1 on rank 1 too.
  for (const bool done : {true, false}) {
    auto channels = openChannels(2, options());
    const OpContext op = opNumbered(1, 6, 60s);
    announce(*channels[0], op);
    publishTurn(*channels[0], op);
    if (done) channels[0]->finished(1);
    channels[0]->abort("aborted on rank 0");
    std::string error;
    try {
      announce(*channels[1], op);
      publishTurn(*channels[1], op);
      awaitTurn(*channels[1], op);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (done) {
      EXPECT_EQ(error, "");
    } else {
      EXPECT_NE(error.find("allreduce #1 on rank 1 failed: rank 0 gave up on the group"),
                std::string::npos)
          << error;
    }
  }
}

// A read of a peer's block that fails (process_vm_readv's errno) names the
// cause: its process gone (ESRCH) as a wait names a death; EFAULT from a
// peer that gave up on the collective (it left and freed its block: another
// rank died) names what made it give up, which is what the caller must
// see; any other, the kernel's reason. CI once saw "Bad address" where the
// dead rank should have been named.
TEST(HostChannel, AnUnreadableBlockNamesWhyItsRankLeft) {
  auto channels = openChannels(2, options());
  const OpContext op = opNumbered(1, 6, 60s);
  announce(*channels[0], op);
  announce(*channels[1], op);
  const auto unreadable = [&](int error) -> std::string {
    try {
      channels[0]->throwUnreadable(1, op, error);
    } catch (const TransportError& e) {
      return e.what();
    }
    return "nothing thrown";
  };
  EXPECT_NE(unreadable(ESRCH).find("allreduce #1 on rank 0 failed: rank 1 is gone"),
            std::string::npos);
  EXPECT_NE(unreadable(EFAULT).find("could not read rank 1's block from its memory"),
            std::string::npos);
  channels[1]->fail("allreduce #1 on rank 1 failed: rank 2 is gone (its process exited)");
  const std::string error = unreadable(EFAULT);
  EXPECT_NE(error.find("allreduce #1 on rank 0 failed: rank 1 gave up on the group: allreduce "
                       "#1 on rank 1 failed: rank 2 is gone"),
            std::string::npos)
      << error;
  // Rank 1 gave up in #1: not the cause of a failed read in an earlier collective.
  const std::string earlier = [&] {
    try {
      channels[0]->throwUnreadable(1, opNumbered(0, 6, 60s), EFAULT);
    } catch (const TransportError& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  }();
  EXPECT_NE(earlier.find("could not read rank 1's block"), std::string::npos) << earlier;
}

// After a failed collective whose peer may still copy this rank's memory:
// the wait ends when the peer's flag comes, not when it fails (an abort from
// another thread sets that while its copy may go on), and at `until` when
// neither comes. A peer that left the group (not having failed) ends it too.
TEST(HostChannel, AFailedRankWaitsForItsPeerToBeDoneWithItsMemoryNotForItsFailure) {
  auto channels = openChannels(2, options());
  const OpContext op = opNumbered(1, 6, 60s);
  announce(*channels[0], op);
  announce(*channels[1], op);
  const HostChannel::Turn turn{1, 1};
  channels[1]->fail("aborted on rank 1");
  auto start = Clock::now();
  EXPECT_FALSE(channels[0]->awaitPeerDoneCopying(FlagKind::Reduced, 1, turn, start + 30ms));
  EXPECT_GE(Clock::now() - start, 30ms);
  std::thread peer([&] {
    std::this_thread::sleep_for(20ms);
    channels[1]->publish(FlagKind::Reduced, turn, op);
  });
  start = Clock::now();
  EXPECT_TRUE(channels[0]->awaitPeerDoneCopying(FlagKind::Reduced, 1, turn, start + 10s));
  EXPECT_GE(Clock::now() - start, 20ms);
  peer.join();
  auto others = openChannels(2, options());
  others[1].reset();  // leaves the group
  EXPECT_TRUE(others[0]->awaitPeerDoneCopying(FlagKind::Reduced, 1, turn, Clock::now() + 10s));
}

// One turn of two ranks in which rank 1 sets its flag only once rank 0
// sleeps (rank 0 must come to sleep at once: no spin). Both announcements
// come before any sleep: an announcement rings a sleeper too (it may be in
// another collective), which would wake rank 0 a second time before the
// flag does.
void turnWhileRankZeroSleeps(std::vector<std::unique_ptr<HostChannel>>& channels) {
  std::atomic<int> announced{0};
  const auto errors = onEachRank(2, [&](int r) {
    const OpContext op = opNumbered(1, 4, 60s);
    announce(*channels[r], op);
    announced.fetch_add(1);
    while (announced.load() < 2) std::this_thread::yield();
    if (r == 1) {
      while (!channels[0]->asleep(0)) std::this_thread::yield();
    }
    publishTurn(*channels[r], op);
    awaitTurn(*channels[r], op);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(HostChannel, ASleeperIsWokenByTheFlagOnce) {
  // No spin at all: rank 0 sleeps at once, and only rank 1's ring can end
  // its sleep before the minute's deadline.
  auto channels = openChannels(2, options(64 * 1024, 0us));
  turnWhileRankZeroSleeps(channels);
  EXPECT_EQ(channels[0]->sleeps(), 1u);
}

// A wake-up by the flags brings the spin back (two ranks that each sleep
// until the other wakes would stay so), unless other work wants the cores
// (Options::contended): then the peer was late waiting for a core, and a
// spin would hold one it needs.
TEST(HostChannel, AWakeUpBringsTheSpinBackOnlyWhereTheCoresAreFree) {
  for (const bool contended : {false, true}) {
    // A ceiling far above any wake-up here, however loaded the machine
    // (a wake-up slower than the ceiling teaches nothing either way).
    HostChannel::Options o = options(64 * 1024, 100ms);
    o.adaptiveSpin = true;
    o.contended = [contended] { return contended; };
    auto channels = openChannels(2, o);
    // Rank 0's budget at 0: spins that ran out, as under load.
    SpinBudget& spin = channels[0]->callerSpin();
    for (int i = 0; i < 10 && spin.budget().count() > 0; ++i) {
      spin.startWait();
      spin.keepSpinning(spin.now() + 1s);
    }
    ASSERT_EQ(spin.budget().count(), 0);
    turnWhileRankZeroSleeps(channels);
    ASSERT_EQ(channels[0]->sleeps(), 1u) << "rank 0 slept once, woken by rank 1's flag";
    if (contended) {
      EXPECT_EQ(spin.budget().count(), 0) << "contended cores: no spin brought back";
    } else {
      EXPECT_GT(spin.budget().count(), 0) << "free cores: the spin comes back";
    }
  }
}

// This thread onto one CPU; the CPUs this process may use, in order.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void pinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) throw std::runtime_error("sched_setaffinity");
}

// Turns of two ranks pinned to the given CPUs, in which `late` sets its
// flag `delay` after the other: the first turn tells each rank where the
// other runs (its flag's CPU). Returns the other rank's sleeps over the
// turns after the first.
uint64_t sleepsWhileAPeerIsLate(std::vector<std::unique_ptr<HostChannel>>& channels,
                                const int cpus[2], int late, int turns,
                                std::chrono::milliseconds delay) {
  uint64_t before = 0;
  const auto errors = onEachRank(2, [&](int r) {
    pinThisThread(cpus[r]);
    for (int k = 1; k <= turns; ++k) {
      const OpContext op = opNumbered(static_cast<uint64_t>(k), 4, 60s);
      announce(*channels[r], op);
      if (r == late && k > 1) std::this_thread::sleep_for(delay);
      publishTurn(*channels[r], op);
      awaitTurn(*channels[r], op);
      if (k == 1 && r != late) before = channels[r]->sleeps();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  return channels[1 - late]->sleeps() - before;
}

// A wait for a peer that last set its flag on this thread's CPU sleeps at
// once, however long the spin may be: a spin would hold the core the peer
// needs. A peer on another core is caught spinning.
TEST(HostChannel, AWaitForAPeerOnThisCoreSleepsAtOnceAndElsewhereSpins) {
  const std::vector<int> cpus = allowedCpus();
  ASSERT_FALSE(cpus.empty());
  {
    auto channels = openChannels(2, options(64 * 1024, 60s));  // a fixed spin of a minute
    const int sameCore[2] = {cpus[0], cpus[0]};
    EXPECT_GE(sleepsWhileAPeerIsLate(channels, sameCore, /*late=*/1, 3, 20ms), 2u)
        << "rank 0 slept in each late turn";
  }
  // The other half needs a second CPU (CI's machines have two).
  if (cpus.size() >= 2) {
    auto channels = openChannels(2, options(64 * 1024, 60s));
    const int twoCores[2] = {cpus[0], cpus[1]};
    EXPECT_EQ(sleepsWhileAPeerIsLate(channels, twoCores, /*late=*/1, 3, 20ms), 0u)
        << "rank 0 caught rank 1's flag spinning";
  }
}

// Two ranks on one core under load (Options::contended): the higher moves
// off it after a streak of waits beside the lower (Options::moveOffCpu
// stands for the move here; core/base/core_separation.h), once; not where
// the setting is off, and never the lower rank.
TEST(HostChannel, TheHigherOfTwoRanksOnOneCoreMovesOffItUnderLoad) {
  const std::vector<int> cpus = allowedCpus();
  ASSERT_FALSE(cpus.empty());
  for (const bool separate : {true, false}) {
    SCOPED_TRACE(separate ? "separating" : "off");
    std::atomic<int> moves{0};
    HostChannel::Options o = options(64 * 1024, 0us);  // every wait sleeps at once
    o.contended = [] { return true; };
    o.separateCores = separate;
    o.moveOffCpu = [&moves] {
      moves.fetch_add(1);
      return true;
    };
    auto channels = openChannels(2, o);
    const int sameCore[2] = {cpus[0], cpus[0]};
    // Turn 1 tells rank 1 where rank 0 runs; then kStreak + 3 turns in
    // which rank 1 waits for rank 0 beside it.
    sleepsWhileAPeerIsLate(channels, sameCore, /*late=*/0, CoreSeparation::kStreak + 4, 2ms);
    EXPECT_EQ(channels[1]->coreMoves(), separate ? 1 : 0);
    EXPECT_EQ(channels[0]->coreMoves(), 0);
    EXPECT_EQ(moves.load(), separate ? 1 : 0);
  }
}

// A transport whose one news is how often its thread progressed it: a peer
// that needs a message only this rank's progress moves (the rendezvous of
// an earlier isend) waits for that count to grow before it comes to the
// collective. With `withFd`, an eventfd stands for its event fd; without,
// it has none (as a decorator of another transport), and a sleep beside it
// must look at it in slices.
class ProgressCountingTransport : public LoopbackTransport {
 public:
  ProgressCountingTransport(std::shared_ptr<LoopbackFabric> fabric, int rank, const Config& config,
                            bool withFd)
      : LoopbackTransport(std::move(fabric), rank, config),
        eventFd_(withFd ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1) {}
  ~ProgressCountingTransport() override {
    if (eventFd_ >= 0) ::close(eventFd_);
  }
  unsigned progress() override {
    uint64_t events = 0;
    if (eventFd_ >= 0) [[maybe_unused]] ssize_t got = ::read(eventFd_, &events, sizeof(events));
    progressed.fetch_add(1);
    return LoopbackTransport::progress() + static_cast<unsigned>(events);
  }
  size_t eventFds(int* fds, size_t room) const override {
    if (eventFd_ < 0 || room == 0) return 0;
    fds[0] = eventFd_;
    return 1;
  }
  // A message for this rank arrived: its event fd turns readable.
  void deliver() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t put = ::write(eventFd_, &one, sizeof(one));
  }
  std::atomic<uint64_t> progressed{0};

 private:
  int eventFd_;
};

// Rank 0 waits in the channel, driving its transport; rank 1 comes to the
// collective only once rank 0's transport has moved after `nudge` (bounded:
// it comes anyway after 5 s, and the test then fails on the count).
void expectTheWaitDrivesItsTransport(std::chrono::microseconds spin, bool withFd) {
  auto channels = openChannels(2, options(64 * 1024, spin));
  auto fabric = std::make_shared<LoopbackFabric>(2);
  Config config;
  ProgressCountingTransport transport(fabric, 0, config, withFd);
  bool movedInTime = false;
  const auto errors = onEachRank(2, [&](int r) {
    const OpContext op = opNumbered(1, 4, 60s);
    announce(*channels[r], op);
    if (r == 0) {
      publishTurn(*channels[0], op);
      channels[0]->awaitPeers(FlagKind::Input, HostChannel::Turn{1, 1}, op,
                              channels[0]->callerSpin(), &transport);
      return;
    }
    if (spin == 0us) {
      while (!channels[0]->asleep(0)) std::this_thread::yield();
    }
    const uint64_t before = transport.progressed.load();
    if (withFd) transport.deliver();
    const auto giveUp = std::chrono::steady_clock::now() + 5s;
    while (transport.progressed.load() == before && std::chrono::steady_clock::now() < giveUp) {
      std::this_thread::yield();
    }
    movedInTime = transport.progressed.load() > before;
    publishTurn(*channels[1], op);
    awaitTurn(*channels[1], op);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(movedInTime) << "rank 0 waited without progressing its transport";
}

TEST(HostChannel, ASpinningWaitProgressesTheTransportItDrives) {
  expectTheWaitDrivesItsTransport(2s, /*withFd=*/true);
}

TEST(HostChannel, ASleepingWaitWakesForTheTransportItDrives) {
  expectTheWaitDrivesItsTransport(0us, /*withFd=*/true);
}

TEST(HostChannel, ASleepBesideATransportWithoutAnFdLooksAtItInSlices) {
  expectTheWaitDrivesItsTransport(0us, /*withFd=*/false);
}

TEST(HostChannel, EveryRankAgreesWhenOneCannotTakePart) {
  std::vector<HostChannel::Options> perRank(3, options());
  perRank[2].bufferBytes = 0;  // RINGREDUCE_SHM_BYTES=0 on rank 2 only
  std::vector<std::string> whys;
  auto channels = openChannels(3, perRank, &whys);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(channels[r], nullptr) << "rank " << r;
    EXPECT_EQ(whys[r], "rank 2: RINGREDUCE_SHM_BYTES=0") << "rank " << r;
  }
  perRank.assign(3, options());
  perRank[0].bufferBytes = 0;
  channels = openChannels(3, perRank, &whys);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(channels[r], nullptr);
    EXPECT_EQ(whys[r], "rank 0: RINGREDUCE_SHM_BYTES=0 on rank 0") << "rank " << r;
  }
}

TEST(HostChannel, RanksThatDisagreeOnASettingThatDecidesThePathAreRefusedNamingIt) {
  // Two paths under one fingerprint would wait for each other until the
  // timeout: every rank refuses at once, naming the setting and the ranks.
  InMemoryStore store;
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      HostChannel::Options o = options();
      o.agreedSettings = std::string("RINGREDUCE_ALGORITHM=") + (r == 2 ? "ring" : "auto") +
                         "\nRINGREDUCE_WIRE_DTYPE=none\n";
      try {
        std::string why;
        HostChannel::open(store, "settings/", r, 3, o, 10s, &why);
      } catch (const InvalidArgument& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("RINGREDUCE_ALGORITHM differs between ranks: rank 0 has auto, "
                             "rank 2 has ring"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

TEST(HostChannel, NothingIsLeftInDevShm) {
  auto channels = openChannels(2, options());
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_EQ(entry.path().filename().string().find("ringreduce-" + std::to_string(getpid())),
              std::string::npos)
        << entry.path();
  }
}

// A store folder of its own, for a test whose ranks are processes.
struct StoreFolder {
  std::string path;
  explicit StoreFolder(const std::string& name)
      : path(::testing::TempDir() + name + "_" + std::to_string(getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~StoreFolder() { std::filesystem::remove_all(path); }
};

// Forks a child that opens rank `rank` of `size` over `folder`'s store (no
// spin: its waits sleep at once) and runs `body` on its channel; the child
// never returns (status 3: no channel; 4: `body` returned).
pid_t forkChannelRank(const StoreFolder& folder, const std::string& prefix, int rank, int size,
                      const std::function<void(HostChannel&)>& body) {
  const pid_t child = fork();
  if (child != 0) return child;
  FileStore store(folder.path);
  std::string why;
  auto channel = HostChannel::open(store, prefix, rank, size, options(64 * 1024, 0us), 60s, &why);
  if (!channel) _exit(3);
  body(*channel);
  _exit(4);
}

// Entries of /dev/shm that a ringreduce process `pid` would have named.
std::vector<std::string> devShmEntriesOf(pid_t pid) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.find("ringreduce-" + std::to_string(pid)) != std::string::npos) found.push_back(name);
  }
  return found;
}

TEST(HostChannel, NothingReachesDevShmEvenWhenRankZeroIsKilledInTheSetUp) {
  // Rank 0, a child process, creates the segment and waits in the set-up
  // for rank 1, which never comes; it is killed there (torchrun's SIGKILL
  // after its SIGTERM). Its memory never had a name in /dev/shm, so none is
  // left behind.
  const StoreFolder folder("host_channel_killed_in_setup");
  // Its open() does not return: rank 1 never comes within the minute.
  const pid_t child = forkChannelRank(folder, "killed/", 0, 2, [](HostChannel&) {});
  ASSERT_GE(child, 0);
  FileStore store(folder.path);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!store.check("killed/name") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(store.check("killed/name")) << "rank 0 never created its segment";
  // Created: rank 0 holds it as an anonymous file ...
  bool held = false;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(child) + "/fd")) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(entry.path(), error);
    if (!error && target.string().find("memfd:ringreduce-" + std::to_string(child)) !=
                          std::string::npos) {
      held = true;
    }
  }
  EXPECT_TRUE(held) << "no memfd of rank 0's segment among its fds";
  // ... with no name in /dev/shm, before and after the kill.
  EXPECT_EQ(devShmEntriesOf(child), std::vector<std::string>());
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ(devShmEntriesOf(child), std::vector<std::string>());
}

// Minor page faults this thread has taken so far.
long minorFaultsOfThisThread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Writes a byte into every page of every rank's buffers through `segment`.
void touchEveryBufferPage(const HostSegment& segment) {
  for (int r = 0; r < segment.ranks(); ++r) {
    for (int parity = 0; parity < 2; ++parity) {
      volatile char* buffer = segment.buffer(r, parity);
      for (size_t at = 0; at < segment.bufferBytes(); at += 4096) buffer[at] = 1;
    }
  }
}

// The turns move round the buffers, so a collective would otherwise be the
// first to touch a page of them for thousands of calls, each touch a fault
// (on a VM about ten microseconds, several times a small collective).
TEST(HostChannel, EveryBufferPageIsMappedBeforeTheFirstCollective) {
  HostSegment created = HostSegment::create(3, 256 * 1024);
  HostSegment opened = HostSegment::open(created.name(), created.path(), 3, 256 * 1024);
  const long before = minorFaultsOfThisThread();
  touchEveryBufferPage(created);
  touchEveryBufferPage(opened);
  EXPECT_EQ(minorFaultsOfThisThread() - before, 0);
}

// Ranks of two builds that lay the lines out differently (the magic is
// bumped with every change of layout): the opening rank refuses the segment
// instead of reading its peers' words wrong.
TEST(HostChannel, ASegmentOfAnotherLayoutIsRefusedAtOpen) {
  HostSegment created = HostSegment::create(2, 64 * 1024);
  const int fd = ::open(created.path().c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const uint64_t otherLayout = HostSegment::kMagic - 1;  // an earlier build's
  ASSERT_EQ(pwrite(fd, &otherLayout, sizeof otherLayout, 0), 8);
  ::close(fd);
  std::string error;
  try {
    HostSegment::open(created.name(), created.path(), 2, 64 * 1024);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find(created.name() + " is not this group's segment (its header differs)"),
            std::string::npos)
      << error;
}

TEST(HostChannel, ABufferSizeBeyondTheBoundIsRefusedNotOverflowed) {
  EXPECT_THROW(HostSegment::bytesFor(4, HostSegment::kMaxBufferBytes + 1), Error);
  EXPECT_THROW(HostSegment::bytesFor(4, ~size_t{0} / 2), Error);
  EXPECT_GT(HostSegment::bytesFor(4, HostSegment::kMaxBufferBytes),
            8 * HostSegment::kMaxBufferBytes);
}

TEST(HostChannel, ADeadPeerIsReportedAtOnce) {
  // Rank 1 is a child process that takes part in the set-up, then dies
  // (SIGKILL) while rank 0 sleeps waiting for its flag.
  const StoreFolder folder("host_channel_death");
  const pid_t child = forkChannelRank(folder, "death/", 1, 2, [](HostChannel& channel) {
    while (!channel.asleep(0)) std::this_thread::yield();
    kill(getpid(), SIGKILL);
  });
  ASSERT_GE(child, 0);
  FileStore store(folder.path);
  std::string why;
  auto channel = HostChannel::open(store, "death/", 0, 2, options(64 * 1024, 0us), 10s, &why);
  ASSERT_NE(channel, nullptr) << why;
  std::string error;
  try {
    const OpContext op = opNumbered(1, 1, 60s);
    announce(*channel, op);
    publishTurn(*channel, op);
    awaitTurn(*channel, op);
  } catch (const std::exception& e) {
    error = e.what();
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_NE(error.find("allreduce #1 on rank 0 failed: rank 1 is gone (its process exited)"),
            std::string::npos)
      << error;
}

TEST(HostChannel, APeerThatExitsAfterItsFlagCameDoesNotFailTheTurn) {
  // Rank 1, a child process, sets its flag for #1 and is killed at once
  // (state still Active: no goodbye) while rank 0 sleeps waiting for rank 2.
  // Rank 1 gave this turn all it needs of it: rank 0 must complete #1 when
  // rank 2 comes, not fail it as a death. The next turn, which rank 1
  // cannot join, fails naming it.
  const StoreFolder folder("host_channel_exit_after_flag");
  const pid_t child = forkChannelRank(folder, "exit/", 1, 3, [](HostChannel& channel) {
    const OpContext op = opNumbered(1, 1, 60s);
    announce(channel, op);
    publishTurn(channel, op);
    while (!channel.asleep(0)) std::this_thread::yield();
    kill(getpid(), SIGKILL);
  });
  ASSERT_GE(child, 0);
  std::vector<std::unique_ptr<HostChannel>> channels(3);
  std::vector<std::string> errors(3);
  std::thread late([&] {
    FileStore store(folder.path);
    std::string why;
    channels[2] = HostChannel::open(store, "exit/", 2, 3, options(64 * 1024, 0us), 10s, &why);
    if (!channels[2]) {
      errors[2] = "no channel: " + why;
      return;
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
      errors[2] = "rank 1 ended with status " + std::to_string(status);
    }
    // Time for rank 0 to react to rank 1's exit, were it to (the bug this
    // guards against fails #1 then).
    std::this_thread::sleep_for(200ms);
    const OpContext op = opNumbered(1, 1, 60s);
    announce(*channels[2], op);
    publishTurn(*channels[2], op);
  });
  {
    FileStore store(folder.path);
    std::string why;
    channels[0] = HostChannel::open(store, "exit/", 0, 3, options(64 * 1024, 0us), 10s, &why);
  }
  ASSERT_NE(channels[0], nullptr);
  try {
    const OpContext op = opNumbered(1, 1, 60s);
    announce(*channels[0], op);
    publishTurn(*channels[0], op);
    awaitTurn(*channels[0], op);
  } catch (const std::exception& e) {
    errors[0] = e.what();
  }
  late.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[2], "");
  std::string next;
  try {
    const OpContext op = opNumbered(2, 1, 60s);
    announce(*channels[0], op);
    publishTurn(*channels[0], op);
    awaitTurn(*channels[0], op);
  } catch (const std::exception& e) {
    next = e.what();
  }
  EXPECT_NE(next.find("allreduce #2 on rank 0 failed: rank 1 is gone (its process exited)"),
            std::string::npos)
      << next;
}

TEST(HostChannel, AFlagsWordIsNeverPairedWithAnotherTurnsValue) {
  // Consecutive collectives of different fingerprints, back to back, both
  // ranks spinning: a reader that took a peer's flag at turn k must read
  // turn k's word even while the peer writes turn k + 1's (a false
  // "different collective" otherwise). A race, so many turns.
  auto channels = openChannels(2, options(64 * 1024, 100000us));
  constexpr uint64_t kTurns = 50000;
  const auto errors = onEachRank(2, [&](int r) {
    for (uint64_t k = 1; k <= kTurns; ++k) {
      const OpContext op = opNumbered(k, static_cast<uint32_t>(100 + (k & 3)), 60s);
      channels[r]->announce(op.seq, op.fingerprintWord, &op.fingerprintWord, 4, op.started());
      publishTurn(*channels[r], op);
      awaitTurn(*channels[r], op);
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace
}  // namespace ringreduce
