// The virtual-time transport: the real algorithms give exact results on it
// with payload (up to 64 ranks), its clock follows the LogGP model, a
// schedule that cannot finish or loses a message is reported, and the cost
// model agrees with the schedules it prices.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/two_level_allreduce.h"
#include "core/plan/allreduce_cost.h"
#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "scoped_env.h"
#include "simulator/allreduce_simulation.h"
#include "transport/simulated/simulated_network.h"
#include "transport/tag.h"

using namespace ringreduce;

namespace {

const LinkCost kIntra{1e-6, 1.0 / 100e9, 0.2e-6};
const LinkCost kInter{5e-6, 8.0 / 100e9, 1e-6};

Config simulationConfig(AllreduceAlgorithm algorithm) {
  Config config;
  config.spinMicroseconds = 0;
  config.segmentBytes = 1024;  // many segments even for small buffers
  config.allreduceAlgorithm = algorithm;
  config.intraNode = kIntra;
  config.interNode = kInter;
  return config;
}

// Every rank's SUM of small integers (exact in every type), in place.
void expectExactAllreduce(const Topology& topology, AllreduceAlgorithm algorithm, size_t count) {
  const int n = topology.size();
  SimulatedNetwork network(topology, kIntra, kInter, /*payload=*/true);
  const Config config = simulationConfig(algorithm);
  AllreduceSelector selector(topology);
  network.run(config, [&](Transport& transport, int rank) {
    Workspace workspace;
    const Comm comm{transport, config, workspace, &selector};
    std::vector<int64_t> ints(count);
    std::vector<float> floats(count);
    std::vector<uint16_t> halves(count);
    for (size_t i = 0; i < count; ++i) {
      ints[i] = static_cast<int64_t>((rank * 31 + i * 7) % 101) - 50;
      floats[i] = static_cast<float>(rank * n + static_cast<int>(i % 13));
      halves[i] = floatToHalf(static_cast<float>(rank % 3));
    }
    hostAllreduce(comm, OpContext("allreduce", 1, std::chrono::hours(1)),
                  {ints.data(), count, DataType::Int64, ReduceOp::Sum});
    hostAllreduce(comm, OpContext("allreduce", 2, std::chrono::hours(1)),
                  {floats.data(), count, DataType::Float32, ReduceOp::Avg});
    hostAllreduce(comm, OpContext("allreduce", 3, std::chrono::hours(1)),
                  {halves.data(), count, DataType::Float16, ReduceOp::Sum});
    int halfSum = 0;
    for (int r = 0; r < n; ++r) halfSum += r % 3;
    for (size_t i = 0; i < count; ++i) {
      int64_t sum = 0;
      for (int r = 0; r < n; ++r) sum += static_cast<int64_t>((r * 31 + i * 7) % 101) - 50;
      ASSERT_EQ(ints[i], sum) << "rank " << rank << " index " << i;
      // (sum of r*n + i%13 over r) / n = (n-1)n/2 + i%13: exact in float.
      ASSERT_EQ(floats[i], static_cast<float>((n - 1) * n / 2 + static_cast<int>(i % 13)));
      ASSERT_EQ(halfToFloat(halves[i]), static_cast<float>(halfSum));
    }
  });
}

// Nodes of these sizes, in blocks: uneven nodes, as simulate's --node-sizes.
Topology nodesOf(const std::vector<int>& sizes) {
  std::vector<int> labels;
  for (size_t node = 0; node < sizes.size(); ++node)
    labels.insert(labels.end(), sizes[node], static_cast<int>(node));
  return Topology::fromLabels(labels);
}

}  // namespace

TEST(SimulatedTransport, EveryAlgorithmExactWithPayloadUpTo64Ranks) {
  const std::vector<Topology> topologies = {
      Topology::singleNode(1), Topology::blocks(2, 1),  Topology::blocks(1, 3),
      Topology::blocks(5, 1),  Topology::blocks(2, 4),  Topology::fromLabels({0, 1, 2, 0, 1, 2}),
      Topology::blocks(3, 3),  Topology::blocks(13, 1), Topology::blocks(8, 8),
      // Uneven nodes (two_level on P = the smallest node's ranks parts).
      nodesOf({3, 1}), nodesOf({2, 3}), nodesOf({1, 2, 4}), nodesOf({3, 3, 2}),
      nodesOf({8, 8, 8, 4, 2}), Topology::fromLabels({2, 0, 1, 2, 1, 2, 2, 0, 1})};
  for (const Topology& topology : topologies) {
    const size_t p = static_cast<size_t>(topology.size());
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
          AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
      // Below p (some ranks and parts get nothing), p, and large.
      for (size_t count : {size_t{1}, p, p >= 64 ? size_t{700} : size_t{3001}}) {
        SCOPED_TRACE(std::to_string(p) + " ranks on " + std::to_string(topology.nodes()) +
                     " nodes, " + nameOf(algorithm) + ", count " + std::to_string(count));
        expectExactAllreduce(topology, algorithm, count);
      }
    }
  }
}

