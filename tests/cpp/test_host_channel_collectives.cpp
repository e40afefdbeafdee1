// The collectives over the host channel other than the allreduce
// (algorithms/host_channel/*.h): results at world 2, 3 and 4, messages
// larger than a buffer (pieces), the same bits on every rank, several
// collectives in a row sharing the buffers, a mismatch between two
// collectives, a timeout and a departure (a death ends the same wait,
// HostChannel::awaitPeers: test_host_channel.cpp). Ranks are threads of
// this process, each with its own channel (mapping, doorbell, process fds).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/scatter_gather.h"
#include "algorithms/host_channel/allgather.h"
#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/allreduce.h"
#include "algorithms/host_channel/alltoall.h"
#include "algorithms/host_channel/barrier.h"
#include "algorithms/host_channel/broadcast.h"
#include "algorithms/host_channel/large_broadcast.h"
#include "algorithms/host_channel/gather.h"
#include "algorithms/host_channel/reduce.h"
#include "algorithms/host_channel/reduce_scatter.h"
#include "algorithms/host_channel/turn.h"
#include "core/base/cpu_contention.h"
#include "core/base/errors.h"
#include "algorithms/workspace.h"
#include "core/plan/partition.h"
#include "transport/host/host_channel.h"
#include "transport/rendezvous/in_memory_store.h"
#include "transport/loopback/loopback_transport.h"
#include "host_channel_ranks.h"
#include "rank_errors.h"

namespace ringreduce {
namespace {

using namespace std::chrono_literals;

using namespace channel_test;

// Sizes around a buffer: less, exactly one, several with a remainder.
const size_t kSizes[] = {1, 100, kBufferBytes, 3 * kBufferBytes + 17};

// The flat form (one output, block r at r * block) and the blocks form
// (a buffer per rank, as torch's list of tensors), each also in place.
TEST(HostChannelCollectives, AllgatherPutsEveryBlockInPlaceAtEveryWorldAndSize) {
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (size_t block : kSizes) {
        for (bool separate : {false, true}) {
          for (bool inPlace : {false, true}) {
            ++seq;
            const std::vector<uint8_t> input = bytesOf(r, block, seq);
            std::vector<uint8_t> flat(separate ? 0 : block * static_cast<size_t>(n), 0);
            std::vector<std::vector<uint8_t>> lists(separate ? static_cast<size_t>(n) : 0,
                                                    std::vector<uint8_t>(block, 0));
            std::vector<void*> blocks;
            for (int q = 0; q < n; ++q) {
              blocks.push_back(separate ? lists[q].data()
                                        : flat.data() + static_cast<size_t>(q) * block);
            }
            const void* in = input.data();
            if (inPlace) {
              std::memcpy(blocks[r], input.data(), block);
              in = blocks[r];
            }
            const Comm comm = ranks.comm(r);
            ASSERT_TRUE(hostChannelAllgatherApplies(comm, block));
            const OpContext op = ranks.enter(r, "allgather", seq, 1);
            if (separate) {
              hostChannelAllgatherBlocks(comm, op, in, blocks, block);
            } else {
              hostChannelAllgather(comm, op, {in, flat.data(), block});
            }
            for (int q = 0; q < n; ++q) {
              const std::vector<uint8_t> expected = bytesOf(q, block, seq);
              ASSERT_EQ(0, std::memcmp(blocks[q], expected.data(), block))
                  << "world " << n << ", block " << block << ", rank " << q << "'s block"
                  << (separate ? ", a buffer per rank" : ", one output")
                  << (inPlace ? ", in place" : "");
            }
          }
        }
      }
    });
    expectNoErrors(errors);
  }
}

// 256 KiB buffers, and cross-memory attach off on the last rank where asked.
auto quarterMiBBuffers(int n, bool offOnOneRank) {
  return [n, offOnOneRank](int r, HostChannel::Options& o) {
    o.bufferBytes = size_t{256} << 10;
    o.crossMemory = !(offOnOneRank && r == n - 1);
  };
}

// From kCrossMemoryGatherFromBytes a block is read from the peer's memory
// in place, in one turn (the buffers here 256 KiB): every form of the
// all-gather and the all-to-all, at every world, lands every block where it
// belongs. Where one rank turns cross-memory attach off, every rank's
// channel says so and the same calls go through the buffers, alike.
TEST(HostChannelCollectives, BlocksReadFromThePeersMemoryLandInPlaceOrGoThroughTheBuffers) {
  for (bool offOnOneRank : {false, true}) {
    for (int n : {2, 3, 4}) {
      Ranks ranks(n, 100us, ChannelStores::Auto, quarterMiBBuffers(n, offOnOneRank));
      const auto errors = ranks.run([&](int r) {
        ASSERT_EQ(ranks.channel(r).peersReadable(), !offOnOneRank);
        uint64_t seq = 0;
        for (size_t block : {kCrossMemoryGatherFromBytes, kCrossMemoryGatherFromBytes + 3}) {
          ASSERT_EQ(crossMemoryGatherApplies(ranks.channel(r), block), !offOnOneRank);
          ASSERT_TRUE(hostChannelAllgatherApplies(ranks.comm(r), block));
          // flat, flat in place, separate, all-to-all, gather to the last rank
          for (int form = 0; form < 5; ++form) {
            ++seq;
            const size_t un = static_cast<size_t>(n);
            const std::vector<uint8_t> input = bytesOf(r, form == 3 ? block * un : block, seq);
            std::vector<uint8_t> output(block * un, 0);
            std::vector<std::vector<uint8_t>> lists(un, std::vector<uint8_t>(block, 0));
            const Comm comm = ranks.comm(r);
            const OpContext op = ranks.enter(r, "gather", seq, static_cast<uint32_t>(form));
            const auto blockOf = [&](int q) {
              return form == 2 ? lists[q].data() : output.data() + static_cast<size_t>(q) * block;
            };
            if (form == 0) hostChannelAllgather(comm, op, {input.data(), output.data(), block});
            if (form == 1) {
              std::memcpy(blockOf(r), input.data(), block);
              hostChannelAllgather(comm, op, {blockOf(r), output.data(), block});
            }
            if (form == 2) {
              std::vector<void*> blocks;
              for (int q = 0; q < n; ++q) blocks.push_back(lists[q].data());
              hostChannelAllgatherBlocks(comm, op, input.data(), blocks, block);
            }
            if (form == 3) hostChannelAlltoall(comm, op, {input.data(), output.data(), block});
            if (form == 4) {
              std::vector<void*> blocks;
              for (int q = 0; r == n - 1 && q < n; ++q) blocks.push_back(blockOf(q));
              hostChannelGatherBlocks(comm, op, input.data(), blocks, block, n - 1);
              if (r != n - 1) {
                ASSERT_TRUE(std::all_of(output.begin(), output.end(), [](uint8_t b) { return b == 0; }));
                continue;
              }
            }
            for (int q = 0; q < n; ++q) {
              const std::vector<uint8_t> theirs = bytesOf(q, form == 3 ? block * un : block, seq);
              const size_t at = form == 3 ? static_cast<size_t>(r) * block : 0;
              ASSERT_EQ(0, std::memcmp(blockOf(q), theirs.data() + at, block))
                  << "world " << n << ", block " << block << ", form " << form << ", rank " << q
                  << (offOnOneRank ? ", through the buffers" : ", read in place");
            }
          }
        }
      });
      expectNoErrors(errors);
    }
  }
}

// Where the buffers could carry them, gathers that may read in place time
// both forms after a round's warm-up (core/plan/gather_forms.h) and then
// every rank takes the one they agreed on, whatever each saw: every call of
// the round, trials and after, lands every block in place, and the ranks'
// decisions are one.
TEST(HostChannelCollectives, GathersTryBothFormsAndEveryRankTakesTheOneAgreed) {
  constexpr int n = 3;
  Ranks ranks(n, 100us, ChannelStores::Auto, quarterMiBBuffers(n, false));
  const size_t block = kCrossMemoryGatherFromBytes;
  std::vector<GatherForms::Form> decided(n);
  const auto errors = ranks.run([&](int r) {
    ASSERT_TRUE(crossMemoryGatherApplies(ranks.channel(r), block));
    for (uint64_t seq = 1; seq <= GatherForms::kWarmUp + 2 * GatherForms::kTrials + 3; ++seq) {
      const bool alltoall = seq % 3 == 0;  // the two ops share the size class
      const std::vector<uint8_t> input = bytesOf(r, alltoall ? block * n : block, seq);
      std::vector<uint8_t> output(block * n, 0);
      const OpContext op = ranks.enter(r, "gather", seq, alltoall ? 1 : 2);
      if (alltoall) {
        hostChannelAlltoall(ranks.comm(r), op, {input.data(), output.data(), block});
      } else {
        hostChannelAllgather(ranks.comm(r), op, {input.data(), output.data(), block});
      }
      for (int q = 0; q < n; ++q) {
        const std::vector<uint8_t> theirs = bytesOf(q, alltoall ? block * n : block, seq);
        const size_t at = alltoall ? static_cast<size_t>(r) * block : 0;
        ASSERT_EQ(0, std::memcmp(output.data() + static_cast<size_t>(q) * block,
                                 theirs.data() + at, block))
            << "call " << seq << ", rank " << q << "'s block";
      }
    }
    decided[static_cast<size_t>(r)] = ranks.channel(r).gatherForms().decided(block);
  });
  expectNoErrors(errors);
  EXPECT_EQ(decided[1], decided[0]);
  EXPECT_EQ(decided[2], decided[0]);
}

