// Devices the way torch handles them (issue 43, item 3), on the fake
// device's per-process contexts (fake_device_context.h): a scope of ours
// gives the caller's thread back a device that had a context, and never
// creates one on a device the rank does not use.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <thread>

#include "cuda/current_device.h"
#include "cuda/device_scope.h"
#include "fake_device_context.h"

using namespace ringreduce::cuda;
using namespace ringreduce::testing;

namespace {

// On a thread that never chose a device (torch's executor, a DataLoader
// worker), in fake process 0.
void onFreshThread(const std::function<void()>& body) {
  std::thread thread([&] {
    fakeProcess(0);
    body();
  });
  thread.join();
}

}  // namespace

TEST(DeviceContexts, AFreshThreadIsLeftOnOurDeviceAndDeviceZeroGetsNoContext) {
  resetFakeDevices(4);
  onFreshThread([] {
    ASSERT_EQ(currentDevice(), 0);  // what the runtime says on such a thread
    {
      DeviceScope scope(3);
      EXPECT_EQ(currentDevice(), 3);
    }
    // Restoring "0" would have created a context on GPU 0.
    EXPECT_EQ(currentDevice(), 3);
  });
  EXPECT_EQ(fakeContexts(0), std::set<int>({3}));
}

TEST(DeviceContexts, APreviousDeviceWithAContextIsGivenBack) {
  resetFakeDevices(4);
  onFreshThread([] {
    makeCurrent(1);  // the user's torch.cuda.set_device(1)
    {
      DeviceScope scope(2);
      EXPECT_EQ(currentDevice(), 2);
    }
    EXPECT_EQ(currentDevice(), 1);
    {
      DeviceScope same(1);  // already current: nothing to switch or restore
      EXPECT_EQ(currentDevice(), 1);
    }
    EXPECT_EQ(currentDevice(), 1);
  });
  EXPECT_EQ(fakeContexts(0), std::set<int>({1, 2}));
}

TEST(DeviceContexts, ACallerOnDeviceZeroGetsItBack) {
  resetFakeDevices(2);
  onFreshThread([] {
    makeCurrent(0);  // device 0 chosen, so it has a context
    { DeviceScope scope(1); }
    EXPECT_EQ(currentDevice(), 0);
  });
  EXPECT_EQ(fakeContexts(0), std::set<int>({0, 1}));
}