// RINGREDUCE_ALGORITHM=two_level on uneven nodes runs the two-level form
// (it used to fall back to halving/doubling there): the forced allreduce
// sends the messages, and takes the virtual time, of the two-level schedule
// run directly, not those of halving/doubling, and the model prices it.
TEST(SimulatedTransport, ForcedTwoLevelRunsTwoLevelOnUnevenNodes) {
  ScopedEnv forced("RINGREDUCE_ALGORITHM", "two_level");
  Config config = Config::fromEnvironment();
  ASSERT_EQ(config.allreduceAlgorithm, AllreduceAlgorithm::TwoLevel);
  config.payloadFree = true;
  config.spinMicroseconds = 0;
  config.intraNode = kIntra;
  config.interNode = kInter;
  const size_t bytes = 64 << 10;
  const size_t count = bytes / elementSize(DataType::Float32);
  for (const Topology& topology :
       {nodesOf({3, 1}), nodesOf({2, 3}), nodesOf({1, 2, 4}),
        Topology::fromLabels({0, 1, 2, 0, 1, 2, 0, 1})}) {
    SCOPED_TRACE(std::to_string(topology.size()) + " ranks on " +
                 std::to_string(topology.nodes()) + " nodes");
    const ClusterSpec cluster{topology, kIntra, kInter};
    const SimulatedAllreduce run =
        simulateAllreduce(cluster, config.allreduceAlgorithm, bytes, config);
    EXPECT_EQ(run.algorithm, AllreduceAlgorithm::TwoLevel);
    EXPECT_TRUE(std::isfinite(run.predicted));
    // One algorithm called directly on the same network, every rank.
    const auto direct = [&](const std::function<void(const Comm&, const OpContext&,
                                                     const ReductionArgs&)>& algorithm) {
      SimulatedNetwork network(topology, kIntra, kInter, /*payload=*/false);
      Workspace workspace;
      const std::vector<double> finished =
          network.run(config, [&](Transport& transport, int) {
            const Comm comm{transport, config, workspace};
            algorithm(comm, OpContext("allreduce", 1, std::chrono::hours(1)),
                      {nullptr, count, DataType::Float32, ReduceOp::Sum});
          });
      return std::make_pair(network.messages(),
                            *std::max_element(finished.begin(), finished.end()));
    };
    const auto twoLevel = direct([&](const Comm& comm, const OpContext& op,
                                     const ReductionArgs& args) {
      twoLevelAllreduce(comm, op,
                        {args, &topology, AllreduceCostModel(topology, kIntra, kInter)
                                              .crossNodeAlgorithm(bytes)});
    });
    const auto halving = direct(halvingDoublingAllreduce);
    EXPECT_EQ(run.messages, twoLevel.first);
    EXPECT_EQ(run.seconds, twoLevel.second);
    // (3+1 sends 16 messages either way: the schedules differ in time.)
    EXPECT_TRUE(run.messages != halving.first || run.seconds != halving.second)
        << run.messages << " messages in " << run.seconds << " s";
  }
}

// Two ranks on two nodes, halving/doubling: one message each way per step
// of half the buffer: overhead, then the NIC at 1/beta, then the latency.
TEST(SimulatedTransport, VirtualTimeFollowsTheLinkModelAndRepeats) {
  ClusterSpec cluster{Topology::blocks(2, 1), kIntra, kInter};
  const size_t bytes = 1 << 20;
  const double step = kInter.overhead + kInter.alpha + (bytes / 2) * kInter.beta;
  const SimulatedAllreduce hd =
      simulateAllreduce(cluster, AllreduceAlgorithm::HalvingDoubling, bytes);
  EXPECT_NEAR(hd.seconds, 2 * step, 1e-12);
  EXPECT_EQ(hd.messages, 4u);
  EXPECT_NEAR(hd.predicted, hd.seconds, 1e-12);
  // Deterministic: the same run gives the same time to the last bit.
  cluster.topology = Topology::blocks(4, 4);
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::TwoLevel}) {
    EXPECT_EQ(simulateAllreduce(cluster, a, bytes).seconds,
              simulateAllreduce(cluster, a, bytes).seconds);
  }
}

