// The device-flags group (csrc/cuda/signal/signal_group.h) on the fake
// device (fake_device.h): ranks as threads over real UCX transports, its
// set-up exchanges, both ways of meeting (flags in kernels, stream memory
// operations), every collective through it against exact references, the
// cross-rank close, the reports a failure leaves for the watchdog, and the
// plan that decides how ranks meet (flags_plan.h). The kernels' blocks run
// as host threads with the host memory policy, so this is the code the GPU
// runs, minus the PTX.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/record_allgather.h"
#include "cuda/signal/flags_plan.h"
#include "cuda/signal/signal_group.h"
#include "fake_device.h"
#include "rank_threads.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::exchangeFor;
using ringreduce::testing::runRanks;

namespace {


SignalGroupOptions optionsFor(CudaSync sync) {
  SignalGroupOptions o;
  o.bufferBytes = 16 * 1024;
  o.sync = sync;
  o.maxBlocks = 3;
  o.oneShotBytes = 1024;  // larger ones take the two-shot
  return o;
}

std::unique_ptr<SignalGroup> setUp(Transport& t, int rank, int n, const SignalGroupOptions& o) {
  std::string why;
  auto group = SignalGroup::setUp(rank, n, 0, o, exchangeFor(t, 1), &why);
  if (!group) throw Error("set-up failed: " + why);
  return group;
}

SignalGroup::Call callOf(uint32_t fingerprint) {
  SignalGroup::Call c;
  c.fingerprint = fingerprint;
  c.timeout = std::chrono::seconds(20);
  return c;
}

double valueOf(int rank, size_t i) { return static_cast<double>((rank * 7 + i * 3) % 11) - 5; }

double sumOf(int n, size_t i) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += valueOf(r, i);
  return s;
}

class SignalGroupSync : public ::testing::TestWithParam<CudaSync> {};

// One-shot and two-shot through the buffers, in place and not, float32 SUM
// and AVG, int64 MAX; then the ranks' own tensors in place; then the close.
TEST_P(SignalGroupSync, AllreduceThroughTheBuffersAndInPlace) {
  const CudaSync sync = GetParam();
  for (int n : {1, 2, 3}) {
    // Every rank's own tensor, allocated before the ranks start (their
    // addresses are what a real rank exchanges); each rank fills its own.
    std::vector<std::vector<float>> shared(n, std::vector<float>(9000));
    runRanks(n, [&, n](Transport& t, int rank) {
      auto group = setUp(t, rank, n, optionsFor(sync));
      for (size_t count : {1ul, 100ul, 255ul, 1000ul, 2000ul}) {  // from 257 floats: two-shot
        std::vector<float> in(count), out(count, -1.f);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(valueOf(rank, i));
        const DevicePathTaken ran = group->allreduce(in.data(), out.data(), count,
                                                     DataType::Float32, ReduceOp::Sum, callOf(7));
        EXPECT_EQ(ran, count * 4 > 1024 && n > 1 ? DevicePathTaken::FlagsTwoShot
                                                 : DevicePathTaken::FlagsOneShot);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], sumOf(n, i)) << count << " " << i;
        group->allreduce(in.data(), in.data(), count, DataType::Float32, ReduceOp::Avg,
                         callOf(8));
        for (size_t i = 0; i < count; ++i) ASSERT_FLOAT_EQ(in[i], sumOf(n, i) / n);
        std::vector<int64_t> big(count);
        for (size_t i = 0; i < count; ++i) big[i] = static_cast<int64_t>(valueOf(rank, i)) * rank;
        group->allreduce(big.data(), big.data(), count, DataType::Int64, ReduceOp::Max, callOf(9));
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int r = 0; r < n; ++r) want = std::max<int64_t>(want, valueOf(r, i) * r);
          if (n == 1) want = 0;
          ASSERT_EQ(big[i], want);
        }
      }
      // In place on every rank's own tensor (mapped: here, the host array).
      for (size_t i = 0; i < 9000; ++i) shared[rank][i] = static_cast<float>(valueOf(rank, i));
      void* tensors[kSignalRanks] = {};
      for (int p = 0; p < n; ++p) tensors[p] = shared[p].data();
      group->allreduceInPlace(tensors, 9000, DataType::Float32, ReduceOp::Sum, true, callOf(11));
      for (size_t i = 0; i < 9000; ++i) ASSERT_EQ(shared[rank][i], sumOf(n, i)) << i;
      EXPECT_EQ(group->failure(), "");
      EXPECT_TRUE(group->close(exchangeFor(t, 2), std::chrono::seconds(10)));
    });
  }
}

