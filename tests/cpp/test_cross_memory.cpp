// Cross-memory attach (transport/cross_memory.h), the probe that decides
// whether a group may use it (algorithms/cross_memory/peer_processes.h) and the allreduce
// built on it (algorithms/cross_memory/allreduce.h). The loopback's ranks
// are threads of one process: they reach each other through the same system
// calls as separate processes, on their own pid.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/cross_memory/allreduce.h"
#include "algorithms/cross_memory/peer_processes.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/errors.h"
#include "core/plan/partition.h"
#include "exact_inputs.h"
#include "rank_threads.h"
#include "transport/cross_memory.h"

using namespace ringreduce;
using ringreduce::testing::inputOf;
using ringreduce::testing::kindName;
using ringreduce::testing::kOps;
using ringreduce::testing::kTypes;
using ringreduce::testing::runComms;
using ringreduce::testing::runRanks;
using ringreduce::testing::TransportKind;

namespace {

OpContext opNumbered(uint64_t& seq) {
  return OpContext("allreduce", seq++, std::chrono::seconds(30));
}

// Every rank's pid and buffers within reach, as the selector learns it.
PeerProcesses learnt(const Comm& comm, uint64_t& seq) {
  AllreduceSelector selector;
  return selector.peerProcesses(comm, opNumbered(seq));
}

}  // namespace

TEST(CrossMemory, ReadsAndWritesThisProcessesMemoryByPid) {
  std::vector<uint32_t> source(100000), target(100000, 0);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint32_t>(i * 2654435761u);
  ASSERT_EQ(crossMemoryRead(getpid(), reinterpret_cast<uintptr_t>(source.data()), target.data(),
                            source.size() * 4),
            0);
  EXPECT_EQ(target, source);
  std::vector<uint32_t> written(100000, 0);
  ASSERT_EQ(crossMemoryWrite(getpid(), reinterpret_cast<uintptr_t>(written.data()),
                             source.data(), source.size() * 4),
            0);
  EXPECT_EQ(written, source);
  uint64_t word = 0;
  ASSERT_EQ(crossMemoryRead(getpid(), reinterpret_cast<uintptr_t>(crossMemoryProbeWord()), &word,
                            sizeof(word)),
            0);
  EXPECT_EQ(word, *crossMemoryProbeWord());
  EXPECT_NE(word, 0u);
}

TEST(CrossMemory, ReportsAMissingProcessAndAnAddressOutsideItsMappings) {
  uint64_t word = 0;
  // Above /proc/sys/kernel/pid_max's ceiling (2^22): no process has it.
  EXPECT_EQ(crossMemoryRead((1 << 22) + 1, reinterpret_cast<uintptr_t>(&word), &word, 8), ESRCH);
  EXPECT_EQ(crossMemoryRead(getpid(), 8, &word, 8), EFAULT);
  EXPECT_EQ(crossMemoryWrite(getpid(), 8, &word, 8), EFAULT);
}

TEST(PeerProcesses, RanksOfOneHostFindEachOtherInReach) {
  for (int n : {2, 3}) {
    runComms(n, TransportKind::Loopback, [&](const Comm& comm, int) {
      uint64_t seq = 1;
      const PeerProcesses peers = learnt(comm, seq);
      EXPECT_TRUE(peers.usable) << peers.why;
      ASSERT_EQ(peers.pids.size(), static_cast<size_t>(n));
      for (int pid : peers.pids) EXPECT_EQ(pid, getpid());
    });
  }
}

// One rank that cannot be reached (its probe word says another process)
// makes the group's verdict "not usable" on every rank, with the reason.
TEST(PeerProcesses, OneUnreachableRankTurnsItOffForEveryRank) {
  runComms(3, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    std::vector<ProcessRecord> all(3, thisProcess());
    all[2].probeValue ^= 1;  // what the others are told about rank 2
    const PeerProcesses peers =
        agreePeerProcesses(comm, OpContext("allreduce", 1, std::chrono::seconds(30)), all, 0);
    EXPECT_FALSE(peers.usable);
    if (rank == 2) {
      EXPECT_NE(peers.why.find("cannot reach rank 2"), std::string::npos) << peers.why;
    } else if (rank == 0) {
      EXPECT_NE(peers.why.find("is not rank 2's process"), std::string::npos) << peers.why;
    } else {
      EXPECT_NE(peers.why.find("rank 0 cannot reach rank 2"), std::string::npos) << peers.why;
    }
  });
}

