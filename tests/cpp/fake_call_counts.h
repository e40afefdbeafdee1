// What the fake device (fake_device.cpp, fake_device_context.cpp) was asked
// to do, counted per thread and by kind: each counter stands for the calls
// into the CUDA runtime that the real wrapper it fakes makes. The hot path's
// tests take the counts around one collective, so a change that adds a
// launch, an event or a device switch to it fails them. Header-only (an
// inline thread_local): fake_device_context.cpp is linked without
// fake_device.cpp into some test binaries, and both count here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace ringreduce::testing {

struct FakeCallCounts {
  uint64_t kernelLaunches = 0;  // device-flags kernel, reduce-copy kernel
  uint64_t eventCreates = 0;    // SharedEvent, recordMark
  uint64_t eventRecords = 0;    // SharedEvent::record, recordMark
  uint64_t eventWaits = 0;      // PeerEvent::waitOn (cudaStreamWaitEvent)
  uint64_t eventQueries = 0;    // markReached
  uint64_t eventDestroys = 0;   // freeMark
  uint64_t memcpys = 0;         // copyOnStream
  uint64_t memsets = 0;         // fillOnStream
  uint64_t streamMemOps = 0;    // stream write/wait value
  uint64_t streamCreates = 0;   // createOwnStream, destroyOwnStream
  uint64_t hostSyncs = 0;       // synchronizeStream, StreamTracker::waitAll
  uint64_t deviceGets = 0;      // currentDevice (cudaGetDevice)
  uint64_t deviceSets = 0;      // makeCurrent (cudaSetDevice)
  uint64_t contextQueries = 0;  // hasPrimaryContext
  uint64_t deviceQueries = 0;   // uuid, SMs, peer access, MPS, stream memops support
  uint64_t ipcCalls = 0;        // export, map (cudaIpc*)
  uint64_t allocations = 0;     // device buffers, pinned memory
  uint64_t hostFunctions = 0;   // callAfterQueuedWork (cudaLaunchHostFunc)

  uint64_t total() const {
    return kernelLaunches + eventCreates + eventRecords + eventWaits + eventQueries +
           eventDestroys + memcpys + memsets + streamMemOps + streamCreates + hostSyncs +
           deviceGets + deviceSets + contextQueries + deviceQueries + ipcCalls + allocations +
           hostFunctions;
  }

  // Every nonzero counter, for a test's failure message.
  std::string describe() const {
    std::string text;
    auto add = [&text](const char* name, uint64_t n) {
      if (n == 0) return;
      if (!text.empty()) text += ", ";
      text += std::string(name) + " " + std::to_string(n);
    };
    add("kernel launches", kernelLaunches);
    add("event creates", eventCreates);
    add("event records", eventRecords);
    add("event waits", eventWaits);
    add("event queries", eventQueries);
    add("event destroys", eventDestroys);
    add("memcpys", memcpys);
    add("memsets", memsets);
    add("stream memops", streamMemOps);
    add("stream creates/destroys", streamCreates);
    add("host syncs", hostSyncs);
    add("device gets", deviceGets);
    add("device sets", deviceSets);
    add("context queries", contextQueries);
    add("device queries", deviceQueries);
    add("IPC calls", ipcCalls);
    add("allocations", allocations);
    add("host functions", hostFunctions);
    return text.empty() ? "no CUDA call" : text;
  }
};

// The calling thread's counts; the fake adds to them.
inline thread_local FakeCallCounts fakeCallsOnThisThread;

// The calling thread's counts since the last take (which clears them).
inline FakeCallCounts takeFakeCallCounts() { return std::exchange(fakeCallsOnThisThread, {}); }

}  // namespace ringreduce::testing