TEST_P(SignalGroupSync, AllgatherAndReduceScatter) {
  const CudaSync sync = GetParam();
  for (int n : {2, 3}) {
    runRanks(n, [&, n](Transport& t, int rank) {
      auto group = setUp(t, rank, n, optionsFor(sync));
      const size_t per = 333;
      std::vector<float> in(per), gathered(per * n, -1.f);
      for (size_t i = 0; i < per; ++i) in[i] = static_cast<float>(valueOf(rank, i));
      group->allgather(in.data(), gathered.data(), per, DataType::Float32, callOf(20));
      for (int p = 0; p < n; ++p) {
        for (size_t i = 0; i < per; ++i) ASSERT_EQ(gathered[p * per + i], valueOf(p, i));
      }
      std::vector<float> whole(per * n), block(per, -1.f);
      for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(valueOf(rank, i));
      group->reduceScatter(whole.data(), block.data(), per, DataType::Float32, ReduceOp::Sum,
                           callOf(21));
      for (size_t i = 0; i < per; ++i) ASSERT_EQ(block[i], sumOf(n, rank * per + i)) << i;
      EXPECT_TRUE(group->close(exchangeFor(t, 2), std::chrono::seconds(10)));
    });
  }
}

INSTANTIATE_TEST_SUITE_P(FlagsAndStreamMemOps, SignalGroupSync,
                         ::testing::Values(CudaSync::Flags, CudaSync::StreamMemOps),
                         [](const auto& info) {
                           return std::string(info.param == CudaSync::Flags ? "Flags" : "MemOps");
                         });

// A rank whose set-up fails makes every rank give up together, with a
// reason naming it, instead of waiting for it.
TEST(SignalGroupSetUp, OneRankFailingFailsEveryRankAlike) {
  runRanks(3, [](Transport& t, int rank) {
    SignalGroupOptions o = optionsFor(CudaSync::Flags);
    if (rank == 1) o.bufferBytes = 5000;  // not a multiple of 4096
    std::string why;
    auto group = SignalGroup::setUp(rank, 3, 0, o, exchangeFor(t, 1), &why);
    EXPECT_EQ(group, nullptr);
    if (rank == 1) {
      EXPECT_NE(why.find("multiple of 4096"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find("rank 1 could not set up"), std::string::npos) << why;
    }
  });
}

// Another collective on one rank: the kernels report it, and failure()
// says so in words the watchdog hands to the group's error.
TEST(SignalGroupFailures, AMismatchIsReportedForTheWatchdog) {
  runRanks(2, [](Transport& t, int rank) {
    auto group = setUp(t, rank, 2, optionsFor(CudaSync::Flags));
    std::vector<float> data(64, 1.f);
    group->allreduce(data.data(), data.data(), 64, DataType::Float32, ReduceOp::Sum,
                     callOf(rank == 0 ? 100 : 101));
    const std::string failure = group->failure();
    EXPECT_NE(failure.find("rank " + std::to_string(rank) + "'s device collective #1"),
              std::string::npos)
        << failure;
    EXPECT_TRUE(failure.find("different collective") != std::string::npos ||
                failure.find("a peer's kernel failed") != std::string::npos)
        << failure;
    // A failed group is not closed: its memory stays (a peer may map it).
    group->stop();
  });
}

// Stream memory operations carry the fingerprint too: a rank running
// another collective never satisfies its peer's wait (here the fake's wait
// gives up; on the device the watchdog's deadline fails the group), so the
// result is an error, never a wrong sum.
TEST(SignalGroupFailures, AnotherCollectiveNeverPassesAStreamWait) {
  ringreduce::testing::setFakeStreamWaitLimit(std::chrono::milliseconds(300));
  runRanks(2, [](Transport& t, int rank) {
    auto group = setUp(t, rank, 2, optionsFor(CudaSync::StreamMemOps));
    std::vector<float> data(64, 1.f);
    group->allreduce(data.data(), data.data(), 64, DataType::Float32, ReduceOp::Sum, callOf(5));
    EXPECT_EQ(data[0], 2.f);
    try {
      group->allreduce(data.data(), data.data(), 64, DataType::Float32, ReduceOp::Sum,
                       callOf(rank == 0 ? 6 : 7));
      ADD_FAILURE() << "rank " << rank << ": a different collective passed the barrier";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("never became"), std::string::npos) << e.what();
    }
    group->stop();
  });
  ringreduce::testing::setFakeStreamWaitLimit(std::chrono::seconds(30));
}

