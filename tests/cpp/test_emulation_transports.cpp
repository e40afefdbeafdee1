// What the emulated-cluster benchmark builds on: the one-way delay added in
// the sending transport (this kernel has no netem) keeps every algorithm
// exact and every message, including those still held when a rank leaves;
// the directory store serves set/get/add across processes' files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/tuning/link_probe.h"
#include "core/base/errors.h"
#include "rank_threads.h"
#include "transport/delayed_transport.h"
#include "transport/rendezvous/file_store.h"
#include "transport/tag.h"

using namespace ringreduce;

TEST(DelayedTransport, EveryAlgorithmExactAcrossDelayedNodes) {
  const Topology topology = Topology::blocks(2, 2);
  auto fabric = std::make_shared<LoopbackFabric>(4);
  Config config = ringreduce::testing::smallSegments();
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        DelayedTransport transport(std::make_unique<LoopbackTransport>(fabric, rank, config),
                                   topology.nodeOf, std::chrono::microseconds(300));
        Workspace workspace;
        AllreduceSelector selector(topology);
        Config forced = config;
        const Comm comm{transport, forced, workspace, &selector};
        uint64_t seq = 1;
        for (AllreduceAlgorithm a : {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
                                     AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
          forced.allreduceAlgorithm = a;
          // Values that depend on the position: a chunk delivered at
          // another offset (or two chunks swapped) changes the sum there.
          std::vector<int64_t> data(5000);
          for (size_t i = 0; i < data.size(); ++i) data[i] = (rank + 1) * 1000000 + int64_t(i);
          hostAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                        {data.data(), data.size(), DataType::Int64, ReduceOp::Sum});
          for (size_t i = 0; i < data.size(); ++i) {
            const int64_t expected = 10 * 1000000 + 4 * int64_t(i);  // ranks 1..4, 4 x i
            if (data[i] != expected) {
              throw Error(std::string(nameOf(a)) + " gave " + std::to_string(data[i]) + " at " +
                          std::to_string(i) + ", not " + std::to_string(expected));
            }
          }
        }
        // Leaves at once: the destructor still delivers what it holds.
        if (rank == 2) {
          int64_t last = 42;
          Request send = transport.isend(0, makeTag(2, 99, 0), &last, 8,
                                         OpContext("last", 99, std::chrono::seconds(30)));
          transport.wait(send, OpContext("last", 99, std::chrono::seconds(30)));
        }
        if (rank == 0) {
          int64_t got = 0;
          const OpContext op("last", 99, std::chrono::seconds(30));
          Request recv = transport.irecv(2, makeTag(2, 99, 0), &got, 8, op);
          transport.wait(recv, op);
          if (got != 42) throw Error("the held message was lost");
        }
      } catch (const std::exception& e) {
        failures[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(failures[rank], "") << "rank " << rank;
}

TEST(FileStore, SetGetCheckAndAddThroughFiles) {
  char pattern[] = "/tmp/ringreduce_store_XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  FileStore a(pattern), b(pattern);
  EXPECT_FALSE(b.check("ringreduce/gen0/addr/1"));
  a.set("ringreduce/gen0/addr/1", {1, 2, 3});
  EXPECT_TRUE(b.check("ringreduce/gen0/addr/1"));
  EXPECT_EQ(b.get("ringreduce/gen0/addr/1", std::chrono::seconds(1)),
            (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_THROW(b.get("missing", std::chrono::milliseconds(20)), TimeoutError);
  EXPECT_EQ(a.add("joined", 1), 1);
  EXPECT_EQ(b.add("joined", 1), 2);
  EXPECT_EQ(a.add("joined", 5), 7);
  std::system((std::string("rm -rf ") + pattern).c_str());
}

// Measured links: every rank ends with rank 0's figures (the choice made from
// them must agree), and an allreduce that measures first is still exact.
TEST(LinkProbe, EveryRankGetsRankZerosFiguresAndTheAllreduceStaysExact) {
  const Topology topology = Topology::blocks(2, 2);
  std::vector<LinkCost> intra(4), inter(4);
  ringreduce::testing::runComms(
      4, ringreduce::testing::TransportKind::Loopback, [&](const Comm& base, int rank) {
        Config config = base.config;
        config.measureLinks = true;
        AllreduceSelector selector(topology);
        const Comm comm{base.transport, config, base.workspace, &selector};
        const OpContext op("probe", 1, std::chrono::seconds(30));
        intra[rank] = config.intraNode;
        inter[rank] = config.interNode;
        probeLinks(comm, op, topology, &intra[rank], &inter[rank]);
        std::vector<int64_t> data(1000, rank);
        hostAllreduce(comm, OpContext("allreduce", 2, std::chrono::seconds(30)),
                      {data.data(), data.size(), DataType::Int64, ReduceOp::Sum});
        for (int64_t x : data) ASSERT_EQ(x, 6);
      });
  for (int rank = 1; rank < 4; ++rank) {
    EXPECT_EQ(intra[rank].alpha, intra[0].alpha);
    EXPECT_EQ(intra[rank].beta, intra[0].beta);
    EXPECT_EQ(inter[rank].overhead, inter[0].overhead);
  }
  EXPECT_GE(intra[0].alpha, 0);
  EXPECT_GE(inter[0].beta, 0);
}
