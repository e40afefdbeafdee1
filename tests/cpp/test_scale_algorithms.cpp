// The allreduce algorithms for scale (halving/doubling, two-level, direct)
// against the ring on the same inputs: every (dtype, op) the ring supports,
// worlds 1 to 9, on UCX and on the loopback. Inputs are small integers, so
// every order of combination gives the same bits and the results must be
// bit-identical to the ring's.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/reduce_to_root.h"
#include "algorithms/ring_allreduce.h"
#include "algorithms/scatter_gather.h"
#include "algorithms/two_level_allreduce.h"
#include "core/math/half_conversion.h"
#include "core/plan/halving_plan.h"
#include "core/plan/partition.h"
#include "core/plan/topology.h"
#include "exact_inputs.h"
#include "rank_threads.h"
#include "transport/simulated/simulated_network.h"

using namespace ringreduce;
using ringreduce::testing::inputOf;
using ringreduce::testing::kindName;
using ringreduce::testing::kOps;
using ringreduce::testing::kTypes;
using ringreduce::testing::runComms;
using ringreduce::testing::TransportKind;

namespace {

// One algorithm, run the way a test case names it.
struct Case {
  std::string name;
  std::vector<int> nodes;  // node label of each rank (two_level only)
  AllreduceAlgorithm algorithm;
  AllreduceAlgorithm crossNode = AllreduceAlgorithm::Ring;
};

// gtest prints a parameter with this (ctest lists every case by it).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

void runCase(const Case& c, const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  if (c.algorithm == AllreduceAlgorithm::TwoLevel) {
    const Topology topology = Topology::fromLabels(c.nodes);
    twoLevelAllreduce(comm, op, {args, &topology, c.crossNode});
  } else if (c.algorithm == AllreduceAlgorithm::HalvingDoubling) {
    halvingDoublingAllreduce(comm, op, args);
  } else {
    directAllreduce(comm, op, args);
  }
}

class SameAsRing : public ::testing::TestWithParam<std::tuple<Case, TransportKind>> {};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int n = 1; n <= 9; ++n) {
    all.push_back(
        {"halving_doubling_" + std::to_string(n), {}, AllreduceAlgorithm::HalvingDoubling});
    all.push_back({"direct_" + std::to_string(n), {}, AllreduceAlgorithm::Direct});
  }
  // Node layouts: blocks, interleaved, non-power-of-two ranks per node,
  // one rank per node and one node (both fall back to halving/doubling),
  // and uneven nodes (uneven3 is 2+1, uneven5 3+2).
  const std::vector<std::pair<std::string, std::vector<int>>> layouts = {
      {"1", {0}},
      {"2x1", {0, 1}},
      {"1x2", {0, 0}},
      {"uneven3", {0, 0, 1}},
      {"2x2", {0, 0, 1, 1}},
      {"2x2_interleaved", {0, 1, 0, 1}},
      {"uneven5", {0, 0, 0, 1, 1}},
      {"2x3", {0, 0, 0, 1, 1, 1}},
      {"3x2_interleaved", {0, 1, 2, 0, 1, 2}},
      {"7x1", {0, 1, 2, 3, 4, 5, 6}},
      {"2x4", {0, 0, 0, 0, 1, 1, 1, 1}},
      {"4x2", {0, 0, 1, 1, 2, 2, 3, 3}},
      {"3x3", {0, 0, 0, 1, 1, 1, 2, 2, 2}},
      // Nodes of unequal size: P = the smallest node's ranks parts, the
      // larger nodes' extra ranks in their node's phases only.
      {"uneven_3_1", {0, 0, 0, 1}},
      {"uneven_2_3", {0, 0, 1, 1, 1}},
      {"uneven_1_4", {0, 1, 1, 1, 1}},
      {"uneven_3_2_interleaved", {0, 1, 0, 1, 0}},
      {"uneven_4_4_2", {0, 0, 0, 0, 1, 1, 1, 1, 2, 2}},
      {"uneven_5_3_3", {0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2}},
      {"uneven_1_2_4_interleaved", {2, 1, 2, 0, 2, 1, 2}},
      {"uneven_3_3_2_interleaved", {0, 1, 2, 0, 1, 2, 0, 1}},
  };
  for (const auto& [name, labels] : layouts) {
    all.push_back(
        {"two_level_ring_" + name, labels, AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Ring});
    all.push_back({"two_level_hd_" + name, labels, AllreduceAlgorithm::TwoLevel,
                   AllreduceAlgorithm::HalvingDoubling});
    all.push_back({"two_level_direct_" + name, labels, AllreduceAlgorithm::TwoLevel,
                   AllreduceAlgorithm::Direct});
  }
  return all;
}