TEST(PeerProcesses, RanksOnOtherHostsAreOutOfReach) {
  runComms(2, TransportKind::Loopback, [&](const Comm& comm, int) {
    std::vector<ProcessRecord> all(2, thisProcess());
    all[1].hostHash ^= 1;
    const PeerProcesses peers =
        agreePeerProcesses(comm, OpContext("allreduce", 1, std::chrono::seconds(30)), all, 0);
    EXPECT_FALSE(peers.usable);
    EXPECT_NE(peers.why.find("rank 1"), std::string::npos) << peers.why;
  });
}

// Against the ring on exact inputs: every dtype and op, blocks of many
// 1 MiB segments with a partial last one, blocks smaller than a segment,
// and fewer elements than ranks (empty blocks).
class CrossMemorySameAsRing : public ::testing::TestWithParam<std::tuple<int, TransportKind>> {};

TEST_P(CrossMemorySameAsRing, EveryDtypeAndOp) {
  const auto [n, kind] = GetParam();
  runComms(n, kind, [&, n = n](const Comm& comm, int rank) {
    uint64_t seq = 1;
    const PeerProcesses peers = learnt(comm, seq);
    ASSERT_TRUE(peers.usable) << peers.why;
    int salt = 0;
    for (DataType type : kTypes) {
      for (ReduceOp rop : kOps) {
        if (!unsupportedReason(type, rop).empty()) continue;
        const size_t esize = elementSize(type);
        for (size_t count : {size_t{1}, size_t{5}, size_t{4099},
                             static_cast<size_t>(n) * ((size_t{5} << 18) + 37) / esize}) {
          std::vector<uint8_t> expected = inputOf(type, rop, count, rank, ++salt);
          std::vector<uint8_t> got = expected;
          ringAllreduce(comm, opNumbered(seq), {expected.data(), count, type, rop});
          crossMemoryAllreduce(comm, opNumbered(seq), {got.data(), count, type, rop}, peers);
          ASSERT_EQ(got, expected) << "world " << n << " " << dataTypeName(type) << " "
                                   << reduceOpName(rop) << " count " << count;
        }
      }
    }
  }, Config{});  // the ring at its own segment size: 1 KiB would take minutes here
}

INSTANTIATE_TEST_SUITE_P(Worlds, CrossMemorySameAsRing,
                         ::testing::Values(std::tuple{2, TransportKind::Loopback},
                                           std::tuple{3, TransportKind::Loopback},
                                           std::tuple{4, TransportKind::Loopback},
                                           std::tuple{2, TransportKind::Ucx}),
                         [](const auto& info) {
                           return "World" + std::to_string(std::get<0>(info.param)) + "_" +
                                  kindName(std::get<1>(info.param));
                         });

// Float32 with values that round: every rank must end with the same bits
// (each block is computed once, by its owner) and match a double reference
// within one rounding per peer.
TEST(CrossMemoryAllreduce, EveryRankEndsWithTheSameRoundedSum) {
  constexpr int n = 3;
  const size_t count = (size_t{3} << 20) / 4 + 11;
  std::vector<std::vector<float>> results(n);
  runComms(n, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    uint64_t seq = 1;
    const PeerProcesses peers = learnt(comm, seq);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = 1.0f / static_cast<float>(i + 1 + 7 * rank);
    crossMemoryAllreduce(comm, opNumbered(seq), {data.data(), count, DataType::Float32,
                                                 ReduceOp::Sum},
                         peers);
    for (size_t i = 0; i < count; i += 997) {
      double exact = 0;
      for (int q = 0; q < n; ++q) exact += 1.0 / static_cast<double>(static_cast<float>(i + 1 + 7 * q));
      ASSERT_NEAR(data[i], exact, 4 * exact * 6e-8) << "element " << i;
    }
    results[static_cast<size_t>(rank)] = std::move(data);
  });
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// Auto takes cma from kCrossMemoryFromBytes where the group learnt it may;
// a selector given its nodes never learns it, and forcing cma there is a
// clear error on every rank.
TEST(CrossMemoryAllreduce, AutoTakesItFromItsSizeAndForcingItWithoutReachIsAnError) {
  runComms(2, TransportKind::Loopback, [&](const Comm& base, int rank) {
    uint64_t seq = 1;
    AllreduceSelector selector;
    Comm comm = base;
    comm.selector = &selector;
    EXPECT_EQ(selector.choose(comm, opNumbered(seq), kCrossMemoryFromBytes),
              AllreduceAlgorithm::CrossMemory);
    EXPECT_NE(selector.choose(comm, opNumbered(seq), kCrossMemoryFromBytes - 4),
              AllreduceAlgorithm::CrossMemory);
    const size_t count = kCrossMemoryFromBytes / 4 * 3;
    std::vector<float> data(count, static_cast<float>(rank + 1));
    hostAllreduce(comm, opNumbered(seq), {data.data(), count, DataType::Float32, ReduceOp::Avg});
    for (float x : data) ASSERT_EQ(x, 1.5f);

    Config forced = base.config;
    forced.allreduceAlgorithm = AllreduceAlgorithm::CrossMemory;
    AllreduceSelector given(Topology::singleNode(2));
    const Comm withoutReach{base.transport, forced, base.workspace, &given};
    try {
      hostAllreduce(withoutReach, opNumbered(seq),
                    {data.data(), count, DataType::Float32, ReduceOp::Sum});
      ADD_FAILURE() << "forced cma ran without learning the peers";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("the cma algorithm needs"), std::string::npos)
          << e.what();
    }
  });
}

