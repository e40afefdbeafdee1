// The device ring's CUDA side (backend/device_ring_steps.h, torch-free) run
// by the device ring's schedule on the fake device: its tickets, slots and
// staging as the GPU path uses them, with every result exact. Per segment
// it costs no CUDA call beyond the work and one ticket (issue 43: the
// ring's per-step cost): a stream write of a count that the host polls by
// reading memory, or, without stream memory operations, an event recorded
// again once reached (no more created than are ever pending at once).
#include <gtest/gtest.h>
#include <poll.h>

#include <cstdint>
#include <vector>

#include "algorithms/device/ring.h"
#include "backend/device_ring_steps.h"
#include "fake_call_counts.h"
#include "fake_device.h"
#include "fake_device_context.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::FakeCallCounts;
using ringreduce::testing::runComms;
using ringreduce::testing::takeFakeCallCounts;
using ringreduce::testing::TransportKind;

namespace {

// Small integers: every sum is exact in float32.
float inputOf(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 5)); }

// Runs deviceRingAllreduce of `count` floats on `steps`; true when every
// element is the exact sum over `n` ranks.
bool allreduceIsExact(const Comm& comm, int rank, int n, size_t count, CudaRingSteps& steps,
                      uint64_t seq) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = inputOf(rank, i);
  const OpContext op("allreduce", seq, std::chrono::seconds(60));
  deviceRingAllreduce(comm, op, {data.data(), count, DataType::Float32, ReduceOp::Sum}, steps);
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += inputOf(r, i);
    if (data[i] != expected) return false;
  }
  return true;
}

}  // namespace

// Four allreduces on each rank's own steps (worlds 2 and 3); returns each
// rank's calls into the CUDA layer from the steps' construction on.
constexpr int kCollectives = 4;
std::vector<FakeCallCounts> runCollectives(int n) {
  std::vector<FakeCallCounts> counted(static_cast<size_t>(n));
  runComms(n, TransportKind::Loopback, [&](const Comm& comm, int rank) {
    takeFakeCallCounts();
    CudaRingSteps steps(rank);  // one GPU per rank
    int stream = 0;             // the fake runs streams at once: any handle
    steps.bind(&stream);
    // 3 MiB of floats per rank: chunks of 1-1.5 MiB, so segments of a
    // quarter chunk up to the 1 MiB slots, and several reuses of each slot.
    const size_t count = (size_t{3} << 20) / sizeof(float) + 7;
    for (int i = 0; i < kCollectives - 1; ++i) {
      EXPECT_TRUE(allreduceIsExact(comm, rank, n, count, steps, i + 1)) << "rank " << rank;
    }
    EXPECT_TRUE(allreduceIsExact(comm, rank, n, 1000, steps, kCollectives)) << "rank " << rank;
    counted[static_cast<size_t>(rank)] = takeFakeCallCounts();
  });
  return counted;
}

TEST(CudaRingSteps, TicketsAreAStreamWrittenCountPolledWithoutACudaCall) {
  ringreduce::testing::resetFakeDevices(3);
  for (int n : {2, 3}) {
    for (const FakeCallCounts& calls : runCollectives(n)) {
      EXPECT_GT(calls.kernelLaunches, 0u);
      // A ticket per reduction, and the fence of each collective.
      EXPECT_EQ(calls.streamMemOps, calls.kernelLaunches + kCollectives) << calls.describe();
      EXPECT_EQ(calls.eventCreates + calls.eventRecords + calls.eventQueries, 0u)
          << calls.describe();
    }
  }
}

// Events are created only while more tickets are pending than ever before
// (at most a slot's reduction each, and a fence), however many collectives
// run: the pool's size, not the traffic, bounds them.
TEST(CudaRingSteps, WithoutStreamMemoryOperationsEventsAreRecordedAgain) {
  ringreduce::testing::resetFakeDevices(3);
  struct NoMemOps {  // restored however the test ends
    NoMemOps() { ringreduce::testing::setFakeStreamMemOps(false); }
    ~NoMemOps() { ringreduce::testing::setFakeStreamMemOps(true); }
  } noMemOps;
  const uint64_t pendingAtMost = CudaRingSteps::kSlots + 1;
  for (int n : {2, 3}) {
    for (const FakeCallCounts& calls : runCollectives(n)) {
      EXPECT_EQ(calls.eventRecords, calls.kernelLaunches + kCollectives) << calls.describe();
      EXPECT_LE(calls.eventCreates, pendingAtMost) << calls.describe();
      EXPECT_EQ(calls.eventDestroys, 0u) << "events destroyed while the steps live";
      EXPECT_EQ(calls.streamMemOps, 0u);
    }
  }
}

// A waiter whose spin is over sleeps on the steps' wake fd (algorithms/device/poll.h):
// the steps queue a host function behind the stream's work only when asked
// (a spin that finds its ticket done costs none), one per range of
// tickets: a second sleep on a ticket already covered queues nothing. The
// fake's streams are done by the time work is queued, so its host function
// runs at once and the fd is readable.
TEST(CudaRingSteps, AWaiterSleepsOnAHostFunctionQueuedOnlyWhenItAsks) {
  ringreduce::testing::resetFakeDevices(8);  // the default: later tests rely on it
  CudaRingSteps steps(0);
  int stream = 0;
  steps.bind(&stream);
  std::vector<float> src(64), dst(64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = inputOf(1, i);
  takeFakeCallCounts();
  const auto first = steps.copy(dst.data(), src.data(), 32 * sizeof(float));
  const auto second = steps.copy(dst.data() + 32, src.data() + 32, 32 * sizeof(float));
  EXPECT_EQ(takeFakeCallCounts().hostFunctions, 0u);
  auto readable = [](int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  };
  const int fd = steps.wakeFd(first);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(takeFakeCallCounts().hostFunctions, 1u);
  // Covered by the same host function; the call clears what the fd said.
  EXPECT_EQ(steps.wakeFd(second), fd);
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(takeFakeCallCounts().hostFunctions, 0u);
  EXPECT_TRUE(steps.done(second));
  const auto third = steps.copy(dst.data(), src.data(), sizeof(float));
  EXPECT_EQ(steps.wakeFd(third), fd);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(takeFakeCallCounts().hostFunctions, 1u);
  EXPECT_EQ(dst, src);
}
