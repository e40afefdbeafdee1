// The virtual-time transport's CPU model (core/plan/host_cpu.h): messages cost
// their ends CPU time, run on a limited number of cores shared by all ranks.
// Hand-computed times on small cases, the model without cores unchanged,
// and exact results when ranks wait for cores.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "core/base/errors.h"
#include "simulator/allreduce_simulation.h"
#include "transport/simulated/simulated_network.h"
#include "transport/tag.h"

using namespace ringreduce;

namespace {

// 10 us latency, no per-byte time, no overhead: only the CPU model's terms.
const LinkCost kLink{10e-6, 0, 0};
// 1 us to send a message, 2 us to take one in.
const MessageCpu kCpu{1e-6, 0, 2e-6, 0};

// Ranks 0 and 1 each send the other 8 bytes at time 0 and wait for the
// other's; the virtual time at which each finished.
std::vector<double> exchange(const Topology& topology, const HostCpu& cpu) {
  SimulatedNetwork network(topology, kLink, kLink, true, cpu);
  Config config;
  config.spinMicroseconds = 0;
  return network.run(config, [](Transport& t, int rank) {
    const OpContext op("exchange", 1, std::chrono::hours(1));
    int64_t out = rank, in = -1;
    const int peer = 1 - rank;
    Request recv = t.irecv(peer, makeTag(peer, op.seq, 0), &in, sizeof(in), op);
    Request send = t.isend(peer, makeTag(rank, op.seq, 0), &out, sizeof(out), op);
    t.wait(send, op);
    t.wait(recv, op);
    ASSERT_EQ(in, peer);
  });
}

// The same within one node.
std::vector<double> exchange(int cores, double spin = 0) {
  HostCpu cpu{cores, kCpu, kCpu};
  cpu.spin = spin;
  return exchange(Topology::blocks(1, 2), cpu);
}

// Rank 0 sends rank 1 8 bytes, rank 1 answers: the time of the round trip.
double pingPong(const ClusterSpec& cluster) {
  SimulatedNetwork network(cluster.topology, cluster.intraNode, cluster.interNode, true,
                           cluster.cpu);
  Config config;
  config.spinMicroseconds = 0;
  const std::vector<double> finished = network.run(config, [](Transport& t, int rank) {
    const OpContext op("ping", 1, std::chrono::hours(1));
    int64_t word = 7;
    const int peer = 1 - rank;
    for (int leg = 0; leg < 2; ++leg) {
      if (leg == rank) {
        Request send = t.isend(peer, makeTag(rank, op.seq, leg), &word, sizeof(word), op);
        t.wait(send, op);
      } else {
        Request recv = t.irecv(peer, makeTag(peer, op.seq, leg), &word, sizeof(word), op);
        t.wait(recv, op);
      }
    }
  });
  return finished[0];
}

HostCpu someCpu(int cores) {
  // TCP-like: per message and per byte at both ends, dearer across nodes.
  // waking from sleep, messages across nodes held 30 us at their sender, and
  // a 5 us spin before a wait sleeps.
  return HostCpu{cores, {2e-6, 0.2e-9, 3e-6, 0.3e-9, 4e-6},
                 {5e-6, 0.5e-9, 6e-6, 0.6e-9, 8e-6, 30e-6}, 5e-6};
}

}  // namespace

// Each rank: send [0, 1] us, the message in at 11, taken in by 13. On one
// core rank 1 sends only after rank 0, [1, 2], so its message arrives at 12,
// and rank 0 takes it in once rank 1 has taken its own in: [13, 15].
TEST(SimulatedCores, TwoRanksOnOneCoreSerialise) {
  const std::vector<double> unlimited = exchange(0);
  EXPECT_NEAR(unlimited[0], 13e-6, 1e-15);
  EXPECT_NEAR(unlimited[1], 13e-6, 1e-15);
  const std::vector<double> two = exchange(2);
  EXPECT_NEAR(two[0], 13e-6, 1e-15);
  EXPECT_NEAR(two[1], 13e-6, 1e-15);
  const std::vector<double> one = exchange(1);
  EXPECT_NEAR(one[0], 15e-6, 1e-15);
  EXPECT_NEAR(one[1], 13e-6, 1e-15);
}