// Rank r's float input: random, so that sums differ with the order of
// their terms; the same on every run.
std::vector<float> randomFloats(int r, size_t count, uint64_t k) {
  std::mt19937 gen(static_cast<unsigned>(r * 1000 + k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// Element i of the sum of every rank's input, added in rank order.
float sumInRankOrder(int n, size_t count, uint64_t k, size_t i) {
  float sum = randomFloats(0, count, k)[i];
  for (int q = 1; q < n; ++q) sum += randomFloats(q, count, k)[i];
  return sum;
}

TEST(HostChannelCollectives, ReduceScatterGivesEachRankItsChunkSummedInRankOrder) {
  for (int n : {2, 3, 4}) {
    // Uneven chunks, and chunks of several pieces (a slot is a buffer / n).
    for (size_t count : {size_t{7}, size_t{1001}, 3 * kBufferBytes / sizeof(float) + 5}) {
      Ranks ranks(n);
      std::vector<std::vector<float>> results(static_cast<size_t>(n));
      std::vector<std::vector<float>> expected(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        const Range mine = chunkOf(count, n, r);
        for (size_t i = 0; i < mine.count; ++i) {
          expected[r].push_back(sumInRankOrder(n, count, 1, mine.offset + i));
        }
      }
      const auto errors = ranks.run([&](int r) {
        const std::vector<float> input = randomFloats(r, count, 1);
        results[r].assign(chunkOf(count, n, r).count, 0.0f);
        const Comm comm = ranks.comm(r);
        ASSERT_TRUE(hostReduceScatterInto(
            comm, ranks.enter(r, "reduce_scatter", 1, 2),
            {const_cast<float*>(input.data()), count, DataType::Float32, ReduceOp::Sum},
            results[r].data()));
      });
      expectNoErrors(errors);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[r].size(), expected[r].size());
        // Bit for bit: the same expression as a reference in rank order.
        EXPECT_EQ(0, std::memcmp(results[r].data(), expected[r].data(),
                                 expected[r].size() * sizeof(float)))
            << "world " << n << ", " << count << " floats, rank " << r;
      }
    }
  }
}

TEST(HostChannelCollectives, ReduceScatterOfBlocksMayWriteIntoItsOwnBlock) {
  const int n = 3;
  const size_t perRank = kBufferBytes / sizeof(int32_t) + 3;  // several pieces
  Ranks ranks(n);
  const auto errors = ranks.run([&](int r) {
    std::vector<std::vector<int32_t>> blocks(n, std::vector<int32_t>(perRank));
    std::vector<const void*> pointers;
    for (int j = 0; j < n; ++j) {
      for (size_t i = 0; i < perRank; ++i) blocks[j][i] = static_cast<int32_t>(r * 1000 + j * 10 + i);
      pointers.push_back(blocks[j].data());
    }
    ASSERT_TRUE(hostReduceScatterBlocksInto(
        ranks.comm(r), ranks.enter(r, "reduce_scatter", 1, 3),
        {nullptr, perRank * n, DataType::Int32, ReduceOp::Max}, pointers, blocks[r].data()));
    for (size_t i = 0; i < perRank; ++i) {
      ASSERT_EQ(blocks[r][i], static_cast<int32_t>((n - 1) * 1000 + r * 10 + i)) << i;
    }
  });
  expectNoErrors(errors);
}

// Part sizes of a coalesced block: tiny ones, one that crosses a turn, and
// together several turns (the buffer is 4 KiB), with a part of no bytes.
const std::vector<size_t> kPartBytes = {3, 0, 100, kBufferBytes + 5, 64, 2 * kBufferBytes + 1};
// Parts of kCrossMemoryGatherFromBytes or more together: read from the
// peers' tensors in place (one record per part), a zero-byte part among them.
const std::vector<size_t> kLargePartBytes = {kCrossMemoryGatherFromBytes / 2 + 3, 0, 1,
                                             kCrossMemoryGatherFromBytes / 2 + 5};

// A block of several tensors as one message: every rank's part i lands at
// r * bytes of output i, the stretches of a turn spanning parts, a part
// crossing turns; some parts in place (the input is this rank's own place).
TEST(HostChannelCollectives, AllgatherOfPartsPutsEveryRanksPartInItsOutput) {
  for (int n : {2, 3}) {
    for (const std::vector<size_t>& sizes :
         {std::vector<size_t>{5, 7, 1}, kPartBytes, std::vector<size_t>{kBufferBytes},
          kLargePartBytes}) {
      Ranks ranks(n);
      const auto errors = ranks.run([&](int r) {
        size_t total = 0;
        for (size_t b : sizes) total += b;
        ASSERT_EQ(hostChannelAllgatherPartsReadInPlace(ranks.comm(r), sizes.size(), total),
                  total >= kCrossMemoryGatherFromBytes);
        for (uint64_t seq = 1; seq <= 2; ++seq) {
          const bool inPlace = seq == 2;  // every other part in place
          std::vector<std::vector<uint8_t>> inputs, outputs;
          std::vector<AllgatherPart> parts;
          for (size_t i = 0; i < sizes.size(); ++i) {
            inputs.push_back(bytesOf(r, sizes[i], seq * 100 + i));
            outputs.emplace_back(sizes[i] * static_cast<size_t>(n), 0);
          }
          for (size_t i = 0; i < sizes.size(); ++i) {
            uint8_t* own = outputs[i].data() + static_cast<size_t>(r) * sizes[i];
            const void* in = inputs[i].data();
            if (inPlace && i % 2 == 0) {
              std::copy(inputs[i].begin(), inputs[i].end(), own);
              in = own;
            }
            parts.push_back({in, outputs[i].data(), sizes[i]});
          }
          hostChannelAllgatherParts(ranks.comm(r), ranks.enter(r, "allgather", seq, 4), parts);
          for (size_t i = 0; i < sizes.size(); ++i) {
            for (int q = 0; q < n; ++q) {
              const std::vector<uint8_t> expected = bytesOf(q, sizes[i], seq * 100 + i);
              ASSERT_EQ(0, std::memcmp(outputs[i].data() + static_cast<size_t>(q) * sizes[i],
                                       expected.data(), sizes[i]))
                  << "world " << n << ", part " << i << " of " << sizes[i] << " bytes, rank "
                  << q << "'s" << (inPlace ? ", in place" : "");
            }
          }
        }
      });
      expectNoErrors(errors);
    }
  }
}

// torch's all_gather_coalesced: the same message, each rank's part i landing
// in a buffer of its own (one output list per rank), some in place.
TEST(HostChannelCollectives, AllgatherOfListPartsPutsEveryRanksPartInItsOwnBuffer) {
  for (int n : {2, 3}) {
   for (const std::vector<size_t>& partBytes : {kPartBytes, kLargePartBytes}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      for (uint64_t seq = 1; seq <= 2; ++seq) {
        const bool inPlace = seq == 2;  // every other part in place
        // outputs[i][q]: rank q's part i.
        std::vector<std::vector<std::vector<uint8_t>>> outputs(partBytes.size());
        std::vector<std::vector<uint8_t>> inputs;
        std::vector<AllgatherListPart> parts;
        std::vector<std::vector<void*>> places(partBytes.size());
        for (size_t i = 0; i < partBytes.size(); ++i) {
          inputs.push_back(bytesOf(r, partBytes[i], seq * 100 + i));
          for (int q = 0; q < n; ++q) {
            outputs[i].emplace_back(partBytes[i] + 1, 0xEE);  // one byte past: untouched
            places[i].push_back(outputs[i].back().data());
          }
          AllgatherListPart part{inputs[i].data(), places[i].data(), partBytes[i]};
          if (inPlace && i % 2 == 0) {
            std::copy(inputs[i].begin(), inputs[i].end(), outputs[i][r].begin());
            part.input = outputs[i][r].data();
          }
          parts.push_back(part);
        }
        hostChannelAllgatherListParts(ranks.comm(r), ranks.enter(r, "allgather", seq, 4), parts);
        for (size_t i = 0; i < partBytes.size(); ++i) {
          for (int q = 0; q < n; ++q) {
            const std::vector<uint8_t> expected = bytesOf(q, partBytes[i], seq * 100 + i);
            ASSERT_EQ(0, std::memcmp(outputs[i][q].data(), expected.data(), partBytes[i]))
                << "world " << n << ", part " << i << " of " << partBytes[i] << " bytes, rank "
                << q << "'s" << (inPlace ? ", in place" : "");
            ASSERT_EQ(0xEE, outputs[i][q].back()) << "written past part " << i << " of rank " << q;
          }
        }
      }
    });
    expectNoErrors(errors);
   }
  }
}

