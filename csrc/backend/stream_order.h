// One stream waits, on the device, for the work queued so far on another.
// The event it goes through is the device's one reused event, not a new one
// per call: cudaStreamWaitEvent takes the event's state at the call, so the
// next record may follow at once, and creating and destroying an event per
// collective is what this saves.
#pragma once

#include <c10/core/Stream.h>

namespace ringreduce {

// No-op when `waiter` is `done`. Both on one device.
void streamWaitsFor(const c10::Stream& waiter, const c10::Stream& done);

}  // namespace ringreduce
