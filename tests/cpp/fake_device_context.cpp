// The fake device's current device and primary contexts per thread (fake_device_context.h)
#include "fake_device_context.h"

#include <mutex>
#include <string>

#include "core/base/errors.h"
#include "cuda/current_device.h"
#include "fake_call_counts.h"

namespace ringreduce::testing {

namespace {

constexpr int kNoProcess = -1;

struct Machine {
  std::mutex mutex;
  int generation = 0;  // a reset forgets every thread's state
  // Until a test resets it: one GPU per rank for the largest device-flags
  // group (launches switch to the rank's device, test_multi_device's k).
  int devices = 8;
  std::map<int, std::set<int>> contexts;  // by process
  int threads = 0;  // that made a device current, numbered in that order
  std::map<int, std::set<int>> touched;  // by thread order
};

Machine& machine() {
  static Machine m;
  return m;
}

struct ThreadState {
  int generation = -1;
  int device = -1;  // -1: never chose one
  int process = kNoProcess;
  int order = -1;  // its number among the threads that made a device current
};
thread_local ThreadState thisThread;

// The calling thread's state under the current generation (mutex held).
ThreadState& stateOf(Machine& m) {
  if (thisThread.generation != m.generation) thisThread = ThreadState{m.generation};
  return thisThread;
}

}  // namespace

void resetFakeDevices(int devices) {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  ++m.generation;
  m.devices = devices;
  m.contexts.clear();
  m.threads = 0;
  m.touched.clear();
}

void fakeProcess(int id) {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  stateOf(m).process = id;
}

std::set<int> fakeContexts(int id) {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.contexts[id];
}

std::map<int, std::set<int>> fakeDevicesByThread() {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.touched;
}

int fakeCurrentDevice() {
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  const int device = testing::stateOf(m).device;
  return device < 0 ? 0 : device;  // as cudaGetDevice says on a fresh thread
}

}  // namespace ringreduce::testing

namespace ringreduce::cuda {

using testing::machine;
using testing::Machine;

int currentDevice() {
  ++testing::fakeCallsOnThisThread.deviceGets;
  return testing::fakeCurrentDevice();
}

void makeCurrent(int device) {
  ++testing::fakeCallsOnThisThread.deviceSets;
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (device < 0 || device >= m.devices) {
    throw Error("fake cudaSetDevice(" + std::to_string(device) + "): no such device");
  }
  testing::ThreadState& state = testing::stateOf(m);
  state.device = device;
  // CUDA 12 and newer: making a device current creates its primary context.
  m.contexts[state.process].insert(device);
  if (state.order < 0) state.order = m.threads++;
  m.touched[state.order].insert(device);
}

bool hasPrimaryContext(int device) {
  ++testing::fakeCallsOnThisThread.contextQueries;
  Machine& m = machine();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.contexts[testing::stateOf(m).process].count(device) > 0;
}

}  // namespace ringreduce::cuda