// The same for a reduce-scatter of several tensors of one dtype: each rank's
// chunk of each part, summed in rank order bit for bit as one tensor's
// would be; uneven chunks (counts not a multiple of n) and parts whose
// chunks cross turns; the inputs left as they were.
TEST(HostChannelCollectives, ReduceScatterOfPartsGivesEachRankItsChunkOfEachPart) {
  const std::vector<size_t> counts = {1, 7, 0, kBufferBytes / sizeof(float) + 3, 10,
                                      2 * kBufferBytes / sizeof(float) + 1};
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(n));
    const auto errors = ranks.run([&](int r) {
      std::vector<std::vector<float>> inputs;
      std::vector<ReduceScatterPart> parts;
      results[r].resize(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) {
        inputs.push_back(randomFloats(r, counts[i], 10 + i));
        results[r][i].assign(chunkOf(counts[i], n, r).count, 0.0f);
      }
      const std::vector<std::vector<float>> kept = inputs;
      for (size_t i = 0; i < counts.size(); ++i) {
        parts.push_back({inputs[i].data(), results[r][i].data(), counts[i]});
      }
      hostChannelReduceScatterParts(ranks.comm(r), ranks.enter(r, "reduce_scatter", 1, 5),
                                    DataType::Float32, ReduceOp::Sum, parts);
      EXPECT_EQ(inputs, kept) << "rank " << r << "'s inputs changed";
    });
    expectNoErrors(errors);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < counts.size(); ++i) {
        const Range mine = chunkOf(counts[i], n, r);
        std::vector<float> expected;
        for (size_t k = 0; k < mine.count; ++k) {
          expected.push_back(sumInRankOrder(n, counts[i], 10 + i, mine.offset + k));
        }
        ASSERT_EQ(results[r][i].size(), expected.size());
        EXPECT_EQ(0, std::memcmp(results[r][i].data(), expected.data(),
                                 expected.size() * sizeof(float)))
            << "world " << n << ", part " << i << " of " << counts[i] << " floats, rank " << r;
      }
    }
  }
}

TEST(HostChannelCollectives, ReduceScatterAveragesOnce) {
  const int n = 4;
  const size_t count = 4 * 300;
  Ranks ranks(n);
  const auto errors = ranks.run([&](int r) {
    std::vector<double> input(count);
    for (size_t i = 0; i < count; ++i) input[i] = static_cast<double>(r + 1) * static_cast<double>(i);
    std::vector<double> output(count / n);
    ASSERT_TRUE(hostReduceScatterInto(ranks.comm(r), ranks.enter(r, "reduce_scatter", 1, 4),
                                      {input.data(), count, DataType::Float64, ReduceOp::Avg},
                                      output.data()));
    const Range mine = chunkOf(count, n, r);
    for (size_t i = 0; i < mine.count; ++i) {
      ASSERT_EQ(output[i], 2.5 * static_cast<double>(mine.offset + i)) << i;  // (1+2+3+4)/4
    }
  });
  expectNoErrors(errors);
}

TEST(HostChannelCollectives, BroadcastCopiesTheRootsMessageFromAnyRoot) {
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (int root : {0, n - 1}) {
        for (size_t bytes : kSizes) {
          ++seq;
          std::vector<uint8_t> data = bytesOf(r, bytes, seq);
          const Comm comm = ranks.comm(r);
          ASSERT_TRUE(hostChannelBroadcastApplies(comm, bytes));
          hostBroadcast(comm, ranks.enter(r, "broadcast", seq, 5), {data.data(), bytes, root});
          ASSERT_EQ(data, bytesOf(root, bytes, seq))
              << "world " << n << ", root " << root << ", " << bytes << " B";
        }
      }
    });
    expectNoErrors(errors);
  }
}

// Beyond three buffers (here 4 KiB each) a broadcast takes the channel's
// large broadcast (large_broadcast.h): through the buffers in as many turns
// as it takes where the root sees the cores free or a rank cannot reach the
// others' memory, else the receivers read the root's tensor in place. From
// either end of the group, at sizes of four buffers up to many and a
// remainder, every rank ends with the root's bytes in every case; three
// buffers or less never take it.
TEST(HostChannelCollectives, ABroadcastBeyondTheBuffersTakesTheChannelInEitherForm) {
  for (bool contended : {false, true}) {
    for (bool offOnOneRank : {false, true}) {
      for (int n : {2, 3, 4}) {
        Ranks ranks(n, 100us, ChannelStores::Auto, [&](int r, HostChannel::Options& o) {
          o.crossMemory = !(offOnOneRank && r == n - 1);
          o.contended = [contended] { return contended; };
        });
        const auto errors = ranks.run([&](int r) {
          uint64_t seq = 0;
          for (int root : {0, n - 1}) {
            ASSERT_FALSE(hostChannelBroadcastIsLarge(ranks.comm(r), kBufferBytes * 3));
            for (size_t bytes : {kBufferBytes * 3 + 1, kBufferBytes * 4, kBufferBytes * 4 + 1,
                                 kBufferBytes * 9 + 17, (size_t{1} << 20) + 5}) {
              ++seq;
              std::vector<uint8_t> data = bytesOf(r, bytes, seq);
              const Comm comm = ranks.comm(r);
              ASSERT_TRUE(hostChannelBroadcastIsLarge(comm, bytes));
              ASSERT_TRUE(hostChannelBroadcastApplies(comm, bytes));
              hostBroadcast(comm, ranks.enter(r, "broadcast", seq, 5), {data.data(), bytes, root});
              ASSERT_EQ(data, bytesOf(root, bytes, seq))
                  << "world " << n << ", root " << root << ", " << bytes << " B"
                  << (contended && !offOnOneRank ? ", read in place" : ", through the buffers");
            }
          }
        });
        expectNoErrors(errors);
      }
    }
  }
}

// The root reads in place only where each rank gets a quarter of a core or
// less (load level 2 and up: 4 runnable tasks per core) and every rank can
// reach every other's memory.
TEST(HostChannelCollectives, ALargeBroadcastIsReadInPlaceOnlyUnderHeavyLoad) {
  for (int level = 0; level <= CpuContention::kTopLevel; ++level) {
    EXPECT_EQ(largeBroadcastForm(level, true), level >= 2 ? LargeBroadcastForm::ReadInPlace
                                                          : LargeBroadcastForm::ThroughBuffers)
        << "level " << level;
    EXPECT_EQ(largeBroadcastForm(level, false), LargeBroadcastForm::ThroughBuffers)
        << "level " << level;
  }
}

// The root decides the form from its own view of the cores and says so in
// its record: whichever ranks see the cores wanted, every receiver ends with
// the root's bytes.
TEST(HostChannelCollectives, ABroadcastsReceiversFollowTheRootsViewOfTheCores) {
  for (int contendedRank : {-1, 0, 1, 2}) {
    constexpr int n = 3;
    Ranks ranks(n, 100us, ChannelStores::Auto, [&](int r, HostChannel::Options& o) {
      const bool contended = r == contendedRank;
      o.contended = [contended] { return contended; };
    });
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (int root = 0; root < n; ++root) {
        const size_t bytes = (size_t{1} << 20) + 5;
        std::vector<uint8_t> data = bytesOf(r, bytes, ++seq);
        ASSERT_TRUE(hostChannelBroadcastIsLarge(ranks.comm(r), bytes));
        hostBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", seq, 5), {data.data(), bytes, root});
        ASSERT_EQ(data, bytesOf(root, bytes, seq))
            << "root " << root << ", the cores wanted on rank " << contendedRank;
      }
    });
    expectNoErrors(errors);
  }
}

