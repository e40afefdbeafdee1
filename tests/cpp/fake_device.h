// A host stand-in for the CUDA primitives under csrc/cuda/ipc/ipc_collectives
// (cuda/ipc/ipc_memory.h and launchReduceCopy), so the IPC protocol (exchange
// rounds, barriers, slicing, chunking, fallbacks) runs in GoogleTest with
// ranks as threads of one process. Device memory is host memory, a mapped
// peer pointer is the peer's own pointer, and kernels and copies run at once on
// the calling thread, which is what the protocol's barriers guarantee the
// real device sees: no rank touches a peer's data outside them.
#pragma once

#include <chrono>
#include <set>

#include "fake_call_counts.h"

namespace ringreduce::testing {

// Memory at `ptr` cannot be shared (as with expandable segments) until
// clearUnshareable().
void markUnshareable(const void* ptr);
void clearUnshareable();

// How long a fake stream wait waits before it throws (a real one waits
// until the watchdog releases it); 30 s unless a test says otherwise.
void setFakeStreamWaitLimit(std::chrono::milliseconds limit);
// Whether the fake driver offers stream memory operations (default: yes).
void setFakeStreamMemOps(bool available);

// --- several devices ------------------------------------------------------
// Each rank of a test passes its own device index (rank k: device k), as
// one GPU per rank does; a fake "GPU" k has the uuid {0xfa, 0xce, k}.
// Between two devices, peer access is present (the default), absent (the
// runtime says no: cudaDeviceCanAccessPeer) or broken (the mapping opens,
// but what goes through it lands elsewhere: a mapped peer buffer is a decoy
// of the same size, the IOMMU/ACS failure).
enum class FakePeerAccess { Present, Absent, Broken };
void setFakePeerAccess(int deviceA, int deviceB, FakePeerAccess access);  // both ways
// Opening a peer's memory (PeerMappings::map of a handle not yet open) throws
// on `device` from now on.
void failFakeMapsOn(int device);
// Every pair back to present peer access, and maps that work everywhere
// (fake_device_context.h resets the devices' contexts).
void resetFakePeerAccess();
// The devices this thread handed to the fake CUDA layer since the last
// call (which clears them): a rank that touches a device it does not own
// shows here.
std::set<int> takeDevicesUsedByThisThread();

// --- what the hot path costs ----------------------------------------------
// Every call into the fake CUDA layer is counted per thread, by kind:
// takeFakeCallCounts() (fake_call_counts.h) returns and clears them.
// Whether this thread's device-flags kernels run (the default) or are only
// counted: with them off, a benchmark times the host's side of a collective
// alone, each rank on its own, with no peer to meet.
void setFakeKernelsRun(bool run);
bool fakeKernelsRun();

// --- the device's own clock -----------------------------------------------
// Work runs at once on the host, but timing marks (recordTimingMark) read a
// device clock of each stream: the time its queued work would end, had
// each reduce-copy kernel launched by this thread taken `duration` and
// each fakeDeviceWork its own, starting no earlier than the host queued
// it. A host that sees a timing mark reached (markReached) is taken to
// have waited for it: its later work on that stream starts from there.
// So a test makes a candidate slow on the device without waiting.
void setFakeKernelTime(std::chrono::nanoseconds duration);  // this thread's launches
void fakeDeviceWork(void* stream, std::chrono::nanoseconds duration);
// Every stream idle again (a test's streams are locals whose addresses
// later tests reuse).
void resetFakeDeviceClocks();

}  // namespace ringreduce::testing
