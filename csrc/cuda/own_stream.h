// A CUDA stream of the group's own (not one of torch's 32 pooled streams,
// which two groups could draw alike and then order their cross-rank
// barriers differently on different ranks: a silent deadlock).
#pragma once

namespace ringreduce::cuda {

// Non-blocking (it never waits on the legacy default stream). Throws Error.
void* createOwnStream(int device);
// After everything queued on it has finished (the caller has waited).
void destroyOwnStream(int device, void* stream);

// Whether `stream` (any, torch's included) is being captured into a CUDA
// graph. Never throws: false when the runtime cannot say.
bool streamCapturing(void* stream);

}  // namespace ringreduce::cuda