// The cost model prices the same schedules the simulator runs: within 25%
// for every algorithm, latency- and bandwidth-bound, on and off the node,
// two_level also on uneven nodes.
TEST(SimulatedTransport, CostModelWithinAQuarterOfTheSimulatedSchedules) {
  for (const Topology& topology :
       {Topology::blocks(8, 1), Topology::blocks(4, 2), Topology::blocks(8, 8),
        Topology::blocks(6, 3), nodesOf({8, 8, 8, 4}), nodesOf({4, 4, 2, 2, 2, 2})}) {
    const ClusterSpec cluster{topology, kIntra, kInter};
    for (size_t bytes : {size_t{4096}, size_t{16} << 20}) {
      for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
                                   AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
        if (a == AllreduceAlgorithm::TwoLevel && topology.maxRanksPerNode() == 1) continue;
        // Halving/doubling on uneven nodes is priced in lockstep steps, up to
        // half too pessimistic (docs/SCALING.md): not held to a quarter.
        if (a == AllreduceAlgorithm::HalvingDoubling && !topology.regular()) continue;
        const SimulatedAllreduce r = simulateAllreduce(cluster, a, bytes);
        EXPECT_NEAR(r.predicted / r.seconds, 1.0, 0.25)
            << nameOf(a) << " " << bytes << " B on " << topology.size() << " ranks";
      }
    }
  }
}

// The ring streams each chunk in segments (Config::segmentBytes): where a
// hop's latency and a chunk's transfer are alike (8 ranks through 1 Gbit/s
// links of 0.58 ms, 4 MiB: chunks of two segments), pricing each chunk
// whole put the ring 13% above the schedule it runs. Priced by segment, it
// is within 5% of it from latency- to bandwidth-bound sizes.
TEST(SimulatedTransport, CostModelPricesTheRingBySegment) {
  const LinkCost slowInter = parseLinkCost("1Gbit/s,580us,5us", LinkCost{}, "inter");
  const LinkCost loopback = parseLinkCost("3.5GB/s,6us,5us", LinkCost{}, "intra");
  for (const Topology& topology : {Topology::blocks(8, 1), Topology::blocks(4, 2)}) {
    for (const ClusterSpec& cluster : {ClusterSpec{topology, loopback, slowInter},
                                       ClusterSpec{topology, kIntra, kInter}}) {
      for (size_t bytes = size_t{64} << 10; bytes <= (size_t{64} << 20); bytes *= 4) {
        const SimulatedAllreduce r = simulateAllreduce(cluster, AllreduceAlgorithm::Ring, bytes);
        EXPECT_NEAR(r.predicted / r.seconds, 1.0, 0.05)
            << bytes << " B on " << topology.nodes() << " nodes, inter "
            << describeLinkCost(cluster.interNode);
      }
    }
  }
}

// A schedule where rank 0 never sends: every other rank waits for its left
// neighbour forever. The simulator ends the run and names the waits.
TEST(SimulatedTransport, DeadlockIsAnErrorNamingWhatEachRankWaitedFor) {
  SimulatedNetwork network(Topology::blocks(2, 2), kIntra, kInter, true);
  const Config config = simulationConfig(AllreduceAlgorithm::Ring);
  try {
    network.run(config, [](Transport& t, int rank) {
      const OpContext op("broken", 1, std::chrono::hours(1));
      int64_t value = rank;
      const int left = (rank + t.size() - 1) % t.size();
      Request recv = t.irecv(left, makeTag(left, op.seq, 0), &value, sizeof(value), op);
      if (rank != 0) {  // the bug: rank 0 forgets its send
        Request send =
            t.isend((rank + 1) % t.size(), makeTag(rank, op.seq, 0), &value, sizeof(value), op);
        t.wait(send, op);
      }
      t.wait(recv, op);
    });
    ADD_FAILURE() << "expected a deadlock";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("simulated deadlock"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1 waits to receive 8 bytes from rank 0"), std::string::npos)
        << message;
  }
}

TEST(SimulatedTransport, MessageNobodyReceivesIsAnError) {
  SimulatedNetwork network(Topology::blocks(1, 2), kIntra, kInter, false);
  try {
    network.run(simulationConfig(AllreduceAlgorithm::Ring), [](Transport& t, int rank) {
      const OpContext op("extra", 1, std::chrono::hours(1));
      if (rank == 0) {
        Request send = t.isend(1, makeTag(0, op.seq, 5), nullptr, 64, op);
        t.wait(send, op);
      }
    });
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 never received 64 bytes from rank 0 (slot 5)"),
              std::string::npos)
        << e.what();
  }
}

TEST(SimulatedTransport, ThousandRanksPayloadFreeRunEveryAlgorithm) {
  const ClusterSpec cluster{Topology::blocks(128, 8), kIntra, kInter};
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::HalvingDoubling, AllreduceAlgorithm::TwoLevel,
                               AllreduceAlgorithm::Ring}) {
    const SimulatedAllreduce r = simulateAllreduce(cluster, a, size_t{256} << 20);
    EXPECT_GT(r.seconds, 0) << nameOf(a);
    EXPECT_NEAR(r.predicted / r.seconds, 1.0, 0.25) << nameOf(a);
  }
}
