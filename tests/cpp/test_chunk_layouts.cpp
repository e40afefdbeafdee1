// The pieces the two-level forms and the rank-order halving forms are built
// from: chunk layouts, the halving plan's pairs, the two-level plan's parts
// and teams; and the ring and halving/doubling reduce-scatter and allgather
// on chunks of any sizes (empty ones included), for groups of 1 to 12 ranks
// on the loopback and up to 37 on the virtual-time network (which reports
// a deadlock or a message nobody received).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "algorithms/halving_doubling.h"
#include "algorithms/ring_allgather.h"
#include "algorithms/ring_allreduce.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/halving_plan.h"
#include "core/plan/two_level_plan.h"
#include "rank_threads.h"
#include "transport/simulated/simulated_network.h"

using namespace ringreduce;
using ringreduce::testing::runComms;
using ringreduce::testing::TransportKind;

namespace {

TEST(ChunkLayout, EvenIsChunkOfAndSizesStayInOrder) {
  const ChunkLayout even = ChunkLayout::even(11, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(even.chunk(i).offset, chunkOf(11, 4, i).offset);
    EXPECT_EQ(even.chunk(i).count, chunkOf(11, 4, i).count);
  }
  const ChunkLayout sized = ChunkLayout::ofSizes({3, 0, 5, 1});
  EXPECT_EQ(sized.parts(), 4);
  EXPECT_EQ(sized.total(), 9u);
  EXPECT_EQ(sized.largest(), 5u);
  EXPECT_EQ(sized.chunk(2).offset, 3u);
  EXPECT_EQ(sized.span(1, 3).offset, 3u);
  EXPECT_EQ(sized.span(1, 3).count, 6u);
}

// Virtual ranks stand for runs of ranks: the folded pairs first, in order.
TEST(HalvingPlan, VirtualRanksCoverTheRanksInOrder) {
  for (int p = 1; p <= 13; ++p) {
    const HalvingPlan plan(p, HalvingPlan::Order::FarFirst);
    EXPECT_EQ(plan.lowestRankOf(0), 0);
    EXPECT_EQ(plan.lowestRankOf(plan.pow2()), p);
    for (int v = 0; v < plan.pow2(); ++v) {
      const int low = plan.lowestRankOf(v);
      const int high = plan.lowestRankOf(v + 1);
      EXPECT_EQ(plan.rankOf(v), high - 1) << p << " " << v;  // the rank that stays in
      EXPECT_TRUE(high - low == 1 || high - low == 2);
      if (high - low == 2) {
        EXPECT_EQ(plan.foldedInto(high - 1), low);
      }
    }
  }
}

TEST(TwoLevelPlan, PartsAsTheSmallestNodeTeamsOnTheLarger) {
  // Nodes {0,1,2}, {3}, {4,5}: one part; every node's ranks are one team.
  const TwoLevelPlan one(Topology::fromLabels({0, 0, 0, 1, 2, 2}));
  EXPECT_EQ(one.parts(), 1);
  EXPECT_EQ(one.crossing(0), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(one.teamOthers(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(one.holderOf(5), 4);
  EXPECT_FALSE(one.holds(2));
  EXPECT_TRUE(one.isRankOrder());
  // Nodes {0,2,4,6}, {1,5}, {3}: ranks dealt unevenly.
  const TwoLevelPlan scattered(Topology::fromLabels({0, 1, 0, 2, 0, 1, 0}));
  EXPECT_EQ(scattered.parts(), 1);
  EXPECT_EQ(scattered.rankAt(0), 0);
  EXPECT_EQ(scattered.rankAt(4), 1);  // node 0's four, then node 1's two, then node 2's
  EXPECT_EQ(scattered.positionOf(3), 6);
  // 4 + 4 + 2 + 2: two parts, teams of two on the nodes of 4.
  const TwoLevelPlan two(Topology::fromLabels({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(two.parts(), 2);
  EXPECT_EQ(two.crossing(1), (std::vector<int>{1, 5, 9, 11}));
  EXPECT_EQ(two.teamOthers(1), (std::vector<int>{3}));
  EXPECT_EQ(two.partOf(2), 0);
  EXPECT_FALSE(two.nodeHalves(0));  // 4 ranks, but 2 parts: the ring
  EXPECT_TRUE(two.nodeHalves(2));
  const std::vector<size_t> ones(12, 1);
  const ChunkLayout inNode = two.inNode(0, ones);
  EXPECT_EQ(inNode.chunk(0).count, 6u);  // part 0: ranks 0, 2, 4, 6, 8, 10
  EXPECT_EQ(inNode.chunk(2).count, 0u);
  const ChunkLayout across = two.acrossNodes(0, ones);
  EXPECT_EQ(across.chunk(0).count, 2u);
  EXPECT_EQ(across.chunk(3).count, 1u);
  // Equal nodes: one part per local rank, and round robin is rank order.
  EXPECT_TRUE(TwoLevelPlan(Topology::fromLabels({0, 1, 2, 0, 1, 2})).isRankOrder());
  EXPECT_FALSE(TwoLevelPlan::applies(Topology::singleNode(4)));
  EXPECT_FALSE(TwoLevelPlan::applies(Topology::blocks(4, 1)));
  EXPECT_TRUE(TwoLevelPlan::applies(Topology::fromLabels({0, 0, 1})));
}

// Chunk sizes for p ranks of a buffer: random, with empty ones.
std::vector<size_t> sizesFor(int p, int salt) {
  std::mt19937 gen(static_cast<uint32_t>(p * 101 + salt));
  std::vector<size_t> sizes;
  for (int r = 0; r < p; ++r) sizes.push_back(gen() % 4 == 0 ? 0 : gen() % 300);
  if (salt % 2 == 1) sizes.assign(static_cast<size_t>(p), 1);
  return sizes;
}

using ReduceScatterForm = std::function<void(const Comm&, const OpContext&, const ReductionArgs&,
                                             int, const ChunkLayout&)>;
using AllgatherForm =
    std::function<void(const Comm&, const OpContext&, char*, const ChunkLayout&)>;

const ReduceScatterForm kRingReduceScatter = [](const Comm& c, const OpContext& op,
                                                const ReductionArgs& a, int divisor,
                                                const ChunkLayout& chunks) {
  ringReduceScatter(c, op, a, divisor, chunks);
};
const ReduceScatterForm kHalvingReduceScatter = [](const Comm& c, const OpContext& op,
                                                   const ReductionArgs& a, int divisor,
                                                   const ChunkLayout& chunks) {
  halvingReduceScatter(c, op, a, divisor, chunks);
};
const AllgatherForm kRingAllgather = [](const Comm& c, const OpContext& op, char* data,
                                        const ChunkLayout& chunks) {
  ringAllgatherInPlace(c, op, data, chunks);
};
const AllgatherForm kDoublingAllgather = [](const Comm& c, const OpContext& op, char* data,
                                            const ChunkLayout& chunks) {
  doublingAllgather(c, op, {data, chunks.total(), DataType::UInt8, ReduceOp::Sum}, chunks);
};

// One rank's part of the check: int32 SUM of rank-dependent values, each
// rank's chunk against the sum; then every rank's chunk of bytes gathered.
void checkRank(const Comm& comm, int rank, const std::vector<size_t>& sizes,
               const ReduceScatterForm& reduceScatter, const AllgatherForm& allgather,
               uint64_t seq) {
  const int p = comm.size();
  const ChunkLayout chunks = ChunkLayout::ofSizes(sizes);
  const size_t count = chunks.total();
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(rank * 1000 + i);
  reduceScatter(comm, OpContext("reduce_scatter", seq, std::chrono::seconds(60)),
                {data.data(), count, DataType::Int32, ReduceOp::Sum}, 0, chunks);
  const Range mine = chunks.chunk(rank);
  for (size_t i = mine.offset; i < mine.offset + mine.count; ++i) {
    ASSERT_EQ(data[i], static_cast<int32_t>(1000 * p * (p - 1) / 2 + p * i)) << "element " << i;
  }
  std::vector<size_t> bytes;
  for (size_t s : sizes) bytes.push_back(s * 3);
  const ChunkLayout blocks = ChunkLayout::ofSizes(bytes);
  std::vector<char> gathered(blocks.total(), 'x');
  const Range own = blocks.chunk(rank);
  for (size_t i = own.offset; i < own.offset + own.count; ++i) {
    gathered[i] = static_cast<char>('a' + rank);
  }
  allgather(comm, OpContext("allgather", seq + 1, std::chrono::seconds(60)), gathered.data(),
            blocks);
  for (int r = 0; r < p; ++r) {
    const Range theirs = blocks.chunk(r);
    for (size_t i = theirs.offset; i < theirs.offset + theirs.count; ++i) {
      ASSERT_EQ(gathered[i], static_cast<char>('a' + r)) << "rank " << r << "'s chunk";
    }
  }
}

class LayoutForms : public ::testing::TestWithParam<int> {};

TEST_P(LayoutForms, RingAndHalvingOnChunksOfAnySize) {
  const int p = GetParam();
  for (int salt = 0; salt < 4; ++salt) {
    const std::vector<size_t> sizes = sizesFor(p, salt);
    runComms(p, TransportKind::Loopback, [&](const Comm& comm, int rank) {
      checkRank(comm, rank, sizes, kRingReduceScatter, kRingAllgather, 1);
      checkRank(comm, rank, sizes, kHalvingReduceScatter, kDoublingAllgather, 3);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, LayoutForms, ::testing::Values(1, 2, 3, 5, 6, 7, 8, 12),
                         [](const auto& info) { return std::to_string(info.param); });

// The same schedules on the virtual-time network: a pair that waits for a
// message never sent, or a message nobody takes, is an error there.
TEST(LayoutFormsSimulated, NoDeadlockNorLostMessageUpTo37Ranks) {
  for (int p : {3, 5, 6, 7, 12, 37}) {
    const Topology topology = Topology::singleNode(p);
    SimulatedNetwork network(topology, {1e-6, 1e-10, 0}, {5e-6, 1e-9, 0}, /*payload=*/true);
    Config config = ringreduce::testing::smallSegments();
    config.spinMicroseconds = 0;
    const std::vector<size_t> sizes = sizesFor(p, 2);
    network.run(config, [&](Transport& transport, int rank) {
      Workspace workspace;
      const Comm comm{transport, config, workspace};
      checkRank(comm, rank, sizes, kRingReduceScatter, kRingAllgather, 1);
      checkRank(comm, rank, sizes, kHalvingReduceScatter, kDoublingAllgather, 3);
    });
  }
}

}  // namespace