int worldOf(const Case& c) {
  if (!c.nodes.empty()) return static_cast<int>(c.nodes.size());
  return std::stoi(c.name.substr(c.name.rfind('_') + 1));
}

}  // namespace

TEST_P(SameAsRing, EveryTypeAndOpBitIdentical) {
  const auto& [c, kind] = GetParam();
  const int n = worldOf(c);
  runComms(n, kind, [&](const Comm& comm, int rank) {
    uint64_t seq = 1;
    for (DataType type : kTypes) {
      for (ReduceOp rop : kOps) {
        if (!unsupportedReason(type, rop).empty()) continue;
        // Below, at and above p (odd), so some ranks and parts get nothing.
        for (size_t count : {size_t{0}, size_t{1}, size_t{5}, static_cast<size_t>(n),
                             size_t{1031}}) {
          const int salt = static_cast<int>(type) * 100 + static_cast<int>(rop) * 10;
          std::vector<uint8_t> expected = inputOf(type, rop, count, rank, salt);
          std::vector<uint8_t> got = expected;
          ringAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                        {expected.data(), count, type, rop});
          runCase(c, comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                  {got.data(), count, type, rop});
          ASSERT_EQ(got, expected)
              << dataTypeName(type) << " " << reduceOpName(rop) << " count " << count;
        }
      }
    }
  });
}

namespace {

// One allreduce of `count` elements by the ring and by direct on the same
// input: the results must be the same bytes.
void expectDirectAsRing(const Comm& comm, int rank, uint64_t& seq, DataType type, ReduceOp rop,
                        size_t count, const std::string& where) {
  const int salt = static_cast<int>(type) * 100 + static_cast<int>(rop) * 10;
  std::vector<uint8_t> expected = inputOf(type, rop, count, rank, salt);
  std::vector<uint8_t> got = expected;
  ringAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                {expected.data(), count, type, rop});
  directAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                  {got.data(), count, type, rop});
  ASSERT_EQ(got, expected) << where << " " << dataTypeName(type) << " " << reduceOpName(rop)
                           << " count " << count;
}

}  // namespace

// Direct's round 1 arrives in segments (a window of four in flight) and
// each is reduced piece by piece (128 KiB at a time, every peer's part per
// piece): blocks of many segments, more than the window, with a partial
// last one, and segments that are not a whole number of pieces, must
// combine exactly as the ring does, AVG's division included.
TEST(DirectAllreduce, ReducesBlocksOfManySegmentsAndPiecesLikeTheRing) {
  Config longSegments;
  longSegments.segmentBytes = 300 * 1024;  // pieces of 128, 128 and 44 KiB
  for (const Config& config : {ringreduce::testing::smallSegments(), longSegments}) {
    for (int n : {3, 4}) {
      runComms(n, TransportKind::Loopback, [&](const Comm& comm, int rank) {
        uint64_t seq = 1;
        for (DataType type : kTypes) {
          for (ReduceOp rop : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Product}) {
            if (!unsupportedReason(type, rop).empty()) continue;
            // At least three 128 KiB pieces per rank and a partial one.
            const size_t count = (static_cast<size_t>(n) * (400 * 1024 + 37)) / elementSize(type);
            ASSERT_NO_FATAL_FAILURE(expectDirectAsRing(
                comm, rank, seq, type, rop, count,
                "world " + std::to_string(n) + ", segments of " +
                    std::to_string(config.segmentBytes) + " B:"));
          }
        }
      }, config);
    }
  }
}