// The receivers' reads pin every page of the root's tensor: a root that has
// them read in place notes its tensor, so that one of 4 MiB or more that
// comes back goes onto 2 MiB pages (core/base/huge_pages.h), as the in-place
// gathers' blocks do; through the buffers nobody's tensor is noted.
TEST(HostChannelCollectives, ALargeBroadcastReadInPlaceNotesOnlyTheRootsTensor) {
  for (bool contended : {false, true}) {
    Ranks ranks(2, 100us, ChannelStores::Auto, [&](int, HostChannel::Options& o) {
      o.contended = [contended] { return contended; };
    });
    const size_t bytes = HugePageAdvisor::kMinBytes + 64;
    const auto errors = ranks.run([&](int r) {
      std::vector<uint8_t> data = bytesOf(r, bytes, 1);
      for (uint64_t seq = 1; seq <= 2; ++seq) {
        ASSERT_TRUE(hostChannelBroadcastIsLarge(ranks.comm(r), bytes));
        hostBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", seq, 5), {data.data(), bytes, 0});
        ASSERT_EQ(data, bytesOf(0, bytes, 1)) << (contended ? "read in place" : "through the buffers");
      }
    });
    expectNoErrors(errors);
    EXPECT_EQ(ranks.workspace(0).callerBuffers().buffersSeen(), contended ? 1u : 0u)
        << (contended ? "read in place" : "through the buffers");
    EXPECT_EQ(ranks.workspace(1).callerBuffers().buffersSeen(), 0u);
  }
}

// A receiver that leaves before it puts up where its tensor lies: the root's
// wait for it ends, naming it, as every channel collective's does; in either
// form (through the buffers, or with its receivers reading its tensor in place).
TEST(HostChannelCollectives, ABroadcastBeyondTheBuffersEndsWhenAReceiverLeaves) {
  for (bool contended : {false, true}) {
    Ranks ranks(2, 0us, ChannelStores::Auto, [&](int, HostChannel::Options& o) {
      o.contended = [contended] { return contended; };
    });
    const size_t bytes = kBufferBytes * 8;
    const auto errors = ranks.run([&](int r) {
      if (r == 1) {
        while (!ranks.channel(0).asleep(0)) std::this_thread::yield();
        ranks.leave(1);
        return;
      }
      std::vector<uint8_t> data = bytesOf(0, bytes, 1);
      ASSERT_TRUE(hostChannelBroadcastIsLarge(ranks.comm(0), bytes));
      hostBroadcast(ranks.comm(0), ranks.enter(0, "broadcast", 1, 5, 60s), {data.data(), bytes, 0});
    });
    EXPECT_NE(errors[0].find("broadcast #1 on rank 0: rank 1 has left the group"), std::string::npos)
        << (contended ? "read in place: " : "through the buffers: ") << errors[0];
  }
}

// A root that has its receivers read its tensor in place: a receiver that
// never comes times it out naming that rank, one in another collective
// fails both, each naming the other's collective, and an abort from another
// thread ends the root's wait with the abort's reason (not its deadline's).
TEST(HostChannelCollectives, ABroadcastReadInPlaceNamesAReceiverNeverSeenOrInAnotherCollective) {
  const size_t bytes = kBufferBytes * 8;
  const auto contended = [](int, HostChannel::Options& o) { o.contended = [] { return true; }; };
  {
    Ranks ranks(3, 0us, ChannelStores::Auto, contended);
    const auto errors = ranks.run([&](int r) {
      if (r == 2) return;  // never comes
      std::vector<uint8_t> data = bytesOf(r, bytes, 1);
      hostBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", 1, 5, 300ms), {data.data(), bytes, 0});
    });
    EXPECT_NE(errors[0].find("broadcast #1 timed out after 300 ms on rank 0"), std::string::npos)
        << errors[0];
    EXPECT_NE(errors[0].find("rank(s) not seen in broadcast #1: 2"), std::string::npos) << errors[0];
  }
  {
    Ranks ranks(2, 0us, ChannelStores::Auto, contended);
    const auto errors = ranks.run([&](int r) {
      if (r == 1) return hostBarrier(ranks.comm(r), ranks.enter(r, "barrier", 1, 6, 5s));
      std::vector<uint8_t> data = bytesOf(r, bytes, 1);
      hostBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", 1, 5, 5s), {data.data(), bytes, 0});
    });
    EXPECT_NE(errors[0].find("rank 1 is in a different collective: it is in op-6 #1"),
              std::string::npos)
        << errors[0];
    EXPECT_NE(errors[1].find("rank 0 is in a different collective: it is in op-5 #1"),
              std::string::npos)
        << errors[1];
  }
  {
    Ranks ranks(2, 0us, ChannelStores::Auto, contended);
    std::thread aborter([&] {
      while (!ranks.channel(0).asleep(0)) std::this_thread::yield();
      ranks.channel(0).abort("process group 'g' was aborted on rank 0");
    });
    const auto errors = ranks.run([&](int r) {
      if (r == 1) return;  // never comes
      std::vector<uint8_t> data = bytesOf(r, bytes, 1);
      hostBroadcast(ranks.comm(r), ranks.enter(r, "broadcast", 1, 5, 60s), {data.data(), bytes, 0});
    });
    aborter.join();
    EXPECT_NE(errors[0].find("broadcast #1 on rank 0: process group 'g' was aborted on rank 0"),
              std::string::npos)
        << errors[0];
  }
}

// A receiver whose wait for the root failed (its timeout) has put up where
// its tensor lies: a root that comes after it gave up fails naming it, and
// the tensor its caller has back is as it was.
TEST(HostChannelCollectives, ABroadcastsRootComingAfterAReceiverGaveUpLeavesItsTensorAlone) {
  Ranks ranks(2);
  const size_t bytes = kBufferBytes * 8;
  std::atomic<bool> receiverFailed{false};
  const std::vector<uint8_t> receiversOwn = bytesOf(1, bytes, 1);
  std::vector<uint8_t> received = receiversOwn;
  const auto errors = ranks.run([&](int r) {
    if (r == 1) {
      try {
        hostBroadcast(ranks.comm(1), ranks.enter(1, "broadcast", 1, 5, 50ms),
                      {received.data(), bytes, 0});
      } catch (const std::exception& e) {
        ranks.channel(1).fail(e.what());  // as the engine does with a failed collective
        receiverFailed = true;
        throw;
      }
      return;
    }
    while (!receiverFailed) std::this_thread::sleep_for(1ms);
    std::vector<uint8_t> data = bytesOf(0, bytes, 1);
    hostBroadcast(ranks.comm(0), ranks.enter(0, "broadcast", 1, 5), {data.data(), bytes, 0});
  });
  EXPECT_NE(errors[1].find("broadcast #1 timed out after 50 ms"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("broadcast #1 on rank 0 failed: rank 1 gave up on the group"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(received, receiversOwn);
}

TEST(HostChannelCollectives, NoRankLeavesABarrierBeforeTheLastArrives) {
  const int n = 3;
  Ranks ranks(n);
  std::atomic<int> arrived{0};
  const auto errors = ranks.run([&](int r) {
    for (uint64_t k = 1; k <= 50; ++k) {
      // A different rank is late each time.
      if (static_cast<int>(k % n) == r) std::this_thread::sleep_for(std::chrono::microseconds(300));
      arrived.fetch_add(1);
      hostBarrier(ranks.comm(r), ranks.enter(r, "barrier", k, 6));
      if (arrived.load() < static_cast<int>(k) * n) {
        throw std::runtime_error("left barrier " + std::to_string(k) + " with " +
                                 std::to_string(arrived.load()) + " arrivals");
      }
    }
  });
  expectNoErrors(errors);
}

TEST(HostChannelCollectives, AlltoallDeliversBlockJOfRankQToRankJ) {
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (size_t block : {size_t{1}, size_t{333}, kBufferBytes}) {  // kBufferBytes: n pieces
        ++seq;
        const std::vector<uint8_t> input = bytesOf(r, block * n, seq);
        std::vector<uint8_t> output(block * n, 0);
        hostChannelAlltoall(ranks.comm(r), ranks.enter(r, "alltoall", seq, 7),
                            {input.data(), output.data(), block});
        for (int q = 0; q < n; ++q) {
          const std::vector<uint8_t> theirs = bytesOf(q, block * n, seq);
          ASSERT_EQ(0, std::memcmp(output.data() + static_cast<size_t>(q) * block,
                                   theirs.data() + static_cast<size_t>(r) * block, block))
              << "world " << n << ", block " << block << " from rank " << q;
        }
      }
    });
    expectNoErrors(errors);
  }
}

// Rank q sends bytesTo(q, j) bytes to rank j: zero for some pairs, and
// sizes that differ between ranks; `scale` takes them to several pieces.
size_t bytesTo(int q, int j, size_t scale) {
  return static_cast<size_t>((q + 2 * j) % 3) * scale * static_cast<size_t>(1 + q);
}

BlockLayout layoutOf(const std::vector<size_t>& sizes) {
  BlockLayout layout;
  size_t offset = 0;
  for (size_t bytes : sizes) {
    layout.offsets.push_back(offset);
    layout.bytes.push_back(bytes);
    offset += bytes;
  }
  return layout;
}

