// A device-ring ticket that is not done when the wait's spin is over
// (algorithms/device/poll.h): the waiter sleeps on the transport's event fd
// together with the steps' wake fd (DeviceSteps::wakeFd), which the device
// makes readable when it gets there. Here the device is the fake of
// fake_device_steps.h holding the ticket's work back until it is released,
// and the transport a one-rank loopback that records every sleep: which fd
// it was given, for how long, and whether that fd woke it. The old waiter
// slept in 1 ms slices without any fd of the device's.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/device/poll.h"
#include "fake_device_steps.h"
#include "transport/loopback/loopback_transport.h"

using namespace ringreduce;
using ringreduce::testing::FakeDeviceSteps;

namespace {

struct Sleep {
  int fd;
  int timeoutMs;
  bool wokenByFd;
};

// One rank, so no message ever comes: a sleep ends by its fd or its timeout.
class SleepRecordingLoopback : public LoopbackTransport {
 public:
  explicit SleepRecordingLoopback(const Config& config)
      : LoopbackTransport(std::make_shared<LoopbackFabric>(1), 0, config) {}
  void sleepArmed(int extraFd, int timeoutMs) override {
    started.fetch_add(1);
    if (duringSleep) duringSleep();
    pollfd fd{extraFd, POLLIN, 0};
    const bool woken = ::poll(&fd, extraFd >= 0 ? 1 : 0, timeoutMs) > 0;
    std::lock_guard<std::mutex> lock(mutex);
    sleeps.push_back({extraFd, timeoutMs, woken});
  }
  std::vector<Sleep> recorded() {
    std::lock_guard<std::mutex> lock(mutex);
    return sleeps;
  }

  std::atomic<int> started{0};
  std::function<void()> duringSleep;  // the waiter's thread, as it falls asleep

 private:
  std::mutex mutex;
  std::vector<Sleep> sleeps;
};

Config noSpin() {
  Config config;
  config.spinMicroseconds = 0;  // the waiter sleeps as soon as its ticket is not done
  return config;
}

FakeDeviceSteps::Options onePollPerWork() {
  FakeDeviceSteps::Options options;
  options.minPolls = options.maxPolls = 1;
  return options;
}

std::vector<float> freshValues(size_t count) {
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> value(-1000, 1000);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(value(random));
  return values;
}

}  // namespace

// The device gets there while the waiter sleeps (released as it falls
// asleep, on its own thread: the order of events is fixed): one sleep, on
// the device's fd, with no slice of its own, ended by that fd.
TEST(DeviceTicketWait, TheWaiterSleepsOnTheDevicesFdAndWakesOnIt) {
  SleepRecordingLoopback transport(noSpin());
  FakeDeviceSteps steps(onePollPerWork());
  const std::vector<float> src = freshValues(256);
  std::vector<float> dst = freshValues(256);
  const auto ticket = steps.copy(dst.data(), src.data(), src.size() * sizeof(float));
  steps.holdFrom(ticket);
  transport.duringSleep = [&] { steps.release(); };

  const OpContext op("allreduce", 1, std::chrono::seconds(60));
  DevicePoller(transport, op).waitFor(steps, ticket, [] { return std::string("copy"); });

  EXPECT_EQ(dst, src);
  const std::vector<Sleep> sleeps = transport.recorded();
  ASSERT_EQ(sleeps.size(), 1u);
  EXPECT_EQ(sleeps[0].fd, steps.wakeDescriptor());
  EXPECT_TRUE(sleeps[0].wokenByFd);
  EXPECT_GE(sleeps[0].timeoutMs, 100) << "a sleep slice, not a wait for the device";
  EXPECT_EQ(steps.wakeRequests(), 1u);
}

// The same with the device finishing on another thread, late: every sleep
// the waiter takes is on the device's fd (whatever ends it), and the last
// one is ended by that fd.
TEST(DeviceTicketWait, ATicketFinishedLateByAnotherThreadWakesTheWaiter) {
  SleepRecordingLoopback transport(noSpin());
  FakeDeviceSteps steps(onePollPerWork());
  const std::vector<float> src = freshValues(1024);
  std::vector<float> dst = freshValues(1024);
  const auto ready = steps.fence();
  const auto ticket = steps.copy(dst.data(), src.data(), src.size() * sizeof(float));
  steps.holdFrom(ticket);
  std::thread device([&] {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (transport.started.load() == 0 && std::chrono::steady_clock::now() < limit) {
      std::this_thread::yield();
    }
    steps.release();
  });
  const OpContext op("allreduce", 1, std::chrono::seconds(60));
  DevicePoller poller(transport, op);
  poller.waitFor(steps, ready, [] { return std::string("fence"); });
  poller.waitFor(steps, ticket, [] { return std::string("copy"); });
  device.join();

  EXPECT_EQ(dst, src);
  const std::vector<Sleep> sleeps = transport.recorded();
  ASSERT_GE(sleeps.size(), 1u);
  for (const Sleep& sleep : sleeps) {
    EXPECT_EQ(sleep.fd, steps.wakeDescriptor());
    EXPECT_GE(sleep.timeoutMs, 100);
  }
  // The last sleep was ended by the device; or the release came between
  // two sleeps, and the look before the next one found the fd readable.
  EXPECT_TRUE(sleeps.back().wokenByFd || steps.wakeRequests() == sleeps.size() + 1);
  EXPECT_GE(steps.wakeRequests(), sleeps.size());
}

// A ticket done while the waiter still spins asks nothing of the device.
TEST(DeviceTicketWait, ATicketReachedWhileSpinningCostsNoWakeUp) {
  Config config;
  config.spinMicroseconds = 1000000;  // a spin far longer than the work
  config.adaptiveSpin = false;
  SleepRecordingLoopback transport(config);
  FakeDeviceSteps::Options options;
  options.minPolls = options.maxPolls = 50;
  FakeDeviceSteps steps(options);
  const std::vector<float> src = freshValues(64);
  std::vector<float> dst = freshValues(64);
  const auto ticket = steps.copy(dst.data(), src.data(), src.size() * sizeof(float));
  const OpContext op("allreduce", 1, std::chrono::seconds(60));
  DevicePoller(transport, op).waitFor(steps, ticket, [] { return std::string("copy"); });
  EXPECT_EQ(dst, src);
  EXPECT_EQ(steps.wakeRequests(), 0u);
  EXPECT_TRUE(transport.recorded().empty());
}
