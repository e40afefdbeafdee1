// The host collectives on every transport (loopback, UCX): results against a local reference
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/barrier.h"
#include "algorithms/chain_broadcast.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/pairwise_exchange.h"
#include "algorithms/record_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/partition.h"
#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::kindName;
using ringreduce::testing::runComms;
using ringreduce::testing::runRanks;
using ringreduce::testing::smallSegments;
using ringreduce::testing::StayTogether;
using ringreduce::testing::TransportKind;

namespace {

// Small integers: sums are exact in every type, so the result is exact.
std::vector<int64_t> inputOf(int rank, size_t count, uint32_t seed) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(rank));
  std::uniform_int_distribution<int> dist(-50, 50);
  std::vector<int64_t> v(count);
  for (auto& x : v) x = dist(gen);
  return v;
}

class AllreduceSizes
    : public ::testing::TestWithParam<std::tuple<int, size_t, TransportKind>> {};

// Every algorithm test runs on UCX and on the in-process loopback.
class OnEachTransport : public ::testing::TestWithParam<TransportKind> {};

std::string transportName(const ::testing::TestParamInfo<TransportKind>& info) {
  return kindName(info.param);
}

}  // namespace

TEST_P(AllreduceSizes, Int64SumMatchesLocalReference) {
  const auto [n, count, kind] = GetParam();
  std::vector<int64_t> expected(count, 0);
  for (int r = 0; r < n; ++r) {
    const auto in = inputOf(r, count, 1);
    for (size_t i = 0; i < count; ++i) expected[i] += in[i];
  }
  runComms(n, kind, [&, count = count](const Comm& c, int rank) {
    auto data = inputOf(rank, count, 1);
    OpContext op("allreduce", 1, std::chrono::seconds(20));
    ringAllreduce(c, op, {data.data(), count, DataType::Int64, ReduceOp::Sum});
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], expected[i]) << "index " << i;
    // A second call on the same group and workspace must work too.
    auto again = inputOf(rank, count, 1);
    OpContext op2("allreduce", 2, std::chrono::seconds(20));
    ringAllreduce(c, op2, {again.data(), count, DataType::Int64, ReduceOp::Sum});
    ASSERT_EQ(again, data);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndCounts, AllreduceSizes,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values<size_t>(0, 1, 3, 1000, 20011),
                                            ::testing::Values(TransportKind::Ucx,
                                                              TransportKind::Loopback)));

TEST_P(OnEachTransport, RingAllreduceFloatAverageMaxAndHalfPrecision) {
  const int n = 3;
  const size_t count = 5000;
  runComms(n, GetParam(), [&](const Comm& c, int rank) {
    std::vector<float> avg(count), mx(count);
    std::vector<uint16_t> half(count);
    for (size_t i = 0; i < count; ++i) {
      avg[i] = static_cast<float>(rank * 3 + static_cast<int>(i % 17));
      mx[i] = static_cast<float>((rank * 31 + static_cast<int>(i)) % 101);
      half[i] = floatToHalf(static_cast<float>(rank + 1) * 0.5f);
    }
    ringAllreduce(c, OpContext("allreduce", 1, std::chrono::seconds(20)),
                  {avg.data(), count, DataType::Float32, ReduceOp::Avg});
    ringAllreduce(c, OpContext("allreduce", 2, std::chrono::seconds(20)),
                  {mx.data(), count, DataType::Float32, ReduceOp::Max});
    ringAllreduce(c, OpContext("allreduce", 3, std::chrono::seconds(20)),
                  {half.data(), count, DataType::Float16, ReduceOp::Sum});
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(avg[i], static_cast<float>(3 + static_cast<int>(i % 17)));  // (0+3+6)/3 + i%17
      float expectedMax = 0;
      for (int r = 0; r < n; ++r)
        expectedMax = std::max(expectedMax, static_cast<float>((r * 31 + static_cast<int>(i)) % 101));
      ASSERT_EQ(mx[i], expectedMax);
      ASSERT_EQ(halfToFloat(half[i]), 3.0f);  // 0.5 + 1.0 + 1.5
    }
  });
}

