// A device ring that fails mid-way: a device that throws, a transport
// aborted, a device that hangs. The rank that fails raises; it then does
// what the engine does (tells the peers, abandons what the op left posted)
// and stays until the others are done with it; the others raise well
// before their deadline, naming it. On the loopback, GroupNews carries the
// news that UCX's peer monitor carries (recording_transport.h).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/device/ring.h"
#include "core/base/errors.h"
#include "fake_device_steps.h"
#include "rank_threads.h"
#include "recording_transport.h"

using namespace ringreduce;
using ringreduce::testing::FakeDeviceSteps;
using ringreduce::testing::GroupNews;
using ringreduce::testing::kindName;
using ringreduce::testing::RecordingTransport;
using ringreduce::testing::runRanks;
using ringreduce::testing::smallSegments;
using ringreduce::testing::TransportKind;

namespace {

class DeviceRingFailure : public ::testing::TestWithParam<TransportKind> {};

std::string transportName(const ::testing::TestParamInfo<TransportKind>& info) {
  return kindName(info.param);
}

// Holds every rank until all have arrived (at most 30 s), so that a rank
// that failed keeps its transport while the others still talk to it.
class Arrivals {
 public:
  explicit Arrivals(int n) : left_(n) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--left_ == 0) all_.notify_all();
    all_.wait_for(lock, std::chrono::seconds(30), [this] { return left_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_;
  int left_;
};

struct Outcome {
  bool raised = false;
  bool timedOut = false;  // a TimeoutError, not a TransportError
  std::string message;
};

// Runs one allreduce of 1001 float32 (12 or more reduce-scatter items per
// rank at n <= 4) on every rank; `setUp` arranges a rank's failure on its
// device and sets its timeout. Returns each rank's outcome.
std::vector<Outcome> runFailing(
    TransportKind kind, int n,
    const std::function<void(int rank, Transport&, FakeDeviceSteps&, std::chrono::milliseconds&)>&
        setUp) {
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  auto news = std::make_shared<GroupNews>();
  Arrivals arrivals(n);
  runRanks(
      n,
      [&](Transport& inner, int rank) {
        RecordingTransport t(inner, nullptr, kind == TransportKind::Loopback ? news : nullptr);
        Workspace workspace;
        const Config config = smallSegments();
        const Comm c{t, config, workspace};
        FakeDeviceSteps::Options options;
        options.seed = 3u + static_cast<uint32_t>(rank);
        FakeDeviceSteps device(options);
        std::chrono::milliseconds timeout(10000);
        setUp(rank, t, device, timeout);
        std::vector<float> data(1001, static_cast<float>(rank));
        const OpContext op("allreduce", 4, timeout);
        Outcome& outcome = outcomes[static_cast<size_t>(rank)];
        try {
          deviceRingAllreduce(c, op, {data.data(), data.size(), DataType::Float32, ReduceOp::Sum},
                              device);
        } catch (const Error& e) {
          outcome = {true, dynamic_cast<const TimeoutError*>(&e) != nullptr, e.what()};
          t.announceFailure(outcome.message);  // as the engine marks the group unusable
          t.abandonOutstanding(op);
        }
        arrivals.arriveAndWait();
      },
      smallSegments(), kind);
  return outcomes;
}

// Every rank but `culprit` raised a TransportError naming it, the op and itself.
void expectNamed(const std::vector<Outcome>& outcomes, int culprit) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (static_cast<int>(r) == culprit) continue;
    const Outcome& o = outcomes[r];
    EXPECT_TRUE(o.raised) << "rank " << r;
    EXPECT_FALSE(o.timedOut) << "rank " << r << " waited for its deadline: " << o.message;
    EXPECT_NE(o.message.find("rank " + std::to_string(culprit)), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("allreduce #4 on rank " + std::to_string(r)), std::string::npos)
        << o.message;
  }
}

}  // namespace

TEST_P(DeviceRingFailure, ADeviceErrorMidRingEndsTheOpOnEveryRank) {
  const auto outcomes = runFailing(GetParam(), 4, [](int rank, Transport&, FakeDeviceSteps& d,
                                                     std::chrono::milliseconds&) {
    if (rank != 2) return;
    d.onReduce = [](size_t i) {
      if (i == 4) throw Error("fake device: the reduce kernel failed");
    };
  });
  EXPECT_TRUE(outcomes[2].raised);
  EXPECT_NE(outcomes[2].message.find("reduce kernel failed"), std::string::npos);
  expectNamed(outcomes, 2);
}

// pg.abort() while the rank waits on its device: its wait ends with the
// reason, not at the deadline.
TEST_P(DeviceRingFailure, AnAbortedTransportEndsTheWaitOnTheDevice) {
  const auto outcomes = runFailing(GetParam(), 3, [](int rank, Transport& t, FakeDeviceSteps& d,
                                                     std::chrono::milliseconds&) {
    if (rank != 1) return;
    d.stallFromReduce(3);
    d.onReduce = [&t](size_t i) {
      if (i == 3) t.abort("aborted by the test");
    };
  });
  EXPECT_TRUE(outcomes[1].raised);
  EXPECT_FALSE(outcomes[1].timedOut);
  EXPECT_NE(outcomes[1].message.find("allreduce #4 on rank 1: aborted by the test"),
            std::string::npos)
      << outcomes[1].message;
  expectNamed(outcomes, 1);
}

// A kernel that never finishes: the rank raises at its deadline, saying the
// device is what it waited for; its peer (a longer deadline) hears of it.
TEST_P(DeviceRingFailure, AStuckDeviceTimesOutNamingTheDevice) {
  const auto outcomes = runFailing(GetParam(), 2, [](int rank, Transport&, FakeDeviceSteps& d,
                                                     std::chrono::milliseconds& timeout) {
    if (rank != 0) return;
    d.stallFromReduce(1);
    timeout = std::chrono::milliseconds(1000);
  });
  EXPECT_TRUE(outcomes[0].timedOut) << outcomes[0].message;
  EXPECT_NE(outcomes[0].message.find("allreduce #4 timed out after 1000 ms on rank 0 (operation "
                                     "timeout reached): still waiting for the device to reduce"),
            std::string::npos)
      << outcomes[0].message;
  expectNamed(outcomes, 0);
}

// Rank 0 waits on a device that hangs when rank 1's device fails: rank 0
// hears of it while polling its device, and raises naming rank 1.
TEST_P(DeviceRingFailure, APeerFailingWhileThisRankWaitsOnItsDeviceIsHeard) {
  const auto outcomes = runFailing(GetParam(), 3, [](int rank, Transport&, FakeDeviceSteps& d,
                                                     std::chrono::milliseconds&) {
    if (rank == 0) d.stallFromReduce(0);
    if (rank == 1) {
      d.onReduce = [](size_t i) {
        if (i == 1) throw Error("fake device: the reduce kernel failed");
      };
    }
  });
  expectNamed(outcomes, 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceRingFailure,
                         ::testing::Values(TransportKind::Ucx, TransportKind::Loopback),
                         transportName);
