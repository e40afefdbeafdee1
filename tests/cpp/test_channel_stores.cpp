// The host channel's stores (transport/host/channel_stores.h,
// core/math/streaming_copy.h): the streaming copy writes exactly the bytes
// asked for, at any alignment; the chooser streams only where memcpy is
// far slower, keeps to its choice through a slow outlier, and turns back
// within kExploreEvery copies when the placement changes.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/math/streaming_copy.h"
#include "transport/host/channel_stores.h"

namespace ringreduce {
namespace {

constexpr uint8_t kGuard = 0xA5;

// dst and src at every offset within a line, sizes around the line and
// beyond: the bytes in place, nothing written before or after them.
TEST(StreamingCopy, CopiesExactlyTheBytesAtAnyAlignment) {
  std::vector<uint8_t> source(4096 + 128);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t bytes : {0, 1, 15, 63, 64, 65, 127, 128, 200, 1000, 4096}) {
    for (size_t dstOffset = 0; dstOffset < 64; dstOffset += 7) {
      for (size_t srcOffset : {0, 1, 33}) {
        std::vector<uint8_t> out(bytes + 256, kGuard);
        uint8_t* dst = out.data() + 64 + dstOffset;
        copyStreaming(dst, source.data() + srcOffset, bytes);
        for (size_t i = 0; i < out.size(); ++i) {
          const uint8_t* at = out.data() + i;
          const bool inside = at >= dst && at < dst + bytes;
          const uint8_t want = inside ? source[srcOffset + static_cast<size_t>(at - dst)] : kGuard;
          ASSERT_EQ(out[i], want) << bytes << " bytes, dst offset " << dstOffset
                                  << ", src offset " << srcOffset << ", byte " << i;
        }
      }
    }
  }
}

TEST(ChannelWriter, EveryModeCopiesTheSameBytes) {
  std::vector<uint8_t> source(300000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 13 + 1);
  for (ChannelStores mode : {ChannelStores::Auto, ChannelStores::Cached, ChannelStores::Streaming}) {
    ChannelWriter writer(mode);
    for (int round = 0; round < 200; ++round) {  // through the chooser's first timings and explores
      for (size_t bytes : {size_t{100}, size_t{3000}, size_t{65536 + 5}, source.size() - 3}) {
        std::vector<uint8_t> out(bytes + 1, kGuard);
        writer.copy(out.data() + 1, source.data() + 3, bytes);
        ASSERT_EQ(out[0], kGuard);
        ASSERT_TRUE(std::equal(out.begin() + 1, out.end(), source.begin() + 3))
            << nameOf(mode) << ", " << bytes << " bytes, round " << round;
      }
    }
  }
}

constexpr size_t kBytes = 65536;

// Drives the chooser for `copies` copies of kBytes, each timed by `cost`
// (ns for a streamed copy or not); returns how many of them streamed.
template <typename Cost>
int drive(StoreChooser& chooser, int copies, const Cost& cost) {
  int streamed = 0;
  for (int i = 0; i < copies; ++i) {
    const bool stream = chooser.streamNext(kBytes);
    streamed += stream ? 1 : 0;
    chooser.record(kBytes, stream, cost(stream));
  }
  return streamed;
}

TEST(StoreChooser, TimesBothKindsFirst) {
  StoreChooser chooser;
  EXPECT_FALSE(chooser.streamNext(kBytes));
  chooser.record(kBytes, false, 1000);
  EXPECT_TRUE(chooser.streamNext(kBytes));
  chooser.record(kBytes, true, 1000);
}

TEST(StoreChooser, StreamsWhereMemcpyIsFarSlowerAndExploresNowAndThen) {
  StoreChooser chooser;
  // The cores apart: memcpy 28 us, streamed 2 us.
  const int streamed = drive(chooser, 2 + 640, [](bool s) { return s ? 2000u : 28000u; });
  EXPECT_TRUE(chooser.streaming(kBytes));
  // Every copy but the first, and one in kExploreEvery that times memcpy again.
  EXPECT_EQ(streamed, 1 + 640 - 640 / static_cast<int>(StoreChooser::kExploreEvery));
}

TEST(StoreChooser, KeepsMemcpyWhereItIsOnlyATwoOrThreeTimesSlower) {
  StoreChooser chooser;
  // The cores close: memcpy 7 us, streamed 2.5 us; the reader pays the rest.
  drive(chooser, 500, [](bool s) { return s ? 2500u : 7000u; });
  EXPECT_FALSE(chooser.streaming(kBytes));
}

TEST(StoreChooser, ASlowOutlierDoesNotTurnTheChoice) {
  StoreChooser chooser;
  drive(chooser, 100, [](bool s) { return s ? 2500u : 3000u; });
  ASSERT_FALSE(chooser.streaming(kBytes));
  chooser.record(kBytes, false, 1000000);  // a preemption inside one memcpy
  EXPECT_FALSE(chooser.streaming(kBytes));
}

TEST(StoreChooser, TurnsBackWithinAnExploreIntervalWhenThePlacementChanges) {
  StoreChooser chooser;
  drive(chooser, 300, [](bool s) { return s ? 2000u : 28000u; });
  ASSERT_TRUE(chooser.streaming(kBytes));
  // The cores come close: memcpy 1.2 us now.
  drive(chooser, static_cast<int>(StoreChooser::kExploreEvery) + 1,
        [](bool s) { return s ? 2000u : 1200u; });
  EXPECT_FALSE(chooser.streaming(kBytes));
  // And apart again: the memcpy timings rise on every copy, the turn is quick.
  drive(chooser, StoreChooser::kWindow + 1, [](bool s) { return s ? 2000u : 28000u; });
  EXPECT_TRUE(chooser.streaming(kBytes));
}

TEST(StoreChooser, SizeClassesChooseApart) {
  StoreChooser chooser;
  for (int i = 0; i < 100; ++i) {
    for (size_t bytes : {size_t{4096}, size_t{1} << 20}) {
      const bool stream = chooser.streamNext(bytes);
      // Small copies: memcpy as fast; large ones: memcpy 10x slower.
      const uint64_t ns = bytes / 1000 * (stream ? 1 : (bytes > 4096 ? 10 : 1));
      chooser.record(bytes, stream, ns);
    }
  }
  EXPECT_FALSE(chooser.streaming(4096));
  EXPECT_TRUE(chooser.streaming(size_t{1} << 20));
}

}  // namespace
}  // namespace ringreduce
