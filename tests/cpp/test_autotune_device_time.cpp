// The autotuner's CUDA candidates across nodes (AllreduceTuner::cudaPaths)
// timed alike, on the device's clock (backend/device_trial_clock.h), on
// the fake device: two ranks as threads over the loopback, each with its
// own steps and stream. The device ring runs as it is
// (deviceRingAllreduce on CudaRingSteps, its kernels taking the fake
// kernel time on the device); NCCL's stand-in reduces on the host (the
// fake's device memory is host memory) and keeps the device busy on the
// stream for the time the test gives it, as NCCL's kernels would. The test
// makes one candidate slower, then the other: the faster wins each time,
// on every rank, and the allreduces after the choice run it. Every result
// is exact (small integers).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "algorithms/tuning/autotune.h"
#include "algorithms/device/ring.h"
#include "algorithms/ring_allreduce.h"
#include "backend/device_ring_steps.h"
#include "backend/device_trial_clock.h"
#include "fake_device.h"
#include "fake_device_context.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::runComms;
using ringreduce::testing::TransportKind;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

struct DeviceTimes {
  std::chrono::nanoseconds ringKernel;  // each of the ring's reductions
  std::chrono::nanoseconds nccl;        // NCCL's allreduce
};

std::string describe(CudaAlgorithm algorithm) {
  Config config;
  config.cudaAlgorithm = algorithm;
  return AllreduceTuner::cudaPaths().describe(config);
}

// Runs the trials and two allreduces after them on each of two ranks;
// returns each rank's choice (empty if none was made) and checks that the
// allreduces after it ran the chosen candidate.
std::vector<std::string> choose(const DeviceTimes& times) {
  ringreduce::testing::resetFakeDevices(8);  // the default: later tests rely on it
  ringreduce::testing::resetFakeDeviceClocks();
  constexpr int kTrialsEach = 3;
  constexpr size_t kCount = 3000;  // floats: a few segments per chunk
  std::vector<std::string> chosen(2);
  const uint32_t seed = std::random_device{}();
  runComms(2, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    ringreduce::testing::setFakeKernelTime(times.ringKernel);
    CudaRingSteps steps(rank);
    int stream = 0;
    steps.bind(&stream);
    Config base = comm.config;
    base.autotuneSteps = kTrialsEach;
    AllreduceTuner tuner(base, AllreduceTuner::cudaPaths());
    std::uniform_int_distribution<int> value(-100, 100);
    std::vector<CudaAlgorithm> ran;
    const int total = 2 * kTrialsEach + 2;
    for (int i = 0; i < total; ++i) {
      // Both ranks draw the same pairs (seeded alike per allreduce, fresh
      // per run), so each knows the exact sum.
      std::mt19937 same(seed + static_cast<uint32_t>(i));
      std::vector<float> mine(kCount), other(kCount);
      for (size_t k = 0; k < kCount; ++k) {
        const float a = static_cast<float>(value(same));
        const float b = static_cast<float>(value(same));
        mine[k] = rank == 0 ? a : b;
        other[k] = rank == 0 ? b : a;
      }
      std::vector<float> data = mine;
      const OpContext op("allreduce", static_cast<uint64_t>(i + 1), seconds(60));
      StreamTrialClock clock(rank, &stream, op);
      const size_t bytes = kCount * sizeof(float);
      tuner.allreduce(
          comm, op, bytes,
          [&](const Comm& settings) {
            ran.push_back(settings.config.cudaAlgorithm);
            if (settings.config.cudaAlgorithm == CudaAlgorithm::Nccl) {
              ringAllreduce(settings, op, {data.data(), kCount, DataType::Float32, ReduceOp::Sum});
              ringreduce::testing::fakeDeviceWork(&stream, times.nccl);
            } else {
              deviceRingAllreduce(settings, op,
                                  {data.data(), kCount, DataType::Float32, ReduceOp::Sum}, steps);
            }
          },
          tuner.onTrial(bytes) ? &clock : nullptr);
      for (size_t k = 0; k < kCount; ++k) {
        ASSERT_EQ(data[k], mine[k] + other[k]) << "rank " << rank << ", allreduce " << i;
      }
    }
    const auto choices = tuner.choices();
    if (choices.size() == 1) chosen[static_cast<size_t>(rank)] = choices[0].settings;
    // Each candidate tried kTrialsEach times, then the chosen one.
    ASSERT_EQ(ran.size(), static_cast<size_t>(total));
    EXPECT_EQ(describe(ran[total - 1]), chosen[static_cast<size_t>(rank)]);
    EXPECT_EQ(describe(ran[total - 2]), chosen[static_cast<size_t>(rank)]);
    ringreduce::testing::setFakeKernelTime(std::chrono::nanoseconds(0));
  });
  return chosen;
}

}  // namespace

TEST(CudaTunerTiming, TheFasterCandidateOnTheDeviceWinsWhicheverItIs) {
  // The ring slow on the device (a second per reduction), NCCL 10 ms.
  const auto ncclFaster = choose({seconds(1), milliseconds(10)});
  EXPECT_EQ(ncclFaster[0], describe(CudaAlgorithm::Nccl));
  EXPECT_EQ(ncclFaster[1], describe(CudaAlgorithm::Nccl));
  // The ring's kernels free, NCCL's allreduce 10 s: the ring's time is its
  // schedule's on the host, far less.
  const auto ringFaster = choose({std::chrono::nanoseconds(0), seconds(10)});
  EXPECT_EQ(ringFaster[0], describe(CudaAlgorithm::Ring));
  EXPECT_EQ(ringFaster[1], describe(CudaAlgorithm::Ring));
}

// The clock reads the device: a trial's time is the device's time between
// its marks, not the host's around the run (which here is near nothing).
TEST(CudaTunerTiming, ATrialsTimeIsTheDevicesBetweenItsMarks) {
  ringreduce::testing::resetFakeDevices(8);  // the default: later tests rely on it
  ringreduce::testing::resetFakeDeviceClocks();
  int stream = 0;
  const OpContext op("allreduce", 1, seconds(60));
  StreamTrialClock clock(0, &stream, op);
  clock.start();
  ringreduce::testing::fakeDeviceWork(&stream, seconds(5));
  EXPECT_GE(clock.stop(), 5.0);
}