// A rank with another size would have its peers write past its buffer: every
// rank raises the same error before any copy, and every buffer is as it was.
TEST(CrossMemoryAllreduce, RanksWithDifferentSizesAllFailBeforeTouchingAnyBuffer) {
  std::vector<std::string> errors(3);
  runComms(3, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    uint64_t seq = 1;
    const PeerProcesses peers = learnt(comm, seq);
    const size_t count = rank == 2 ? 50000 : 100000;
    std::vector<float> data(count, 1.0f);
    try {
      crossMemoryAllreduce(comm, opNumbered(seq), {data.data(), count, DataType::Float32,
                                                   ReduceOp::Sum},
                           peers);
      ADD_FAILURE() << "rank " << rank << " reduced tensors of different sizes";
    } catch (const InvalidArgument& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
    for (float x : data) ASSERT_EQ(x, 1.0f);
  });
  EXPECT_NE(errors[0].find("rank 0 has 100000 elements of float32 (SUM), rank 2 50000"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], errors[0]);
  EXPECT_EQ(errors[2], errors[0]);
}

// A rank that failed (here: its deadline had passed) has said "failed"
// before returning its tensor. A peer that comes late finds the word
// before its first copy and stops: neither buffer is touched, and the late
// rank's error names the one that failed.
TEST(CrossMemoryAllreduce, ALateRankFindsAFailedPeersWordBeforeItCopiesAnything) {
  const size_t count = (size_t{3} << 20) / 4;
  std::vector<std::vector<float>> buffers(2, std::vector<float>(count, 1.0f));
  std::atomic<bool> rank1Failed{false};
  std::vector<std::string> errors(2);
  runComms(2, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    uint64_t seq = 1;
    const PeerProcesses peers = learnt(comm, seq);
    const ReductionArgs args{buffers[rank].data(), count, DataType::Float32, ReduceOp::Sum};
    try {
      if (rank == 1) {
        crossMemoryAllreduce(comm, OpContext("allreduce", seq, std::chrono::milliseconds(0)),
                             args, peers);
      } else {
        while (!rank1Failed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        crossMemoryAllreduce(comm, OpContext("allreduce", seq, std::chrono::seconds(30)), args,
                             peers);
      }
      ADD_FAILURE() << "rank " << rank << " finished an allreduce its peer had given up";
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
    if (rank == 1) rank1Failed = true;
  });
  EXPECT_NE(errors[1].find("timed out"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank 1 failed in it"), std::string::npos) << errors[0];
  for (const auto& buffer : buffers) {
    for (float x : buffer) ASSERT_EQ(x, 1.0f);
  }
}

// RINGREDUCE_CROSS_MEMORY=0 on one rank turns cma off for the whole group,
// with that rank named, and the group still agrees in one exchange.
TEST(PeerProcesses, ARankThatTurnedItOffTurnsItOffForEveryRank) {
  runRanks(3, [&](Transport& transport, int rank) {
    Config config;
    config.crossMemory = rank != 1;
    Workspace workspace;
    const Comm comm{transport, config, workspace};
    const PeerProcesses peers = agreePeerProcesses(
        comm, OpContext("allreduce", 1, std::chrono::seconds(30)),
        std::vector<ProcessRecord>(3, thisProcess()), 0);
    EXPECT_FALSE(peers.usable);
    EXPECT_EQ(peers.why, "rank 1 turned it off (RINGREDUCE_CROSS_MEMORY=0)");
  }, Config{}, TransportKind::Loopback);
}