// RINGREDUCE_WIRE_DTYPE: float32 SUM/AVG travel as 16 bits. Each rank's
// values are rounded to the wire type first (1 + 2^-9 becomes 1 in bfloat16
// and stays in float16), the small-integer parts sum exactly, every rank
// ends with the same float32 values, and MAX is left alone.
TEST_P(OnEachTransport, RingAllreduceFloat32OverA16BitWire) {
  const int n = 3;
  const size_t count = 3001;
  for (WireDtype wire : {WireDtype::Bf16, WireDtype::Fp16}) {
    Config config = smallSegments();
    config.hostWireDtype = wire;
    const float tiny = 1.0f / 512;  // below bfloat16's precision at 1, within float16's
    runComms(
        n, GetParam(),
        [&](const Comm& c, int rank) {
          std::vector<float> sum(count), avg(count), mx(count);
          for (size_t i = 0; i < count; ++i) {
            sum[i] = static_cast<float>(rank + static_cast<int>(i % 7)) + tiny;
            avg[i] = static_cast<float>(rank * 3 + static_cast<int>(i % 5));
            mx[i] = static_cast<float>(rank) + tiny;
          }
          ringAllreduce(c, OpContext("allreduce", 1, std::chrono::seconds(20)),
                        {sum.data(), count, DataType::Float32, ReduceOp::Sum});
          ringAllreduce(c, OpContext("allreduce", 2, std::chrono::seconds(20)),
                        {avg.data(), count, DataType::Float32, ReduceOp::Avg});
          ringAllreduce(c, OpContext("allreduce", 3, std::chrono::seconds(20)),
                        {mx.data(), count, DataType::Float32, ReduceOp::Max});
          for (size_t i = 0; i < count; ++i) {
            const float exact = static_cast<float>(3 + 3 * static_cast<int>(i % 7));
            // float16 keeps each rank's 2^-9 until the sum's exponent drops it;
            // bfloat16 drops it at once.
            if (wire == WireDtype::Bf16) {
              ASSERT_EQ(sum[i], exact) << i;
            } else {
              ASSERT_NEAR(sum[i], exact + 3 * tiny, 3 * tiny) << i;
            }
            ASSERT_EQ(avg[i], static_cast<float>(3 + static_cast<int>(i % 5)));
            ASSERT_EQ(mx[i], 2.0f + tiny);  // full float32: MAX does not travel as 16 bits
          }
          // Every rank must hold the same bits: the result is allgathered.
          std::vector<float> all(count * n);
          ringAllgather(c, OpContext("allgather", 4, std::chrono::seconds(20)),
                        {sum.data(), all.data(), count * sizeof(float)});
          for (int r = 1; r < n; ++r) {
            ASSERT_EQ(std::memcmp(all.data(), all.data() + r * count, count * sizeof(float)), 0);
          }
        },
        config);
  }
}

TEST_P(OnEachTransport, RingAllgatherBlocksLandInRankOrderInPlaceOrNot) {
  for (int n : {1, 2, 3, 4}) {
    runComms(n, GetParam(), [n](const Comm& c, int rank) {
      const size_t block = 3001;
      std::vector<uint8_t> input(block);
      for (size_t i = 0; i < block; ++i) input[i] = static_cast<uint8_t>(rank * 13 + i);
      std::vector<uint8_t> output(block * n, 0);
      ringAllgather(c, OpContext("allgather", 1, std::chrono::seconds(20)),
                    {input.data(), output.data(), block});
      std::vector<uint8_t> inPlace(block * n, 0);
      std::memcpy(inPlace.data() + rank * block, input.data(), block);
      ringAllgather(c, OpContext("allgather", 2, std::chrono::seconds(20)),
                    {inPlace.data() + rank * block, inPlace.data(), block});
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < block; ++i) {
          ASSERT_EQ(output[r * block + i], static_cast<uint8_t>(r * 13 + i));
          ASSERT_EQ(inPlace[r * block + i], static_cast<uint8_t>(r * 13 + i));
        }
    });
  }
}

// Segmented along a chain of four (forwarded as they come), one message
// between two; several segments' worth of bytes either way.
TEST_P(OnEachTransport, ChainBroadcastEveryRootReachesEveryRank) {
  for (int n : {2, 4}) {
    runComms(n, GetParam(), [n](const Comm& c, int rank) {
      ASSERT_LT(c.config.segmentBytes, 10007u);
      for (int root = 0; root < n; ++root) {
        std::vector<uint8_t> data(10007, static_cast<uint8_t>(rank == root ? 0 : 0xee));
        if (rank == root)
          for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(root + i * 3);
        chainBroadcast(c, OpContext("broadcast", 10 + root, std::chrono::seconds(20)),
                       {data.data(), data.size(), root});
        for (size_t i = 0; i < data.size(); ++i)
          ASSERT_EQ(data[i], static_cast<uint8_t>(root + i * 3));
      }
    });
  }
}