// Segments so large that two peers' slots of two of them would not fit the
// cached scratch: a window of one segment, each slot reused for the next.
TEST(DirectAllreduce, WindowOfOneWhenSegmentsAreLarge) {
  Config hugeSegments;
  hugeSegments.segmentBytes = 3 << 20;
  runComms(3, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    uint64_t seq = 1;
    for (DataType type : {DataType::Float32, DataType::BFloat16}) {
      for (ReduceOp rop : {ReduceOp::Sum, ReduceOp::Avg}) {
        // Three segments per block, the last one partial.
        const size_t count = 3 * ((7 << 20) + 12) / elementSize(type);
        ASSERT_NO_FATAL_FAILURE(
            expectDirectAsRing(comm, rank, seq, type, rop, count, "window of one:"));
      }
    }
  }, hugeSegments);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, SameAsRing,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values(TransportKind::Loopback,
                                                              TransportKind::Ucx)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  kindName(std::get<1>(info.param));
                         });

// The dispatcher: each forced choice, and auto, through a selector that
// learns the nodes by exchanging host identities (all threads share a host).
TEST(AllreduceDispatch, ForcedAndAutoChoicesAllAgreeAndLearnOneNode) {
  for (int n : {1, 3, 4}) {
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
          AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct}) {
      Config config = ringreduce::testing::smallSegments();
      config.allreduceAlgorithm = algorithm;
      runComms(
          n, TransportKind::Loopback,
          [&](const Comm& base, int rank) {
            AllreduceSelector selector;
            Comm comm = base;
            comm.selector = &selector;
            for (size_t count : {size_t{3}, size_t{100000}}) {
              std::vector<int64_t> data(count, rank + 1);
              hostAllreduce(comm, OpContext("allreduce", count, std::chrono::seconds(30)),
                            {data.data(), count, DataType::Int64, ReduceOp::Sum});
              for (int64_t x : data) ASSERT_EQ(x, n * (n + 1) / 2);
            }
            if (n > 1) {
              EXPECT_EQ(selector.topology(comm, OpContext()).nodes(), 1);
            }
          },
          config);
    }
  }
}

// Reduce-scatter and allgather by halving/doubling in rank order (with the
// fold when p is not a power of two) and by direct, against the ring forms:
// every (dtype, op), counts below p, around it and odd.
// A world size, a transport and the form forced for the group.
using FormParam = std::tuple<int, TransportKind, AllreduceAlgorithm>;

// `body(comm, rank, n)` on every rank, with the form forced and segments
// small enough that counts of a thousand span several.
template <typename Body>
void runForcedForm(const FormParam& param, const Body& body) {
  const auto [n, kind, algorithm] = param;
  Config config = ringreduce::testing::smallSegments();
  config.allreduceAlgorithm = algorithm;
  runComms(
      n, kind, [&, n = n](const Comm& comm, int rank) { body(comm, rank, n); }, config);
}

// `body(type, op)` for every dtype and the reduce ops defined on it.
template <typename Body>
void forEachReduction(const Body& body) {
  for (DataType type : kTypes) {
    for (ReduceOp rop : kOps) {
      if (unsupportedReason(type, rop).empty()) body(type, rop);
    }
  }
}