// A waiting rank that spins holds its core: on one core with a 20 us spin,
// rank 0 sends [0, 1] and spins [1, 21] while rank 1 waits for the core;
// rank 1 then sends [21, 22] (arriving at 32), finds rank 0's message (in
// at 11) and takes it in [22, 24]. Rank 0, asleep since 21, takes its
// message in [32, 34]. With two cores nobody waits and spinning is free.
TEST(SimulatedCores, ASpinningRankHoldsItsCore) {
  const std::vector<double> one = exchange(1, 20e-6);
  EXPECT_NEAR(one[0], 34e-6, 1e-15);
  EXPECT_NEAR(one[1], 24e-6, 1e-15);
  const std::vector<double> two = exchange(2, 20e-6);
  EXPECT_NEAR(two[0], 13e-6, 1e-15);
  EXPECT_NEAR(two[1], 13e-6, 1e-15);
}

// A core for every rank: nobody ever waits for one, so the time is that of
// unlimited cores, but for the order of sends. Without limited cores a rank
// may run 1 us ahead of events before it yields; with them, work goes to
// cores strictly in time order, and so do the sends that follow it: two
// ranks of a node that send at nearly the same time can reach their FIFO
// NIC in the other order, which moves the end by up to a message's time on
// the link (a few percent here). Ties either way are legitimate schedules.
TEST(SimulatedCores, ACorePerRankMatchesUnlimitedCores) {
  const double tolerance = 0.05;
  ClusterSpec cluster{Topology::blocks(4, 2), {1e-6, 1.0 / 10e9, 0.2e-6},
                      {20e-6, 8.0 / 10e9, 1e-6}};
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
                               AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
    for (size_t bytes : {size_t{4096}, size_t{1} << 20}) {
      cluster.cpu = HostCpu();  // the model before cores
      const double plain = simulateAllreduce(cluster, a, bytes).seconds;
      cluster.cpu.cores = 8;
      EXPECT_NEAR(simulateAllreduce(cluster, a, bytes).seconds / plain, 1, tolerance)
          << nameOf(a) << " " << bytes;
      cluster.cpu = someCpu(0);
      const double unlimited = simulateAllreduce(cluster, a, bytes).seconds;
      EXPECT_GT(unlimited, plain) << nameOf(a) << " " << bytes;
      cluster.cpu = someCpu(8);
      EXPECT_NEAR(simulateAllreduce(cluster, a, bytes).seconds / unlimited, 1, tolerance)
          << nameOf(a) << " " << bytes;
      // Fewer cores than ranks: never faster, and with two slower still.
      cluster.cpu = someCpu(4);
      const double four = simulateAllreduce(cluster, a, bytes).seconds;
      cluster.cpu = someCpu(2);
      const double two = simulateAllreduce(cluster, a, bytes).seconds;
      EXPECT_GE(four, unlimited * (1 - tolerance)) << nameOf(a) << " " << bytes;
      EXPECT_GT(two, unlimited) << nameOf(a) << " " << bytes;
      EXPECT_GE(two, four * (1 - tolerance)) << nameOf(a) << " " << bytes;
    }
  }
}

// With no latency and one core, the core never idles: a direct allreduce
// takes exactly its messages' CPU, send and receive, one after another.
TEST(SimulatedCores, OneCoreWithoutLatencyTakesTheSumOfAllCpu) {
  ClusterSpec cluster{Topology::blocks(4, 1), {0, 0, 0}, {0, 0, 0}};
  cluster.cpu = HostCpu{1, kCpu, kCpu};
  const SimulatedAllreduce r = simulateAllreduce(cluster, AllreduceAlgorithm::Direct, 4096);
  EXPECT_EQ(r.messages, 24u);  // 4 x 3, twice
  EXPECT_NEAR(r.seconds, 24 * 3e-6, 1e-15);
}

