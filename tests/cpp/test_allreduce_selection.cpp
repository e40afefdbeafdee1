// Choosing the allreduce algorithm: link costs as users write them, the
// RINGREDUCE_ALGORITHM setting, and the cost model's choices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/plan/allreduce_cost.h"
#include "core/config/config.h"
#include "core/base/errors.h"
#include "core/plan/link_cost.h"
#include "core/plan/topology.h"

using namespace ringreduce;

TEST(LinkCost, ParsesBandwidthLatencyAndOverheadInAnyUnit) {
  const LinkCost nic = parseLinkCost("100Gbit/s,5us", LinkCost{}, "test");
  EXPECT_DOUBLE_EQ(nic.beta, 8.0 / 100e9);
  EXPECT_DOUBLE_EQ(nic.alpha, 5e-6);
  const LinkCost shm = parseLinkCost("150GB/s,1us,0.5us", LinkCost{}, "test");
  EXPECT_DOUBLE_EQ(shm.beta, 1.0 / 150e9);
  EXPECT_DOUBLE_EQ(shm.alpha, 1e-6);
  EXPECT_DOUBLE_EQ(shm.overhead, 0.5e-6);
  const LinkCost binary = parseLinkCost("0.5ms,1GiB/s", LinkCost{0, 0, 3e-6}, "test");
  EXPECT_DOUBLE_EQ(binary.beta, 1.0 / 1073741824.0);
  EXPECT_DOUBLE_EQ(binary.alpha, 0.5e-3);
  EXPECT_DOUBLE_EQ(binary.overhead, 3e-6);  // kept from the fallback
  for (const char* bad : {"fast", "10GB/h", "1us,2us,3us", "0GB/s", "-1us"}) {
    EXPECT_THROW(parseLinkCost(bad, LinkCost{}, "test"), InvalidArgument) << bad;
  }
}

TEST(AllreduceChoice, EveryAlgorithmPrintsAsTheNameItParsesFrom) {
  for (const NamedValue<AllreduceAlgorithm>& entry : NameTable<AllreduceAlgorithm>::entries) {
    EXPECT_STREQ(nameOf(entry.value), entry.name);
    EXPECT_EQ(parseName<AllreduceAlgorithm>(entry.name), entry.value) << entry.name;
  }
}

TEST(AllreduceChoice, EnvironmentForcesAnAlgorithmOrNamesTheChoices) {
  setenv("RINGREDUCE_ALGORITHM", "two_level", 1);
  setenv("RINGREDUCE_LINK_INTER", "1Gbit/s,500us", 1);
  const Config config = Config::fromEnvironment();
  EXPECT_EQ(config.allreduceAlgorithm, AllreduceAlgorithm::TwoLevel);
  EXPECT_DOUBLE_EQ(config.interNode.alpha, 500e-6);
  setenv("RINGREDUCE_ALGORITHM", "tree", 1);
  try {
    Config::fromEnvironment();
    ADD_FAILURE() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("auto, ring, halving_doubling, two_level, direct"),
              std::string::npos)
        << e.what();
  }
  unsetenv("RINGREDUCE_ALGORITHM");
  unsetenv("RINGREDUCE_LINK_INTER");
}