// The list form of reduce_scatter: every block in a buffer of its own,
// reduced into an output apart and then into this rank's own block. Only
// direct takes it (`takes`); the other forms leave it to a flat copy.
void expectListFormAsRing(const Comm& comm, const OpContext& op, const std::vector<uint8_t>& input,
                          DataType type, ReduceOp rop, const std::vector<uint8_t>& expectedMine,
                          bool takes) {
  const int n = comm.size();
  const size_t count = input.size() / elementSize(type);
  const size_t e = elementSize(type);
  std::vector<std::vector<uint8_t>> blockData;
  std::vector<const void*> blocks;
  for (int j = 0; j < n; ++j) {
    const Range c = chunkOf(count, n, j);
    blockData.emplace_back(input.begin() + c.offset * e, input.begin() + (c.offset + c.count) * e);
  }
  for (const auto& block : blockData) blocks.push_back(block.data());
  const auto kept = blockData;
  std::vector<uint8_t> apart(expectedMine.size(), 0xee);
  ASSERT_EQ(hostReduceScatterBlocksInto(comm, op, {nullptr, count, type, rop}, blocks, apart.data()),
            takes);
  if (!takes) return;
  EXPECT_EQ(apart, expectedMine) << dataTypeName(type) << " " << reduceOpName(rop) << " " << count;
  EXPECT_EQ(blockData, kept) << "the input blocks stay as they were";
  OpContext again = op;
  again.seq += 1u << 20;  // a sequence number no other call of the test uses
  auto& own = blockData[static_cast<size_t>(comm.rank())];
  hostReduceScatterBlocksInto(comm, again, {nullptr, count, type, rop}, blocks, own.data());
  EXPECT_EQ(own, expectedMine) << "into its own block";
}

class ScatterGatherSameAsRing : public ::testing::TestWithParam<FormParam> {};

TEST_P(ScatterGatherSameAsRing, ReduceScatterAndAllgatherBitIdentical) {
  const bool direct = std::get<2>(GetParam()) == AllreduceAlgorithm::Direct;
  runForcedForm(GetParam(), [direct](const Comm& comm, int rank, int n) {
    uint64_t seq = 1;
    forEachReduction([&](DataType type, ReduceOp rop) {
      const size_t counts[] = {1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1), 7, 1031};
      for (size_t count : counts) {
        if (count == 0) continue;
        const int salt = static_cast<int>(type) * 100 + static_cast<int>(rop) * 10;
        std::vector<uint8_t> expected = inputOf(type, rop, count, rank, salt);
        std::vector<uint8_t> got = expected;
        ringReduceScatter(comm, OpContext("reduce_scatter", seq++, std::chrono::seconds(30)),
                          {expected.data(), count, type, rop});
        hostReduceScatter(comm, OpContext("reduce_scatter", seq++, std::chrono::seconds(30)),
                          {got.data(), count, type, rop});
        const Range mine = chunkOf(count, n, rank);
        const size_t e = elementSize(type);
        ASSERT_EQ(std::vector<uint8_t>(got.begin() + mine.offset * e,
                                       got.begin() + (mine.offset + mine.count) * e),
                  std::vector<uint8_t>(expected.begin() + mine.offset * e,
                                       expected.begin() + (mine.offset + mine.count) * e))
            << dataTypeName(type) << " " << reduceOpName(rop) << " count " << count;
        expectListFormAsRing(comm, OpContext("reduce_scatter", seq++, std::chrono::seconds(30)),
                             inputOf(type, rop, count, rank, salt), type, rop,
                             std::vector<uint8_t>(expected.begin() + mine.offset * e,
                                                  expected.begin() + (mine.offset + mine.count) * e),
                             direct || n == 1);
      }
    });
    for (size_t block : {size_t{1}, size_t{13}, size_t{4099}}) {
      std::vector<uint8_t> input(block);
      for (size_t i = 0; i < block; ++i) input[i] = static_cast<uint8_t>(rank * 31 + i * 7);
      std::vector<uint8_t> expected(block * n), got(block * n, 0xee);
      ringAllgather(comm, OpContext("allgather", seq++, std::chrono::seconds(30)),
                    {input.data(), expected.data(), block});
      hostAllgather(comm, OpContext("allgather", seq++, std::chrono::seconds(30)),
                    {input.data(), got.data(), block});
      ASSERT_EQ(got, expected) << "block " << block;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, ScatterGatherSameAsRing,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 12),
                                            ::testing::Values(TransportKind::Loopback,
                                                              TransportKind::Ucx),
                                            ::testing::Values(AllreduceAlgorithm::HalvingDoubling,
                                                              AllreduceAlgorithm::Direct)),
                         [](const auto& info) {
                           return std::string(nameOf(std::get<2>(info.param))) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "_" +
                                  kindName(std::get<1>(info.param));
                         });

