// What one on-caller collective of the device-flags path costs the caller's
// thread once the group is set up (issue 44): the calls into the CUDA layer,
// counted by the fake device (fake_call_counts.h), and the heap allocations,
// counted by this binary's operator new (allocation_counter.h). On one GPU
// per rank an allreduce must be one kernel launch and nothing else (but
// the launch's cudaGetDevice): no event, no device switch, no host
// synchronisation, no allocation (no string, vector or std::function). A
// change that adds any of them to the hot path fails here. Ranks run as threads, the kernels' blocks on the
// fake device, and every result is checked against its exact value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocation_counter.h"
#include "cuda/kernels/reduce_copy.h"
#include "on_caller_rank.h"
#include "fake_device.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using ringreduce::testing::AllocationScope;
using ringreduce::testing::OnCallerRank;
using ringreduce::testing::FakeCallCounts;
using ringreduce::testing::kOnCallerCount;
using ringreduce::testing::runRanks;
using ringreduce::testing::takeFakeCallCounts;

namespace {

// Enough steady-state collectives to see one that allocates lazily.
constexpr int kSteadyOps = 5;

struct Cost {
  FakeCallCounts calls;
  uint64_t allocations = 0;
  DevicePathTaken ran = DevicePathTaken::HostStaging;
};

// The cost of `op` alone on this thread (nothing else runs on it between).
template <typename Op>
Cost costOf(const Op& op) {
  takeFakeCallCounts();
  AllocationScope scope;
  const DevicePathTaken ran = op();
  Cost cost;
  cost.allocations = scope.count();
  cost.calls = takeFakeCallCounts();
  cost.ran = ran;
  return cost;
}

// One kernel launch; at most one event record and one device query (the
// launch's device scope); nothing else, and no allocation.
void expectOneLaunch(const Cost& cost, const std::string& what) {
  const FakeCallCounts& c = cost.calls;
  EXPECT_EQ(c.kernelLaunches, 1u) << what << ": " << c.describe();
  EXPECT_EQ(c.eventCreates, 0u) << what << ": " << c.describe();
  EXPECT_LE(c.eventRecords, 1u) << what << ": " << c.describe();
  EXPECT_EQ(c.deviceSets, 0u) << what << ": " << c.describe();
  EXPECT_EQ(c.hostSyncs, 0u) << what << ": " << c.describe();
  EXPECT_LE(c.deviceGets, 1u) << what << ": " << c.describe();
  EXPECT_EQ(c.total(), c.kernelLaunches + c.eventRecords + c.deviceGets)
      << what << ": " << c.describe();
  EXPECT_EQ(cost.allocations, 0u) << what << " allocated on the caller's thread";
}

float valueOf(int rank, size_t i) { return static_cast<float>((rank * 5 + i * 3) % 17) - 8.f; }

float sumOf(int n, size_t i) {
  float s = 0;
  for (int q = 0; q < n; ++q) s += valueOf(q, i);
  return s;
}

std::vector<float> inputOf(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = valueOf(rank, i);
  return v;
}

class OnCallerCallCounts : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ringreduce::testing::resetFakeDevices(GetParam()); }
};

// In place and out of place, SUM: each steady-state allreduce is one launch.
TEST_P(OnCallerCallCounts, AnAllreduceIsOneKernelLaunch) {
  const int n = GetParam();
  runRanks(n, [n](Transport& t, int rank) {
    OnCallerRank self(t, rank, n);
    std::vector<float> data = inputOf(rank, kOnCallerCount), out(kOnCallerCount);
    const std::vector<float> input = data;
    auto copying = [&] { return self.allreduce(input.data(), out.data(), ReduceOp::Sum, 3); };
    auto inPlace = [&] { return self.allreduce(data.data(), data.data(), ReduceOp::Sum, 4); };
    copying();  // warm: the first on-caller collective notes the caller's stream
    for (int k = 0; k < kSteadyOps; ++k) {
      const Cost copied = costOf(copying);
      EXPECT_EQ(copied.ran, DevicePathTaken::FlagsOneShot);
      expectOneLaunch(copied, "an out-of-place allreduce");
      for (size_t i = 0; i < kOnCallerCount; ++i) ASSERT_EQ(out[i], sumOf(n, i)) << i;
      data = input;
      expectOneLaunch(costOf(inPlace), "an in-place allreduce");
      for (size_t i = 0; i < kOnCallerCount; ++i) ASSERT_EQ(data[i], sumOf(n, i)) << i;
    }
  });
}

TEST_P(OnCallerCallCounts, AnAllgatherAndAReduceScatterAreOneKernelLaunchEach) {
  const int n = GetParam();
  runRanks(n, [n](Transport& t, int rank) {
    OnCallerRank self(t, rank, n);
    const size_t per = kOnCallerCount / static_cast<size_t>(n);
    const std::vector<float> mine = inputOf(rank, per), whole = inputOf(rank, per * n);
    std::vector<float> gathered(per * n), block(per);
    auto allgather = [&] {
      return self.paths().allgatherOnCaller(mine.data(), gathered.data(), per, DataType::Float32,
                                            OnCallerRank::stream(), OnCallerRank::call(5));
    };
    auto reduceScatter = [&] {
      return self.paths().reduceScatterOnCaller(whole.data(), block.data(), per,
                                                DataType::Float32, ReduceOp::Sum,
                                                OnCallerRank::stream(), OnCallerRank::call(6));
    };
    allgather();  // warm
    for (int k = 0; k < kSteadyOps; ++k) {
      const Cost gather = costOf(allgather);
      EXPECT_EQ(gather.ran, DevicePathTaken::Flags);
      expectOneLaunch(gather, "an allgather");
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < per; ++i) ASSERT_EQ(gathered[q * per + i], valueOf(q, i));
      }
      const Cost scatter = costOf(reduceScatter);
      EXPECT_EQ(scatter.ran, DevicePathTaken::Flags);
      expectOneLaunch(scatter, "a reduce-scatter");
      for (size_t i = 0; i < per; ++i) ASSERT_EQ(block[i], sumOf(n, rank * per + i)) << i;
    }
  });
}