TEST(HostChannelCollectives, UnevenAlltoallAgreesOnItsTurnsOrDeclinesOnEveryRank) {
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      // 1 and 100 B: one turn; 700: several; 3000: more than
      // kHostChannelMaxPieces turns for the largest block (declined, unless
      // a rank may not decline: `finisher`, then every rank takes them all).
      for (int finisher = -1; finisher < n; ++finisher) {
        for (size_t scale : {size_t{1}, size_t{100}, size_t{700}, size_t{3000}}) {
          ++seq;
          std::vector<size_t> sends, recvs;
          for (int j = 0; j < n; ++j) sends.push_back(bytesTo(r, j, scale));
          for (int q = 0; q < n; ++q) recvs.push_back(bytesTo(q, r, scale));
          const BlockLayout send = layoutOf(sends), recv = layoutOf(recvs);
          std::vector<uint8_t> input;
          for (int j = 0; j < n; ++j) {
            const std::vector<uint8_t> block = bytesOf(r * n + j, sends[j], seq);
            input.insert(input.end(), block.begin(), block.end());
          }
          std::vector<uint8_t> output(recv.offsets.back() + recv.bytes.back(), 0);
          const bool done = hostChannelUnevenAlltoall(
              ranks.comm(r), ranks.enter(r, "alltoall", seq, 7),
              {input.data(), send, output.data(), recv}, /*mayDecline=*/r != finisher);
          size_t largest = 0;
          for (int q = 0; q < n; ++q) {
            for (int j = 0; j < n; ++j) largest = std::max(largest, bytesTo(q, j, scale));
          }
          // A turn: half the buffer, the header (n sizes, two words, n
          // addresses, in whole cache lines) and a slot per rank.
          const size_t header = ((2 * static_cast<size_t>(n) + 2) * 8 + 63) / 64 * 64;
          const size_t slot = (kBufferBytes / 2 - header) / static_cast<size_t>(n);
          const auto fitsTurns = [&](size_t b) {
            return (b + slot - 1) / slot <= kHostChannelMaxPieces;
          };
          ASSERT_EQ(done, fitsTurns(largest) || finisher >= 0)
              << "world " << n << ", scale " << scale << ", finisher " << finisher;
          // What a caller asks before it runs it where it cannot decline.
          ASSERT_EQ(hostChannelUnevenAlltoallFits(ranks.comm(r), send, recv),
                    std::all_of(sends.begin(), sends.end(), fitsTurns) &&
                        std::all_of(recvs.begin(), recvs.end(), fitsTurns));
          for (int q = 0; done && q < n; ++q) {
            ASSERT_EQ(0, std::memcmp(output.data() + recv.offsets[q],
                                     bytesOf(q * n + r, recvs[q], seq).data(), recvs[q]))
                << "world " << n << ", scale " << scale << ", from rank " << q;
          }
        }
      }
    });
    expectNoErrors(errors);
  }
}

// Uneven splits with a block of kCrossMemoryGatherFromBytes or more: the
// ranks that send one offer their blocks in place and put none into their
// buffers; the others' go through the buffers in turns; every block lands
// where it belongs, flat or in lists, at every world. Where one rank turns
// cross-memory attach off, every block goes through the buffers, alike.
// The buffers here 256 KiB: through them the large blocks take up to 14 turns.
TEST(HostChannelCollectives, UnevenAlltoallReadsLargeBlocksInPlaceAndTheRestThroughTheBuffers) {
  for (bool offOnOneRank : {false, true}) {
    for (int n : {2, 3, 4}) {
      Ranks ranks(n, 100us, ChannelStores::Auto, quarterMiBBuffers(n, offOnOneRank));
      const auto errors = ranks.run([&](int r) {
        uint64_t seq = 0;
        // every rank large; rank 0 small (it alone through the buffers); a
        // zero-byte block beside large ones
        for (int mix = 0; mix < 3; ++mix) {
          const auto bytesTo = [&](int from, int to) -> size_t {
            if (mix == 1 && from == 0) return 100 + static_cast<size_t>(to);
            if (mix == 2 && from == to) return 0;
            return kCrossMemoryGatherFromBytes / 2 * static_cast<size_t>(from + to + 1) +
                   static_cast<size_t>(from);
          };
          for (bool lists : {false, true}) {
            ++seq;
            std::vector<std::vector<uint8_t>> sends, recvs;
            for (int j = 0; j < n; ++j) sends.push_back(bytesOf(r * n + j, bytesTo(r, j), seq));
            for (int q = 0; q < n; ++q) recvs.emplace_back(bytesTo(q, r), 0);
            const Comm comm = ranks.comm(r);
            const OpContext op = ranks.enter(r, "alltoall", seq, 7);
            // Read in place, no block goes through the buffers in more than
            // one turn, and none is declined; through the buffers they take
            // more turns than it allows, so no rank may decline.
            // Rank 0 publishes ahead (lists, every rank large) from copies
            // of its blocks that it then overwrites: a body run ahead never
            // offers its blocks in place, so its peers take them from its
            // buffers. It may not decline: through them its blocks take
            // more turns than that allows.
            const bool ahead = lists && mix == 0 && r == 0 && !offOnOneRank;
            const bool mayDecline = !offOnOneRank && !ahead;
            if (lists) {
              AllToAllBlocks blocks;
              for (int j = 0; j < n; ++j) {
                blocks.send.push_back(sends[j].data());
                blocks.sendBytes.push_back(sends[j].size());
                blocks.recv.push_back(recvs[j].data());
                blocks.recvBytes.push_back(recvs[j].size());
              }
              if (ahead) {
                std::vector<std::vector<uint8_t>> copies = sends;
                AllToAllBlocks early = blocks;
                for (int j = 0; j < n; ++j) early.send[j] = copies[j].data();
                OpContext publishing = op;
                PublishedAhead published;
                publishing.ahead = &published;
                ASSERT_TRUE(hostChannelUnevenAlltoallBlocks(comm, publishing, early, mayDecline));
                EXPECT_TRUE(published.published);
                for (auto& copy : copies) std::fill(copy.begin(), copy.end(), uint8_t{0xEE});
              }
              ASSERT_TRUE(hostChannelUnevenAlltoallBlocks(comm, op, blocks, mayDecline));
            } else {
              std::vector<size_t> sendSizes, recvSizes;
              std::vector<uint8_t> input;
              for (const auto& block : sends) {
                sendSizes.push_back(block.size());
                input.insert(input.end(), block.begin(), block.end());
              }
              for (const auto& block : recvs) recvSizes.push_back(block.size());
              const BlockLayout send = layoutOf(sendSizes), recv = layoutOf(recvSizes);
              std::vector<uint8_t> output(recv.offsets.back() + recv.bytes.back(), 0);
              ASSERT_TRUE(hostChannelUnevenAlltoall(comm, op, {input.data(), send, output.data(), recv},
                                                    mayDecline));
              for (int q = 0; q < n; ++q) {
                std::memcpy(recvs[q].data(), output.data() + recv.offsets[q], recvs[q].size());
              }
            }
            for (int q = 0; q < n; ++q) {
              ASSERT_EQ(recvs[q], bytesOf(q * n + r, bytesTo(q, r), seq))
                  << "world " << n << ", mix " << mix << (lists ? ", lists" : ", flat")
                  << ", from rank " << q
                  << (offOnOneRank ? ", through the buffers" : ", read in place");
            }
          }
        }
      });
      expectNoErrors(errors);
    }
  }
}

// The uneven form's turn (half the buffer) must hold its header and a byte
// a rank; where it cannot, every rank's rule says so alike (UCX moves it).
// Rank r's blocks of an uneven all-to-all (bytesTo(from, to) bytes each, their
// contents bytesOf(from * n + to, ..., seq)), and room for what it receives.
struct UnevenBlocks {
  std::vector<std::vector<uint8_t>> sends, recvs;
  AllToAllBlocks blocks;
};
template <typename BytesTo>
UnevenBlocks unevenBlocks(int n, int r, uint64_t seq, const BytesTo& bytesTo) {
  UnevenBlocks u;
  for (int j = 0; j < n; ++j) u.sends.push_back(bytesOf(r * n + j, bytesTo(r, j), seq));
  for (int q = 0; q < n; ++q) u.recvs.emplace_back(bytesTo(q, r), 0);
  for (int j = 0; j < n; ++j) {
    u.blocks.send.push_back(u.sends[j].data());
    u.blocks.sendBytes.push_back(u.sends[j].size());
    u.blocks.recv.push_back(u.recvs[j].data());
    u.blocks.recvBytes.push_back(u.recvs[j].size());
  }
  return u;
}