// Ranks that wait for cores still get exact results, on every algorithm.
TEST(SimulatedCores, ExactResultsWhenRanksWaitForCores) {
  for (const Topology& topology : {Topology::blocks(8, 1), Topology::blocks(4, 2),
                                   Topology::blocks(3, 3)}) {
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
          AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
      SCOPED_TRACE(std::to_string(topology.size()) + " ranks, " + nameOf(algorithm));
      const int n = topology.size();
      SimulatedNetwork network(topology, kLink, kLink, true, someCpu(2));
      Config config;
      config.spinMicroseconds = 0;
      config.segmentBytes = 1024;
      config.allreduceAlgorithm = algorithm;
      AllreduceSelector selector(topology);
      const std::vector<double> finished = network.run(config, [&](Transport& t, int rank) {
        Workspace workspace;
        const Comm comm{t, config, workspace, &selector};
        const size_t count = 2001;
        std::vector<int64_t> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<int64_t>((rank * 31 + i * 7) % 101);
        hostAllreduce(comm, OpContext("allreduce", 1, std::chrono::hours(1)),
                      {data.data(), count, DataType::Int64, ReduceOp::Sum});
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0;
          for (int r = 0; r < n; ++r) sum += static_cast<int64_t>((r * 31 + i * 7) % 101);
          ASSERT_EQ(data[i], sum) << "rank " << rank << " index " << i;
        }
      });
      for (double t : finished) EXPECT_GT(t, 0);
    }
  }
}

// Messages held at their sender (an emulated latency): 2 nodes, 100 us hold,
// 10 us wire, send 1 us, receive 2 us, wake 4 us. Both sleep when their
// messages are released at 100: each needs waking and sending, [100, 105],
// so both arrive at 115, and each receiver wakes and takes its message in
// by 121. On one core the second release waits for the first: [105, 110],
// arriving at 120; rank 1 holds the core [115, 121], then rank 0 [121, 127].
TEST(SimulatedCores, HeldMessagesAreSentAtReleaseByTheirSender) {
  MessageCpu held{1e-6, 0, 2e-6, 0, 4e-6, 100e-6};
  for (int cores : {0, 1}) {
    const std::vector<double> finished =
        exchange(Topology::blocks(2, 1), HostCpu{cores, kCpu, held});
    EXPECT_NEAR(finished[0], cores == 1 ? 127e-6 : 121e-6, 1e-15) << cores << " cores";
    EXPECT_NEAR(finished[1], 121e-6, 1e-15) << cores << " cores";
  }
}

// The links left once the CPU is charged to cores reproduce the ping-pong
// they were measured with: alone on the cores, a round trip of 8 bytes
// takes 2 (alpha + 8 beta), as it does on the links without the CPU model.
TEST(SimulatedCores, MeasuredPingPongIsReproducedOnCores) {
  const LinkCost intra{20e-6, 1.0 / 1e9, 8e-6}, inter{600e-6, 8.0 / 1e9, 10e-6};
  const MessageCpu intraCpu{4e-6, 0.25e-9, 4e-6, 0.25e-9, 6e-6};
  const MessageCpu interCpu{5e-6, 0.3e-9, 1e-6, 0.3e-9, 50e-6};
  for (int cores : {0, 2}) {
    const ClusterSpec held = clusterOnCores(Topology::blocks(2, 1), intra, inter, intraCpu,
                                            interCpu, cores, 0, 500e-6);
    EXPECT_NEAR(pingPong(held), 2 * (inter.alpha + 8 * inter.beta), 1e-12) << cores << " cores";
    const ClusterSpec node = clusterOnCores(Topology::blocks(1, 2), intra, inter, intraCpu,
                                            interCpu, cores, 0);
    EXPECT_NEAR(pingPong(node), 2 * (intra.alpha + 8 * intra.beta), 1e-12) << cores << " cores";
  }
}

// Per-byte CPU: the sender copies while its message streams out, the
// receiver after the last byte is in. 1000 bytes at 1 ns/B each end, 10 us
// latency: rank 0 posts [0, 1] and copies [1, 2]; the message leaves at 1,
// is in at 11, and rank 1 takes it in [11, 14] (2 us + 1 us of copying).
TEST(SimulatedCores, SenderCopiesWhileTheMessageStreamsOut) {
  const MessageCpu copying{1e-6, 1e-9, 2e-6, 1e-9};
  SimulatedNetwork network(Topology::blocks(1, 2), kLink, kLink, false,
                           HostCpu{1, copying, copying});
  Config config;
  config.spinMicroseconds = 0;
  const std::vector<double> finished = network.run(config, [](Transport& t, int rank) {
    const OpContext op("stream", 1, std::chrono::hours(1));
    Request r = rank == 0 ? t.isend(1, makeTag(0, op.seq, 0), nullptr, 1000, op)
                          : t.irecv(0, makeTag(0, op.seq, 0), nullptr, 1000, op);
    t.wait(r, op);
  });
  EXPECT_NEAR(finished[0], 2e-6, 1e-15);
  EXPECT_NEAR(finished[1], 14e-6, 1e-15);
}
