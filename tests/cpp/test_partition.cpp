// Chunks and pipeline segments of a buffer (core/plan/partition.h)
#include <gtest/gtest.h>

#include "core/plan/partition.h"

using namespace ringreduce;

TEST(Partition, ChunksTileTheBufferInOrder) {
  for (size_t count : {0, 1, 5, 7, 64, 1001}) {
    for (int parts = 1; parts <= 5; ++parts) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Range r = chunkOf(count, parts, i);
        EXPECT_EQ(r.offset, next);
        EXPECT_LE(r.count, chunkOf(count, parts, 0).count);
        EXPECT_GE(r.count + 1, chunkOf(count, parts, 0).count);
        next += r.count;
      }
      EXPECT_EQ(next, count) << count << " / " << parts;
    }
  }
}

TEST(Partition, SegmentPlanCoversEveryChunkWithSameSegmentCount) {
  const size_t count = 100003;
  const int parts = 3;
  const SegmentPlan plan = planSegments(chunkOf(count, parts, 0).count, 4, 4096, 1 << 20);
  EXPECT_GT(plan.segments, 1u);
  for (int i = 0; i < parts; ++i) {
    const Range chunk = chunkOf(count, parts, i);
    size_t covered = 0;
    for (size_t k = 0; k < plan.segments; ++k) {
      const Range seg = segmentOf(chunk, plan.elemsPerSegment, k);
      EXPECT_EQ(seg.offset, chunk.offset + covered);
      covered += seg.count;
    }
    EXPECT_EQ(covered, chunk.count);
  }
}

TEST(Partition, SegmentPlanRespectsSlotLimit) {
  const SegmentPlan plan = planSegments(1 << 20, 1, 1, 16);
  EXPECT_EQ(plan.segments, 16u);
  EXPECT_EQ(plan.elemsPerSegment, (1u << 20) / 16);
  const SegmentPlan empty = planSegments(0, 4, 4096, 100);
  EXPECT_EQ(empty.segments, 1u);
}

// The device two-shot cuts buffers with alignedChunkOf: the chunks must tile
// the buffer exactly, in order, and start on multiples of the alignment.
TEST(Partition, AlignedChunksTileTheBufferOnAlignedBoundaries) {
  for (size_t count : {0ul, 1ul, 3ul, 15ul, 16ul, 17ul, 1000ul, 4097ul, 1ul << 20}) {
    for (int parts = 1; parts <= 8; ++parts) {
      for (size_t align : {1ul, 4ul, 8ul, 16ul}) {
        size_t next = 0;
        for (int i = 0; i < parts; ++i) {
          const Range r = alignedChunkOf(count, parts, i, align);
          EXPECT_EQ(r.offset, next) << count << " " << parts << " " << align << " " << i;
          if (r.count > 0) {
            EXPECT_EQ(r.offset % align, 0u);
          }
          next = r.offset + r.count;
        }
        EXPECT_EQ(next, count) << count << " " << parts << " " << align;
      }
    }
  }
}