// The next rank along the chain reads a forwarding rank's tensor (with cma
// on one host, pinning every page): the ranks that forward note theirs, so
// that one of 4 MiB or more that comes back goes onto 2 MiB pages
// (core/base/huge_pages.h); the chain's last rank, read by nobody, does not.
TEST_P(OnEachTransport, ChainBroadcastNotesTheTensorsOfTheRanksThatForward) {
  constexpr int n = 3;
  const size_t bytes = HugePageAdvisor::kMinBytes + 64;
  std::atomic<int> noted[n] = {};
  runComms(n, GetParam(), [&](const Comm& c, int rank) {
    std::vector<uint8_t> data(bytes, static_cast<uint8_t>(rank == 0 ? 7 : 0));
    chainBroadcast(c, OpContext("broadcast", 1, std::chrono::seconds(20)), {data.data(), bytes, 0});
    ASSERT_EQ(data, std::vector<uint8_t>(bytes, 7));
    noted[rank] = static_cast<int>(c.workspace.callerBuffers().buffersSeen());
  });
  EXPECT_EQ(noted[0], 1);  // the root
  EXPECT_EQ(noted[1], 1);  // forwards to rank 2
  EXPECT_EQ(noted[2], 0);  // the chain's end
}

TEST_P(OnEachTransport, DisseminationBarrierNoRankLeavesBeforeTheLastArrives) {
  for (int n : {1, 2, 3, 5}) {
    std::atomic<int> arrived{0};
    runComms(n, GetParam(), [&, n](const Comm& c, int rank) {
      if (rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      arrived.fetch_add(1);
      disseminationBarrier(c, OpContext("barrier", 1, std::chrono::seconds(20)));
      EXPECT_EQ(arrived.load(), n);
    });
  }
}

TEST_P(OnEachTransport, RingReduceScatterEachRankEndsWithItsOwnChunk) {
  for (int n : {1, 2, 3, 4}) {
    const size_t count = 1001;
    std::vector<int64_t> expected(count, 0);
    for (int r = 0; r < n; ++r) {
      const auto in = inputOf(r, count, 5);
      for (size_t i = 0; i < count; ++i) expected[i] += in[i];
    }
    runComms(n, GetParam(), [&, n](const Comm& c, int rank) {
      auto data = inputOf(rank, count, 5);
      ringReduceScatter(c, OpContext("reduce_scatter", 1, std::chrono::seconds(20)),
                        {data.data(), count, DataType::Int64, ReduceOp::Sum});
      const Range mine = chunkOf(count, n, rank);
      for (size_t i = mine.offset; i < mine.offset + mine.count; ++i) ASSERT_EQ(data[i], expected[i]);
    });
  }
}

TEST_P(OnEachTransport, DirectExchangeGatherScatterAndUnevenAllToAll) {
  const int n = 4;
  runComms(n, GetParam(), [n](const Comm& c, int rank) {
    // Gather: rank r contributes r+1 bytes of value r (uneven blocks).
    BlockLayout layout;
    size_t total = 0;
    for (int r = 0; r < n; ++r) {
      layout.offsets.push_back(total);
      layout.bytes.push_back(static_cast<size_t>(r + 1));
      total += static_cast<size_t>(r + 1);
    }
    std::vector<uint8_t> mine(static_cast<size_t>(rank + 1), static_cast<uint8_t>(rank));
    std::vector<uint8_t> gathered(total, 0xff);
    gatherToRoot(c, OpContext("gather", 1, std::chrono::seconds(20)),
                 {mine.data(), mine.size(), gathered.data(), layout, 2});
    if (rank == 2) {
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < layout.bytes[r]; ++i) ASSERT_EQ(gathered[layout.offsets[r] + i], r);
      }
    }
    // Scatter the same layout back from root 1.
    std::vector<uint8_t> source(total);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < layout.bytes[r]; ++i) source[layout.offsets[r] + i] = static_cast<uint8_t>(10 + r);
    std::vector<uint8_t> piece(static_cast<size_t>(rank + 1), 0);
    scatterFromRoot(c, OpContext("scatter", 2, std::chrono::seconds(20)),
                    {source.data(), layout, piece.data(), piece.size(), 1});
    for (uint8_t v : piece) ASSERT_EQ(v, 10 + rank);
    // All-to-all: rank r sends (p + 1) bytes of value 16*r + p to rank p.
    BlockLayout sendLayout, recvLayout;
    size_t sendTotal = 0, recvTotal = 0;
    for (int p = 0; p < n; ++p) {
      sendLayout.offsets.push_back(sendTotal);
      sendLayout.bytes.push_back(static_cast<size_t>(p + 1));
      sendTotal += static_cast<size_t>(p + 1);
      recvLayout.offsets.push_back(recvTotal);
      recvLayout.bytes.push_back(static_cast<size_t>(rank + 1));
      recvTotal += static_cast<size_t>(rank + 1);
    }
    std::vector<uint8_t> send(sendTotal), recv(recvTotal, 0xff);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < sendLayout.bytes[p]; ++i)
        send[sendLayout.offsets[p] + i] = static_cast<uint8_t>(16 * rank + p);
    allToAll(c, OpContext("all_to_all", 3, std::chrono::seconds(20)),
             {send.data(), sendLayout, recv.data(), recvLayout});
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < recvLayout.bytes[p]; ++i)
        ASSERT_EQ(recv[recvLayout.offsets[p] + i], 16 * p + rank);
  });
}

