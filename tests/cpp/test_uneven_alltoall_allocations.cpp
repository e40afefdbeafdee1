// An all-to-all with split sizes on the host channel (MoE's token exchange)
// must make no heap allocation once warm: its per-rank lists (the layouts,
// the blocks' addresses, what the first turn's headers say) live inline
// (core/base/inline_vector.h). Each vector it once built cost a malloc and
// a free per call, some ten of them, on a collective whose whole call at
// 64 B is about 2 us. A change that puts a vector back on this path fails
// here.
//
// In the hot path's binary: allocation_counter.cpp replaces operator new
// for the whole process.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/host_channel/alltoall.h"
#include "allocation_counter.h"
#include "host_channel_ranks.h"

using namespace ringreduce;
using namespace ringreduce::channel_test;
using ringreduce::testing::AllocationScope;

namespace {

constexpr int kWarmUp = 3;
constexpr int kCounted = 20;

// Rank q sends rank k (1 + (q + k) % n) * 12 bytes, as the anchors' splits.
size_t bytesTo(int n, int from, int to) { return static_cast<size_t>(1 + (from + to) % n) * 12; }

BlockLayout layoutOf(int n, bool sending, int r) {
  BlockLayout layout;
  size_t offset = 0;
  for (int q = 0; q < n; ++q) {
    const size_t bytes = sending ? bytesTo(n, r, q) : bytesTo(n, q, r);
    layout.offsets.push_back(offset);
    layout.bytes.push_back(bytes);
    offset += bytes;
  }
  return layout;
}

TEST(UnevenAlltoallAllocations, FlatAndListFormsAllocateNothingOnceWarm) {
  for (int n : {2, 4}) {
    Ranks ranks(n);
    std::vector<uint64_t> allocations(static_cast<size_t>(n), 0);
    const auto errors = ranks.run([&](int r) {
      const Comm comm = ranks.comm(r);
      const BlockLayout send = layoutOf(n, true, r), recv = layoutOf(n, false, r);
      std::vector<uint8_t> input(send.offsets.back() + send.bytes.back());
      std::vector<uint8_t> output(recv.offsets.back() + recv.bytes.back());
      uint64_t seq = 0;
      for (int i = -kWarmUp; i < kCounted; ++i) {
        ++seq;
        for (int j = 0; j < n; ++j) {
          const std::vector<uint8_t> block = bytesOf(r * n + j, send.bytes[j], seq);
          std::copy(block.begin(), block.end(), input.begin() + send.offsets[j]);
        }
        const bool lists = i % 2 != 0;
        const OpContext op = ranks.enter(r, "alltoall", seq, lists ? 3 : 2);
        AllToAllBlocks blocks{{}, send.bytes, {}, recv.bytes};
        for (int j = 0; j < n; ++j) {
          blocks.send.push_back(input.data() + send.offsets[j]);
          blocks.recv.push_back(output.data() + recv.offsets[j]);
        }
        const AllToAllArgs args{input.data(), send, output.data(), recv};
        bool done = false;
        {
          AllocationScope scope;
          done = lists ? hostChannelUnevenAlltoallBlocks(comm, op, blocks)
                       : hostChannelUnevenAlltoall(comm, op, args);
          if (i >= 0) allocations[r] += scope.count();
        }
        ASSERT_TRUE(done) << "rank " << r << " op " << i;
        for (int q = 0; q < n; ++q) {
          const std::vector<uint8_t> expected = bytesOf(q * n + r, recv.bytes[q], seq);
          ASSERT_TRUE(std::equal(expected.begin(), expected.end(),
                                 output.begin() + recv.offsets[q]))
              << "world " << n << ", rank " << r << ", op " << i << ", from rank " << q;
        }
      }
    });
    expectNoErrors(errors);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(allocations[r], 0u) << "world " << n << ", rank " << r << ": heap allocations in "
                                    << kCounted << " uneven all-to-alls";
    }
  }
}

}  // namespace