// A rank whose largest block to a peer is 256 KiB or more and fits the
// buffers' turns times its offer both ways (HostChannel::unevenForms): after
// a round's warm-up and trials both forms have a time, and the calls after
// them take the faster; every block lands in every call, beside blocks too
// large for the turns (read in place, untimed).
TEST(HostChannelCollectives, UnevenAlltoallTimesItsOfferBothWaysAndEveryBlockLands) {
  constexpr uint32_t kCalls = GatherForms::kWarmUp + 2 * GatherForms::kTrials + 2;
  for (int n : {2, 3}) {
    Ranks ranks(n, 100us, ChannelStores::Auto,
                [](int, HostChannel::Options& o) { o.bufferBytes = size_t{1} << 20; });
    const auto errors = ranks.run([&](int r) {
      for (uint64_t seq = 1; seq <= kCalls + 1; ++seq) {
        const bool tooLargeForTheTurns = seq > kCalls;
        const auto bytesTo = [&](int from, int to) -> size_t {
          const size_t unit = tooLargeForTheTurns ? size_t{1} << 20 : kCrossMemoryGatherFromBytes;
          return unit + static_cast<size_t>(from * 4096 + to * 64);
        };
        UnevenBlocks u = unevenBlocks(n, r, seq, bytesTo);
        const OpContext op = ranks.enter(r, "alltoall", seq, 7);
        ASSERT_TRUE(hostChannelUnevenAlltoallBlocks(ranks.comm(r), op, u.blocks, false));
        for (int q = 0; q < n; ++q) {
          ASSERT_EQ(u.recvs[q], bytesOf(q * n + r, bytesTo(q, r), seq))
              << "world " << n << ", call " << seq << ", rank " << q;
        }
      }
      const GatherForms& forms = ranks.channel(r).unevenForms();
      const GatherForms::Call after = forms.peek(kCrossMemoryGatherFromBytes);
      EXPECT_FALSE(after.votes);
      const GatherForms::Vote timed = forms.vote(after);
      EXPECT_GT(timed.inPlaceNanos, 0u) << "rank " << r;
      EXPECT_GT(timed.buffersNanos, 0u) << "rank " << r;
      EXPECT_EQ(after.form, timed.inPlaceNanos < timed.buffersNanos ? GatherForms::Form::InPlace
                                                                     : GatherForms::Form::Buffers)
          << "rank " << r;
      const GatherForms::Vote untimed = forms.vote(forms.peek(size_t{1} << 20));
      EXPECT_EQ(untimed.inPlaceNanos + untimed.buffersNanos, 0u) << "rank " << r;
    });
    expectNoErrors(errors);
  }
}

TEST(HostChannelCollectives, UnevenAlltoallLeavesBuffersTooSmallForItsHeader) {
  for (size_t bufferBytes : {size_t{256}, size_t{4096}}) {
    Ranks ranks(4, 100us, ChannelStores::Auto,
                [&](int, HostChannel::Options& o) { o.bufferBytes = bufferBytes; });
    const auto errors = ranks.run([&](int r) {
      // Four ranks: a 128-byte header (4 sizes, 2 words, 4 addresses, in whole lines).
      EXPECT_EQ(hostChannelUnevenAlltoallApplies(ranks.comm(r)), bufferBytes / 2 >= 128 + 4)
          << bufferBytes << " bytes";
    });
    expectNoErrors(errors);
  }
}

TEST(HostChannelCollectives, UnevenAlltoallNamesASizeItWasNotToldToExpect) {
  Ranks ranks(2);
  const auto errors = ranks.run([&](int r) {
    // Rank 1 sends 30 bytes to rank 0, which expects 20.
    const BlockLayout send = layoutOf(r == 0 ? std::vector<size_t>{10, 10}
                                             : std::vector<size_t>{30, 10});
    const BlockLayout recv = layoutOf(r == 0 ? std::vector<size_t>{10, 20}
                                             : std::vector<size_t>{10, 10});
    std::vector<uint8_t> input(40, 1), output(40);
    hostChannelUnevenAlltoall(ranks.comm(r), ranks.enter(r, "alltoall", 1, 7),
                              {input.data(), send, output.data(), recv});
  });
  EXPECT_NE(errors[0].find("rank 1 sends 30 bytes to this rank, whose output split sizes "
                           "expect 20"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(HostChannelCollectives, GatherAndScatterMoveEqualBlocksToAndFromAnyRoot) {
  for (int n : {2, 3, 4}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (int root : {0, n - 1}) {
        for (size_t block : {size_t{1}, size_t{333}, kBufferBytes + 5}) {  // the last: pieces
          const bool atRoot = r == root;
          const std::vector<uint8_t> mine = bytesOf(r, block, ++seq);
          std::vector<uint8_t> gathered(atRoot ? block * n : 0);
          hostChannelGather(ranks.comm(r), ranks.enter(r, "gather", seq, 8),
                            {mine.data(), atRoot ? gathered.data() : nullptr, block, root});
          for (int q = 0; atRoot && q < n; ++q) {
            ASSERT_EQ(0, std::memcmp(gathered.data() + static_cast<size_t>(q) * block,
                                     bytesOf(q, block, seq).data(), block))
                << "gather, world " << n << ", root " << root << ", block " << block;
          }
          const std::vector<uint8_t> blocks = bytesOf(root, block * n, ++seq);
          std::vector<uint8_t> got(block, 0);
          hostChannelScatter(ranks.comm(r), ranks.enter(r, "scatter", seq, 9),
                             {atRoot ? blocks.data() : nullptr, got.data(), block, root});
          ASSERT_EQ(0, std::memcmp(got.data(), blocks.data() + static_cast<size_t>(r) * block,
                                   block))
              << "scatter, world " << n << ", root " << root << ", block " << block;
        }
      }
    });
    expectNoErrors(errors);
  }
}

// torch's lists: each block its own allocation, in no order in memory.
TEST(HostChannelCollectives, GatherScatterAndAlltoallTakeBlocksApart) {
  for (int n : {2, 3}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (size_t block : {size_t{5}, kBufferBytes + 7}) {  // the second: pieces
        const int root = n - 1;
        const std::vector<uint8_t> mine = bytesOf(r, block, ++seq);
        std::vector<std::vector<uint8_t>> apart(n, std::vector<uint8_t>(block, 0));
        std::vector<void*> outputs;
        for (int q = 0; r == root && q < n; ++q) outputs.push_back(apart[q].data());
        hostChannelGatherBlocks(ranks.comm(r), ranks.enter(r, "gather", seq, 8), mine.data(),
                                outputs, block, root);
        for (int q = 0; r == root && q < n; ++q) {
          ASSERT_EQ(apart[q], bytesOf(q, block, seq)) << "gather, world " << n << ", rank " << q;
        }
        ++seq;
        std::vector<std::vector<uint8_t>> sent;
        std::vector<const void*> inputs;
        for (int q = 0; q < n; ++q) sent.push_back(bytesOf(100 + q, block, seq));
        for (int q = 0; r == root && q < n; ++q) inputs.push_back(sent[q].data());
        std::vector<uint8_t> got(block, 0);
        hostChannelScatterBlocks(ranks.comm(r), ranks.enter(r, "scatter", seq, 9), inputs,
                                 got.data(), block, root);
        ASSERT_EQ(got, sent[r]) << "scatter, world " << n;
        ++seq;  // rank r sends rank j (r + j + 1) * block / 2 bytes
        const auto bytesTo = [&](int from, int to) { return (from + to + 1) * block / 2; };
        UnevenBlocks u = unevenBlocks(n, r, seq, bytesTo);
        ASSERT_TRUE(hostChannelUnevenAlltoallBlocks(
            ranks.comm(r), ranks.enter(r, "alltoall", seq, 7), u.blocks, /*mayDecline=*/false));
        for (int q = 0; q < n; ++q) {
          ASSERT_EQ(u.recvs[q], bytesOf(q * n + r, bytesTo(q, r), seq))
              << "all-to-all, world " << n << ", from rank " << q;
        }
      }
    });
    expectNoErrors(errors);
  }
}

TEST(HostChannelCollectives, ReduceLeavesTheRankOrderSumAtTheRootAndTheOthersAsTheyWere) {
  for (int n : {2, 3, 4}) {
    const size_t count = 2 * kBufferBytes / sizeof(float) + 3;  // pieces
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      for (int root : {0, n - 1}) {
        std::vector<float> data = randomFloats(r, count, 2);
        hostChannelReduce(ranks.comm(r), ranks.enter(r, "reduce", root + 1, 10),
                          {data.data(), count, DataType::Float32, ReduceOp::Sum}, root);
        if (r != root) {
          ASSERT_EQ(data, randomFloats(r, count, 2)) << "rank " << r << "'s input changed";
          continue;
        }
        for (size_t i = 0; i < count; ++i) {
          const float expected = sumInRankOrder(n, count, 2, i);
          ASSERT_EQ(0, std::memcmp(&data[i], &expected, sizeof(float)))
              << "world " << n << ", root " << root << ", element " << i;
        }
      }
    });
    expectNoErrors(errors);
  }
}

// Every collective in turn, with ranks arriving in changing orders: the
// buffers alternate across collectives of different kinds and piece counts.
// Each way of writing into the buffers (memcpy, streaming stores, timed and
// chosen): the same bytes.
class EveryStores : public ::testing::TestWithParam<ChannelStores> {};

