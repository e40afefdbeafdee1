// A host stand-in for the CUDA primitives under csrc/cuda/ipc/ipc_collectives
// (cuda/ipc/ipc_memory.h and launchReduceCopy), so the IPC protocol (exchange
// rounds, barriers, slicing, chunking, fallbacks) runs in GoogleTest with
// ranks as threads of one process. Device memory is host memory, a mapped
// peer pointer is the peer's own pointer, and kernels and copies run at once on
// the calling thread, which is what the protocol's barriers guarantee the
// real device sees: no rank touches a peer's data outside them.
#pragma once

#include <chrono>

namespace ringreduce::testing {

// Memory at `ptr` cannot be shared (as with expandable segments) until
// clearUnshareable().
void markUnshareable(const void* ptr);
void clearUnshareable();

// How long a fake stream wait waits before it throws (a real one waits
// until the watchdog releases it); 30 s unless a test says otherwise.
void setFakeStreamWaitLimit(std::chrono::milliseconds limit);

}  // namespace ringreduce::testing