TEST(ProgressBoard, TimeoutNamesTheRankThatNeverJoined) {
  StayTogether together(3);
  runRanks(3, [&together](Transport& t, int rank) {
    auto stay = together.stay();
    if (rank == 2) return;  // alive, but never joins the collective
    Workspace ws;
    const Config config = smallSegments();
    std::vector<int64_t> data(100, rank);
    try {
      ringAllreduce(Comm{t, config, ws}, OpContext("allreduce", 1, std::chrono::milliseconds(800)),
                    {data.data(), data.size(), DataType::Int64, ReduceOp::Sum});
      ADD_FAILURE() << "expected a timeout";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("not seen in allreduce #1: 2 (not seen waiting"), std::string::npos)
          << message;
      EXPECT_EQ(message.find("1 (last"), std::string::npos) << message;  // rank 1 did join
    }
    t.abandonOutstanding(OpContext("allreduce", 1, std::chrono::milliseconds(800)));
  });
}

// The device paths run several record rounds inside one operation (setup,
// then a barrier before and after each kernel): each round must deliver
// every rank's record of that round, never a neighbouring round's.
TEST_P(OnEachTransport, RecordExchangeEveryRoundDeliversEveryRanksRecord) {
  for (int n : {1, 2, 3, 4}) {
    runComms(n, GetParam(), [n](const Comm& c, int rank) {
      OpContext op("exchange", 7, std::chrono::seconds(20));
      for (uint32_t round = 0; round < 5; ++round) {
        const uint64_t mine = 1000u * round + static_cast<uint64_t>(rank);
        std::vector<uint64_t> all(static_cast<size_t>(n), ~0ull);
        exchangeRecords(c, op, round, &mine, all.data(), sizeof(mine));
        for (int q = 0; q < n; ++q) ASSERT_EQ(all[q], 1000u * round + q) << "round " << round;
      }
    });
  }
}

// Which peers entered: a record that came before the exchange timed out
// counts, one from a rank that never called does not (cma waits only for
// the peers that may be copying into this rank's buffer).
TEST_P(OnEachTransport, RecordExchangeSaysWhoseRecordCameWhenItTimesOut) {
  StayTogether together(3);
  runComms(3, GetParam(), [&together](const Comm& c, int rank) {
    auto stay = together.stay();
    if (rank == 2) return;  // never enters
    OpContext op("exchange", 3, std::chrono::seconds(1));
    const uint64_t mine = 10u + static_cast<uint64_t>(rank);
    std::vector<uint64_t> all(3, 0);
    std::vector<bool> arrived;
    EXPECT_THROW(exchangeRecords(c, op, 0, &mine, all.data(), sizeof(mine), &arrived),
                 TimeoutError);
    const int peer = 1 - rank;
    ASSERT_EQ(arrived.size(), 3u);
    EXPECT_TRUE(arrived[static_cast<size_t>(peer)]);
    EXPECT_FALSE(arrived[2]);
    EXPECT_EQ(all[static_cast<size_t>(peer)], 10u + static_cast<uint64_t>(peer));
    c.transport.abandonOutstanding(op);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, OnEachTransport,
                         ::testing::Values(TransportKind::Ucx, TransportKind::Loopback),
                         transportName);