TEST_P(EveryStores, CollectivesOfEveryKindShareTheBuffersInARow) {
  const int n = 3;
  Ranks ranks(n, 100us, GetParam());
  const auto errors = ranks.run([&](int r) {
    std::mt19937 jitter(static_cast<unsigned>(r + 11));
    const Comm comm = ranks.comm(r);
    uint64_t seq = 0;
    for (int round = 0; round < 20; ++round) {
      const size_t bytes = (round % 2 == 0) ? 64 : 2 * kBufferBytes + 8;
      const auto maybeLate = [&] {
        if (jitter() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 150));
      };
      maybeLate();
      std::vector<uint8_t> gathered(bytes * n);
      const std::vector<uint8_t> mine = bytesOf(r, bytes, ++seq);
      hostChannelAllgather(comm, ranks.enter(r, "allgather", seq, 1), {mine.data(), gathered.data(), bytes});
      for (int q = 0; q < n; ++q) {
        ASSERT_EQ(0, std::memcmp(gathered.data() + q * bytes, bytesOf(q, bytes, seq).data(), bytes));
      }
      maybeLate();
      std::vector<uint8_t> data = bytesOf(r, bytes, ++seq);
      hostBroadcast(comm, ranks.enter(r, "broadcast", seq, 5), {data.data(), bytes, round % n});
      ASSERT_EQ(data, bytesOf(round % n, bytes, seq));
      maybeLate();
      hostBarrier(comm, ranks.enter(r, "barrier", ++seq, 6));
      maybeLate();
      const size_t count = bytes / sizeof(int32_t);  // every rank's input: `bytes`
      std::vector<int32_t> in(count), out(chunkOf(count, n, r).count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i) + r;
      ASSERT_TRUE(hostReduceScatterInto(comm, ranks.enter(r, "reduce_scatter", ++seq, 2),
                                        {in.data(), count, DataType::Int32, ReduceOp::Sum},
                                        out.data()));
      const Range chunk = chunkOf(count, n, r);
      for (size_t i = 0; i < chunk.count; ++i) {
        ASSERT_EQ(out[i], static_cast<int32_t>(n * (chunk.offset + i)) + (n - 1) * n / 2);
      }
    }
  });
  expectNoErrors(errors);
}

INSTANTIATE_TEST_SUITE_P(HostChannelCollectives, EveryStores,
                         ::testing::Values(ChannelStores::Auto, ChannelStores::Cached,
                                           ChannelStores::Streaming),
                         [](const auto& info) { return std::string(nameOf(info.param)); });