// A reduce takes the group's reduce-scatter form, then gathers: the root
// ends with what the ring allreduce gives, bit for bit, and the other ranks'
// buffers are left as they were, whichever form ran.
class ReduceToRootSameAsRing : public ::testing::TestWithParam<FormParam> {};

TEST_P(ReduceToRootSameAsRing, RootGetsTheRingsResultOthersKeepTheirBuffers) {
  runForcedForm(GetParam(), [](const Comm& comm, int rank, int n) {
    uint64_t seq = 1;
    forEachReduction([&](DataType type, ReduceOp rop) {
      for (size_t count : {size_t{1}, static_cast<size_t>(n + 1), size_t{1031}}) {
        for (int root : {0, n - 1}) {
          const int salt = static_cast<int>(type) * 100 + static_cast<int>(rop) * 10 + root;
          const std::vector<uint8_t> input = inputOf(type, rop, count, rank, salt);
          std::vector<uint8_t> expected = input;
          ringAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                        {expected.data(), count, type, rop});
          std::vector<uint8_t> got = input, chunk(input.size()), copy(input.size());
          hostReduce(comm, OpContext("reduce", seq, std::chrono::seconds(30)),
                     {got.data(), count, type, rop}, root, {chunk.data(), copy.data()});
          seq += 2;  // its reduce-scatter and its gather
          ASSERT_EQ(got, rank == root ? expected : input)
              << dataTypeName(type) << " " << reduceOpName(rop) << " count " << count << " root "
              << root;
        }
      }
    });
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, ReduceToRootSameAsRing,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5),
                                            ::testing::Values(TransportKind::Loopback,
                                                              TransportKind::Ucx),
                                            ::testing::Values(AllreduceAlgorithm::Auto,
                                                              AllreduceAlgorithm::Ring,
                                                              AllreduceAlgorithm::HalvingDoubling,
                                                              AllreduceAlgorithm::Direct)),
                         [](const auto& info) {
                           return std::string(nameOf(std::get<2>(info.param))) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "_" +
                                  kindName(std::get<1>(info.param));
                         });

// RINGREDUCE_ALGORITHM=halving_doubling runs halving/doubling on any group
// size, not the ring: counted in messages on the virtual-time network (the
// fold's and unfold's one per folded rank, one per virtual rank and step).
TEST(ScatterGatherDispatch, ForcedHalvingDoublingFoldsOnAnyGroupSize) {
  for (int n : {3, 5, 6, 7, 12}) {
    const HalvingPlan plan(n);
    const uint64_t expected = 2 * (n - plan.pow2()) + plan.steps() * plan.pow2();
    for (bool gather : {false, true}) {
      SimulatedNetwork network(Topology::singleNode(n), {1e-6, 1e-10, 0}, {5e-6, 1e-9, 0},
                               /*payload=*/false);
      Config config;
      config.payloadFree = true;
      config.spinMicroseconds = 0;
      config.allreduceAlgorithm = AllreduceAlgorithm::HalvingDoubling;
      network.run(config, [&](Transport& transport, int) {
        Workspace workspace;
        const Comm comm{transport, config, workspace};
        const OpContext op("collective", 1, std::chrono::seconds(30));
        if (gather) {
          hostAllgather(comm, op, {nullptr, nullptr, 4096});
        } else {
          hostReduceScatter(comm, op, {nullptr, 4096, DataType::Float32, ReduceOp::Sum});
        }
      });
      EXPECT_EQ(network.messages(), expected) << n << (gather ? " allgather" : " reduce_scatter");
    }
  }
}