// Ranks time-sliced on one GPU meet through stream memory operations: a
// copy in, the barrier's writes and waits, the reduce-copy kernel, and a
// mark for the watchdog's deadline, recorded again from a pool rather than
// created per collective; still no device switch, no host sync and no
// allocation.
TEST_P(OnCallerCallCounts, UnderStreamMemOpsAnAllreduceCreatesNoEvent) {
  const int n = GetParam();
  runRanks(n, [n](Transport& t, int rank) {
    OnCallerRank self(t, rank, n, CudaSync::StreamMemOps);
    const std::vector<float> input = inputOf(rank, kOnCallerCount);
    std::vector<float> out(kOnCallerCount);
    auto copying = [&] { return self.allreduce(input.data(), out.data(), ReduceOp::Sum, 3); };
    copying();  // warm: the stream noted, the first mark created
    for (int k = 0; k < kSteadyOps; ++k) {
      const Cost cost = costOf(copying);
      const FakeCallCounts& c = cost.calls;
      EXPECT_EQ(cost.ran, DevicePathTaken::FlagsOneShot);
      EXPECT_EQ(c.kernelLaunches, 1u) << c.describe();
      EXPECT_EQ(c.memcpys, 1u) << c.describe();
      EXPECT_EQ(c.streamMemOps, 4u * (n - 1)) << c.describe();  // writes and waits, per peer
      EXPECT_EQ(c.eventCreates, 0u) << c.describe();
      EXPECT_EQ(c.eventRecords, 1u) << c.describe();
      EXPECT_EQ(c.eventDestroys, 0u) << c.describe();
      EXPECT_EQ(c.deviceSets, 0u) << c.describe();
      EXPECT_EQ(c.hostSyncs, 0u) << c.describe();
      EXPECT_EQ(cost.allocations, 0u) << "a stream-memops allreduce allocated";
      for (size_t i = 0; i < kOnCallerCount; ++i) ASSERT_EQ(out[i], sumOf(n, i)) << i;
    }
    EXPECT_EQ(self.paths().signalGroup()->failure(), "");
  });
}

INSTANTIATE_TEST_SUITE_P(World, OnCallerCallCounts, ::testing::Values(2, 4),
                         [](const auto& info) { return "World" + std::to_string(info.param); });

// World 1: an in-place allreduce has nothing to move, and does nothing;
// out of place it is the one launch that copies.
TEST(DirectCallCountsWorld1, AnInPlaceAllreduceCallsNothing) {
  ringreduce::testing::resetFakeDevices(1);
  runRanks(1, [](Transport& t, int rank) {
    OnCallerRank self(t, rank, 1);
    std::vector<float> data = inputOf(0, kOnCallerCount), out(kOnCallerCount);
    const std::vector<float> input = data;
    auto copying = [&] { return self.allreduce(input.data(), out.data(), ReduceOp::Avg, 3); };
    auto inPlace = [&] { return self.allreduce(data.data(), data.data(), ReduceOp::Avg, 4); };
    copying();  // warm
    for (int k = 0; k < kSteadyOps; ++k) {
      const Cost nothing = costOf(inPlace);
      EXPECT_EQ(nothing.ran, DevicePathTaken::FlagsOneShot);
      EXPECT_EQ(nothing.calls.total(), 0u) << nothing.calls.describe();
      EXPECT_EQ(nothing.allocations, 0u);
      EXPECT_EQ(data, input);
      expectOneLaunch(costOf(copying), "an out-of-place allreduce at world 1");
      EXPECT_EQ(out, input);
    }
  });
}

// The hot path's boolean answers as the reason does, for every (source,
// destination, op), and no for what is not a dtype or an op.
TEST(KernelSupports, AgreesWithTheUnsupportedReasonEverywhere) {
  int supported = 0;
  for (int s = 0; s <= static_cast<int>(DataType::Complex128); ++s) {
    for (int d = 0; d <= static_cast<int>(DataType::Complex128); ++d) {
      for (int o = 0; o <= static_cast<int>(ReduceOp::BXor); ++o) {
        const auto src = static_cast<DataType>(s), dst = static_cast<DataType>(d);
        const auto op = static_cast<ReduceOp>(o);
        const bool yes = kernelSupports(src, dst, op);
        EXPECT_EQ(yes, kernelUnsupportedReason(src, dst, op).empty())
            << dataTypeName(src) << " -> " << dataTypeName(dst) << " " << reduceOpName(op);
        supported += yes ? 1 : 0;
      }
    }
  }
  EXPECT_GT(supported, 0);
  EXPECT_TRUE(kernelSupports(DataType::Float32, DataType::Float32, ReduceOp::Sum));
  EXPECT_FALSE(kernelSupports(DataType::Complex64, DataType::Complex64, ReduceOp::Max));
  EXPECT_FALSE(kernelSupports(static_cast<DataType>(200), DataType::Float32, ReduceOp::Sum));
  EXPECT_FALSE(kernelSupports(DataType::Float32, DataType::Float32, static_cast<ReduceOp>(99)));
}

}  // namespace