TEST(AllreduceChoice, CheapestIsTheMinimumAndLatencyBoundSizesLeaveTheRing) {
  const LinkCost inter = parseLinkCost("100Gbit/s,5us", defaultInterNode(), "inter");
  const LinkCost intra = parseLinkCost("150GB/s,1us", defaultIntraNode(), "intra");
  for (const Topology& t : {Topology::blocks(64, 8), Topology::blocks(8, 1),
                            Topology::singleNode(6), Topology::fromLabels({0, 0, 0, 1, 1})}) {
    const AllreduceCostModel model(t, intra, inter);
    for (size_t bytes = 4096; bytes <= (256u << 20); bytes *= 4) {
      const AllreduceAlgorithm chosen = model.cheapest(bytes);
      ASSERT_NE(chosen, AllreduceAlgorithm::Auto);
      for (AllreduceAlgorithm other :
           {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
            AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
        // The minimum, or within the ring/direct tie (BandwidthBoundTies... below).
        EXPECT_LE(model.predict(chosen, bytes),
                  model.predict(other, bytes) * (1 + kBandwidthTie))
            << bytes;
      }
    }
  }
  const AllreduceCostModel big(Topology::blocks(64, 8), intra, inter);
  EXPECT_NE(big.cheapest(4096), AllreduceAlgorithm::Ring);  // 1022 network latencies
  EXPECT_LT(big.predict(AllreduceAlgorithm::TwoLevel, 4096),
            big.predict(AllreduceAlgorithm::Ring, 4096) / 10);
  // Uneven nodes: two-level (P = the smallest node's ranks parts); one
  // rank per node or one node: no two-level.
  EXPECT_TRUE(std::isfinite(AllreduceCostModel(Topology::fromLabels({0, 0, 1}), intra, inter)
                                .predict(AllreduceAlgorithm::TwoLevel, 4096)));
  EXPECT_TRUE(std::isinf(AllreduceCostModel(Topology::blocks(4, 1), intra, inter)
                             .predict(AllreduceAlgorithm::TwoLevel, 4096)));
  EXPECT_FALSE(AllreduceCostModel(Topology::singleNode(4), intra, inter).twoLevelApplies());
}

// Bandwidth-bound, the ring and direct move the same bytes through each
// link and are priced within a hair of each other; the tie goes by what was
// measured (core/plan/allreduce_cost.h): across nodes the ring (one flow per
// rank, where direct opens p-1 at once; priced by whole chunks, the ring
// lost every size up to 256 MiB to direct on one rank per node), on one
// node of more than two ranks direct, on two ranks the ring.
TEST(AllreduceChoice, BandwidthBoundTiesGoToTheRingAcrossNodesAndDirectOnANode) {
  for (const LinkCost& inter : {defaultInterNode(),
                                parseLinkCost("1Gbit/s,500us", defaultInterNode(), "inter"),
                                parseLinkCost("100Gbit/s,5us", defaultInterNode(), "inter")}) {
    for (int nodes : {4, 8, 16, 64}) {
      const AllreduceCostModel model(Topology::blocks(nodes, 1), defaultIntraNode(), inter);
      for (size_t bytes = size_t{64} << 20; bytes <= (size_t{256} << 20); bytes *= 4) {
        EXPECT_EQ(model.cheapest(bytes), AllreduceAlgorithm::Ring)
            << bytes << " B on " << nodes << " nodes, inter " << describeLinkCost(inter);
      }
    }
  }
  const AllreduceCostModel four(Topology::singleNode(4), defaultIntraNode(), defaultInterNode());
  const AllreduceCostModel two(Topology::singleNode(2), defaultIntraNode(), defaultInterNode());
  for (size_t bytes = size_t{4} << 20; bytes <= (size_t{256} << 20); bytes *= 4) {
    EXPECT_NEAR(four.predict(AllreduceAlgorithm::Direct, bytes),
                four.predict(AllreduceAlgorithm::Ring, bytes),
                kBandwidthTie * four.predict(AllreduceAlgorithm::Ring, bytes));
    EXPECT_EQ(four.cheapest(bytes), AllreduceAlgorithm::Direct) << bytes;
    EXPECT_EQ(two.cheapest(bytes), AllreduceAlgorithm::Ring) << bytes;
  }
}

TEST(Topology, NodesNumberedByFirstRankAndRegularity) {
  const Topology t = Topology::fromHostHashes({77, 5, 77, 5, 9});
  EXPECT_EQ(t.nodeOf, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(t.nodes(), 3);
  EXPECT_FALSE(t.regular());
  EXPECT_EQ(t.maxRanksPerNode(), 2);
  EXPECT_TRUE(Topology::blocks(3, 4).regular());
  EXPECT_EQ(Topology::blocks(3, 4).ranksByNode()[2], (std::vector<int>{8, 9, 10, 11}));
}

// The model's predictions against the alpha-beta costs of the textbook
// (Thakur, Rabenseifner and Gropp, 2005), written here from the formulas and
// not from the model's code: on one link class with no per-message overhead,
// p ranks, n bytes, m = 2(p-1)/p n beta the bytes each rank moves,
//   ring              2(p-1) alpha + m, or max(2(p-1) alpha, m) pipelined
//   halving/doubling  2 log2(p) alpha + m   (p a power of two)
//   direct            2 alpha + m           (every chunk at once)
// Where one of them is cheaper than the others by far more than any
// tie-break, the choice must be it.
TEST(AllreduceChoice, PredictionsMeetTheTextbookCostsAndTheChoiceFollowsThem) {
  const LinkCost link = parseLinkCost("10GB/s,5us,0us", defaultIntraNode(), "intra");
  ASSERT_DOUBLE_EQ(link.overhead, 0.0);
  int clearChoices = 0;
  for (int p : {2, 4, 8}) {
    const AllreduceCostModel model(Topology::singleNode(p), link, link);
    const double log2p = std::log2(static_cast<double>(p));
    for (size_t bytes : {size_t{8}, size_t{4096}, size_t{64} << 20, size_t{256} << 20}) {
      const double moved = 2.0 * (p - 1) / p * static_cast<double>(bytes) * link.beta;
      const double chain = 2.0 * (p - 1) * link.alpha;
      const double ring = model.predict(AllreduceAlgorithm::Ring, bytes);
      EXPECT_GE(ring, std::max(chain, moved) * 0.999) << p << " ranks, " << bytes << " B";
      EXPECT_LE(ring, (chain + moved) * 1.001) << p << " ranks, " << bytes << " B";
      const std::pair<AllreduceAlgorithm, double> textbook[] = {
          {AllreduceAlgorithm::Ring, chain + moved},
          {AllreduceAlgorithm::HalvingDoubling, 2.0 * log2p * link.alpha + moved},
          {AllreduceAlgorithm::Direct, 2.0 * link.alpha + moved},
      };
      for (const auto& [algorithm, cost] : textbook) {
        if (algorithm == AllreduceAlgorithm::Ring) continue;
        EXPECT_NEAR(model.predict(algorithm, bytes), cost, cost * 0.001)
            << nameOf(algorithm) << ", " << p << " ranks, " << bytes << " B";
      }
      // The textbook's cheapest, where the next is at least 1.5x its cost.
      const auto* best = &textbook[0];
      for (const auto& entry : textbook) best = entry.second < best->second ? &entry : best;
      bool clear = true;
      for (const auto& entry : textbook) {
        clear &= &entry == best || entry.second >= 1.5 * best->second;
      }
      if (!clear) continue;
      ++clearChoices;
      EXPECT_EQ(model.cheapest(bytes), best->first) << p << " ranks, " << bytes << " B";
    }
  }
  EXPECT_GE(clearChoices, 4);  // the small sizes on 4 and 8 ranks at least
}