RankDevice rankOn(uint64_t host, uint8_t gpu, bool mps, int sms = 132) {
  RankDevice r;
  r.host = host;
  r.gpu[0] = gpu;
  r.mps = mps;
  r.memOps = true;
  r.sms = sms;
  return r;
}

TEST(FlagsPlan, OneGpuPerRankSpinsOnFlags) {
  const FlagsPlan plan = planFlags({rankOn(1, 0, false), rankOn(1, 1, false)}, CudaSync::Auto,
                                   0, "no MPS");
  EXPECT_EQ(plan.sync, CudaSync::Flags);
  EXPECT_EQ(plan.maxBlocks, 64);
  EXPECT_EQ(plan.topology, "2 rank(s) on 1 node(s), 2 GPU(s)");
}

TEST(FlagsPlan, RanksSharingAGpuWithoutMpsUseStreamMemoryOperations) {
  const FlagsPlan plan = planFlags({rankOn(1, 0, false), rankOn(1, 0, false)}, CudaSync::Auto,
                                   0, "no MPS control pipe");
  EXPECT_EQ(plan.sync, CudaSync::StreamMemOps);
  EXPECT_NE(plan.reason.find("time-sliced"), std::string::npos) << plan.reason;
}

TEST(FlagsPlan, UnderMpsEveryRanksGridFitsTheSharedGpu) {
  std::vector<RankDevice> four(4, rankOn(1, 0, true, 132));
  const FlagsPlan plan = planFlags(four, CudaSync::Auto, 0, "MPS daemon running");
  EXPECT_EQ(plan.sync, CudaSync::Flags);
  EXPECT_EQ(plan.maxBlocks, 33);  // 132 SMs / 4 ranks
  EXPECT_EQ(planFlags(four, CudaSync::Auto, 8, "").maxBlocks, 8);  // RINGREDUCE_CUDA_BLOCKS
  // One rank that is not an MPS client makes the GPU time-sliced for all.
  four[2].mps = false;
  EXPECT_EQ(planFlags(four, CudaSync::Auto, 0, "").sync, CudaSync::StreamMemOps);
}

TEST(FlagsPlan, WhatCannotRunSaysWhy) {
  const FlagsPlan nodes =
      planFlags({rankOn(1, 0, false), rankOn(2, 0, false)}, CudaSync::Auto, 0, "");
  EXPECT_EQ(nodes.sync, CudaSync::Auto);
  EXPECT_NE(nodes.reason.find("one node"), std::string::npos) << nodes.reason;
  std::vector<RankDevice> noMemOps = {rankOn(1, 0, false), rankOn(1, 0, false)};
  noMemOps[1].memOps = false;
  EXPECT_EQ(planFlags(noMemOps, CudaSync::Auto, 0, "").sync, CudaSync::Auto);
  EXPECT_EQ(planFlags(noMemOps, CudaSync::StreamMemOps, 0, "").sync, CudaSync::Auto);
  // Asked for flags: the user vouches that the kernels run at once.
  EXPECT_EQ(planFlags(noMemOps, CudaSync::Flags, 0, "").sync, CudaSync::Flags);
}

}  // namespace