TEST(HostChannelCollectives, AnAllgatherAgainstABroadcastFailsOnBothRanks) {
  Ranks ranks(2);
  const auto errors = ranks.run([&](int r) {
    std::vector<uint8_t> data(64, 1), gathered(128);
    const Comm comm = ranks.comm(r);
    if (r == 0) {
      hostChannelAllgather(comm, ranks.enter(r, "allgather", 1, 11), {data.data(), gathered.data(), 64});
    } else {
      hostBroadcast(comm, ranks.enter(r, "broadcast", 1, 22), {data.data(), 64, 0});
    }
  });
  EXPECT_NE(errors[0].find("allgather #1 on rank 0"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("rank 1 is in a different collective: it is in op-22 #1"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("broadcast #1 on rank 1"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("rank 0 is in a different collective: it is in op-11 #1"),
            std::string::npos)
      << errors[1];
}

TEST(HostChannelCollectives, ABarrierTimeoutNamesTheRankNotSeen) {
  Ranks ranks(3, 0us);
  const auto errors = ranks.run([&](int r) {
    if (r == 2) return;  // never comes to the barrier
    hostBarrier(ranks.comm(r), ranks.enter(r, "barrier", 1, 6, 300ms));
  });
  for (int r : {0, 1}) {
    EXPECT_NE(errors[r].find("barrier #1 timed out after 300 ms on rank " + std::to_string(r)),
              std::string::npos)
        << errors[r];
    EXPECT_NE(errors[r].find("rank(s) not seen in barrier #1: 2"), std::string::npos) << errors[r];
  }
}

TEST(HostChannelCollectives, AReduceScatterEndsWhenAPeerLeaves) {
  Ranks ranks(2, 0us);
  const auto errors = ranks.run([&](int r) {
    if (r == 1) {
      while (!ranks.channel(0).asleep(0)) std::this_thread::yield();
      ranks.leave(1);
      return;
    }
    std::vector<float> in(64, 1.0f), out(32);
    hostReduceScatterInto(ranks.comm(0), ranks.enter(0, "reduce_scatter", 1, 2, 60s),
                          {in.data(), in.size(), DataType::Float32, ReduceOp::Sum}, out.data());
  });
  EXPECT_NE(errors[0].find("reduce_scatter #1 on rank 0: rank 1 has left the group"),
            std::string::npos)
      << errors[0];
}

TEST(HostChannelCollectives, EveryRankDeclinesAlikeWhereTheChannelDoesNotApply) {
  Ranks ranks(2);
  Comm comm = ranks.comm(0);
  const size_t most = kBufferBytes * kHostChannelMaxPieces;
  EXPECT_TRUE(hostChannelAllgatherApplies(comm, most));
  EXPECT_FALSE(hostChannelAllgatherApplies(comm, most + 1));
  EXPECT_FALSE(hostChannelReduceScatterApplies(comm, most + 1));
  // Beyond the buffers a broadcast still takes the channel (large_broadcast.h).
  EXPECT_TRUE(hostChannelBroadcastApplies(comm, most + 1));
  EXPECT_TRUE(hostChannelBarrierApplies(comm));
  Config ring;
  ring.allreduceAlgorithm = AllreduceAlgorithm::Ring;  // RINGREDUCE_ALGORITHM=ring
  Comm forced{comm.transport, ring, comm.workspace};
  forced.channel = comm.channel;
  EXPECT_FALSE(hostChannelAllgatherApplies(forced, 64));
  EXPECT_FALSE(hostChannelBarrierApplies(forced));
  EXPECT_FALSE(hostChannelBroadcastApplies(forced, most + 1));
  Comm without{comm.transport, comm.config, comm.workspace};  // no channel
  EXPECT_FALSE(hostChannelBroadcastApplies(without, 64));
}

// A rank whose peers were not there yet runs the collective's body as far
// as its first turn's publication (OpContext::ahead: exchangeTurn returns
// and the algorithm with it, its data untouched), then queues it; its peers complete their part
// from that publication without it, and its own later run of the same body
// takes up the published turn. Every result exact, the turns still in step
// for the next collective; whether the turn was the collective's last for
// the rank is told with it.
TEST(HostChannelCollectives, ATurnPublishedAheadIsTakenUpByTheCollectivesLaterRun) {
  for (int n : {2, 3}) {
    Ranks ranks(n);
    const auto errors = ranks.run([&](int r) {
      uint64_t seq = 0;
      for (size_t count : {size_t{1}, size_t{300}, 3 * kBufferBytes / 4 + 5}) {
        ++seq;
        std::vector<int32_t> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(i * 3 + r * 1000 + seq);
        const Comm comm = ranks.comm(r);
        OpContext op = ranks.enter(r, "allreduce", seq, 7);
        const ReductionArgs args{data.data(), count, DataType::Int32, ReduceOp::Sum};
        if (r == 0) {
          OpContext ahead = op;
          PublishedAhead published;
          ahead.ahead = &published;
          const std::vector<int32_t> before = data;
          hostChannelAllreduce(comm, ahead, args);
          EXPECT_TRUE(published.published) << count << " elements";
          EXPECT_EQ(data, before) << "publishing ahead wrote the data, " << count << " elements";
          // One piece below the two-phase size: nothing more to publish.
          const size_t bytes = count * sizeof(int32_t);
          EXPECT_EQ(published.lastTurn, bytes <= kBufferBytes && bytes < twoPhaseFromBytes(n))
              << count << " elements";
        }
        hostChannelAllreduce(comm, op, args);
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int q = 0; q < n; ++q) want += static_cast<int64_t>(i * 3 + q * 1000 + seq);
          ASSERT_EQ(data[i], static_cast<int32_t>(want)) << "world " << n << ", element " << i;
        }
      }
      // The turns are still in step: a barrier after them completes.
      hostBarrier(ranks.comm(r), ranks.enter(r, "barrier", ++seq, 9));
    });
    expectNoErrors(errors);
  }
}

// Reading the blocks in place, the channel carries gathers of any size
// (its buffers, here 4 KiB, carry four): every rank's rule says so alike,
// and says no where one rank turned cross-memory attach off.
TEST(HostChannelCollectives, GathersReadInPlaceGoThroughTheChannelBeyondItsBuffers) {
  for (bool offOnOneRank : {false, true}) {
    constexpr int n = 3;
    Ranks ranks(n, 100us, ChannelStores::Auto, [&](int r, HostChannel::Options& o) {
      o.crossMemory = !(offOnOneRank && r == 0);
    });
    const size_t block = size_t{1} << 20;  // 256 buffers
    const auto errors = ranks.run([&](int r) {
      const Comm comm = ranks.comm(r);
      EXPECT_EQ(hostChannelAllgatherApplies(comm, block), !offOnOneRank);
      EXPECT_EQ(hostChannelGatherApplies(comm, block), !offOnOneRank);
      EXPECT_EQ(hostChannelAlltoallApplies(comm, block * n), !offOnOneRank);
      EXPECT_FALSE(crossMemoryGatherCarries(comm, kCrossMemoryGatherFromBytes - 1));
      if (offOnOneRank) return;
      const std::vector<uint8_t> input = bytesOf(r, block, 1);
      std::vector<uint8_t> output(block * n, 0);
      hostChannelGather(comm, ranks.enter(r, "gather", 1, 3),
                        {input.data(), output.data(), block, 1});
      for (int q = 0; r == 1 && q < n; ++q) {
        const std::vector<uint8_t> theirs = bytesOf(q, block, 1);
        ASSERT_EQ(0, std::memcmp(output.data() + static_cast<size_t>(q) * block, theirs.data(),
                                 block)) << "rank " << q << "'s block";
      }
    });
    expectNoErrors(errors);
  }
}

// A gather whose blocks are read from the peers' memory, put up ahead on
// one rank (its record only: where its block lies; not the last turn, the
// Reduced flag follows), writes nothing, and its later run gets every block.
TEST(HostChannelCollectives, AGatherReadInPlacePublishedAheadPutsUpOnlyWhereItsBlockLies) {
  constexpr int n = 3;
  Ranks ranks(n, 100us, ChannelStores::Auto,
              [](int, HostChannel::Options& o) { o.bufferBytes = size_t{64} << 10; });
  const size_t block = kCrossMemoryGatherFromBytes + 8;
  const auto errors = ranks.run([&](int r) {
    ASSERT_TRUE(crossMemoryGatherApplies(ranks.channel(r), block));
    for (uint64_t seq = 1; seq <= 2; ++seq) {  // the gather, then the all-to-all
      const size_t inBytes = seq == 1 ? block : block * n;
      const std::vector<uint8_t> input = bytesOf(r, inBytes, seq);
      std::vector<uint8_t> output(block * n, 0);
      const Comm comm = ranks.comm(r);
      OpContext op = ranks.enter(r, seq == 1 ? "allgather" : "alltoall", seq, 5);
      const auto run = [&](const OpContext& ctx) {
        if (seq == 1) return hostChannelAllgather(comm, ctx, {input.data(), output.data(), block});
        hostChannelAlltoall(comm, ctx, {input.data(), output.data(), block});
      };
      if (r == 1) {
        OpContext ahead = op;
        PublishedAhead published;
        ahead.ahead = &published;
        run(ahead);
        EXPECT_TRUE(published.published);
        EXPECT_FALSE(published.lastTurn);
        EXPECT_TRUE(std::all_of(output.begin(), output.end(), [](uint8_t b) { return b == 0; }))
            << "publishing ahead wrote the output";
      }
      run(op);
      for (int q = 0; q < n; ++q) {
        const std::vector<uint8_t> theirs = bytesOf(q, inBytes, seq);
        const size_t at = seq == 1 ? 0 : static_cast<size_t>(r) * block;
        ASSERT_EQ(0, std::memcmp(output.data() + static_cast<size_t>(q) * block,
                                 theirs.data() + at, block))
            << "collective " << seq << ", rank " << q << "'s block";
      }
    }
    hostBarrier(ranks.comm(r), ranks.enter(r, "barrier", 3, 9));
  });
  expectNoErrors(errors);
}

// Every collective over the channel, run to publish ahead (OpContext::ahead)
// on every rank, returns after its first turn with the caller's input and
// output as they were (its queued run starts the body again from them; an
// output written early could be an input read later), then its later run
// gives what a plain run gives. Messages of several turns each, world 3,
// rooted ones at a root that is not rank 0.
TEST(HostChannelCollectives, EveryCollectivePublishedAheadReturnsAfterItsFirstTurnWritingNothing) {
  constexpr int n = 3;
  constexpr size_t block = 1500;  // int32 elements: 6000 B, more than a buffer
  constexpr size_t blockBytes = block * sizeof(int32_t);
  struct Case {
    const char* name;
    size_t inElems;
    size_t outElems;
    std::function<void(const Comm&, const OpContext&, int32_t*, int32_t*)> run;
  };
  const ReductionArgs sum{nullptr, 0, DataType::Int32, ReduceOp::Sum};
  const std::vector<Case> cases = {
      {"allreduce", block, 0,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t*) {
         hostChannelAllreduce(c, op, {in, block, sum.type, sum.op});
       }},
      {"broadcast", block, 0,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t*) {
         hostChannelBroadcast(c, op, {in, blockBytes, 1});
       }},
      {"reduce", block, 0,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t*) {
         hostChannelReduce(c, op, {in, block, sum.type, sum.op}, 2);
       }},
      {"allgather", block, n * block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         hostChannelAllgather(c, op, {in, out, blockBytes});
       }},
      {"gather", block, n * block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         hostChannelGather(c, op, {in, out, blockBytes, 1});
       }},
      {"scatter", n * block, block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         hostChannelScatter(c, op, {in, out, blockBytes, 2});
       }},
      {"reduce_scatter", n * block, block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         hostChannelReduceScatter(c, op, {in, n * block, sum.type, sum.op}, out);
       }},
      {"all_to_all", n * block, n * block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         hostChannelAlltoall(c, op, {in, out, blockBytes});
       }},
      {"all_to_all (uneven form)", n * block, n * block,
       [&](const Comm& c, const OpContext& op, int32_t* in, int32_t* out) {
         const BlockLayout layout = BlockLayout::uniform(n, blockBytes);
         EXPECT_TRUE(hostChannelUnevenAlltoall(c, op, {in, layout, out, layout}, false));
       }},
      {"barrier", 0, 0,
       [&](const Comm& c, const OpContext& op, int32_t*, int32_t*) { hostChannelBarrier(c, op); }},
  };
  Ranks ranks(n);
  const auto errors = ranks.run([&](int r) {
    const Comm comm = ranks.comm(r);
    uint64_t seq = 0;
    for (const Case& test : cases) {
      const auto fresh = [&](std::vector<int32_t>& in, std::vector<int32_t>& out) {
        in.resize(test.inElems);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 7 + r * 1000 + 1);
        out.assign(test.outElems, -1);
      };
      std::vector<int32_t> in, out, plainIn, plainOut;
      fresh(plainIn, plainOut);
      test.run(comm, ranks.enter(r, test.name, ++seq, 7), plainIn.data(), plainOut.data());
      fresh(in, out);
      const OpContext op = ranks.enter(r, test.name, ++seq, 7);
      // A root that left its plain run without waiting for its receivers
      // publishes ahead only once they have come to it, as the engine does
      // (Engine::runOnCaller queues without publishing until then).
      while (ranks.channel(r).owesUnsettledWait()) std::this_thread::yield();
      OpContext ahead = op;
      PublishedAhead published;
      ahead.ahead = &published;
      test.run(comm, ahead, in.data(), out.data());
      EXPECT_TRUE(published.published) << test.name << " on rank " << r;
      // (A barrier's one turn, and no other collective's first here, is its last.)
      EXPECT_EQ(published.lastTurn, std::string(test.name) == "barrier") << test.name;
      std::vector<int32_t> untouchedIn, untouchedOut;
      fresh(untouchedIn, untouchedOut);
      EXPECT_EQ(in, untouchedIn) << test.name << " on rank " << r << " wrote its input ahead";
      EXPECT_EQ(out, untouchedOut) << test.name << " on rank " << r << " wrote its output ahead";
      test.run(comm, op, in.data(), out.data());
      EXPECT_EQ(in, plainIn) << test.name << " on rank " << r;
      EXPECT_EQ(out, plainOut) << test.name << " on rank " << r;
    }
  });
  expectNoErrors(errors);
}

// A turn published ahead and never taken up is a bug that would put the
// rank's turns out of step with its peers': the next collective to take a
// turn throws, naming both, rather than exchange the wrong buffers.
TEST(HostChannelCollectives, ATurnPublishedAheadAndNotTakenUpFailsTheNextCollective) {
  Ranks ranks(2);
  HostChannel& channel = ranks.channel(0);
  channel.notePublishedAhead(4, channel.takeTurn(64), 64);
  HostChannel::Turn turn;
  try {
    channel.adoptPublishedAhead(5, 64, turn);
    ADD_FAILURE() << "collective #5 took a turn past #4's";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("#5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("#4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringreduce
