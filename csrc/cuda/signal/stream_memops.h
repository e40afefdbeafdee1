// Stream memory operations (cuStreamWriteValue32, cuStreamWaitValue32),
// reached through the runtime's driver entry-point query so that nothing
// links libcuda. They synchronise ranks that share a GPU without MPS: the
// wait sits in the GPU's front end, occupies no SM and needs no host, so a
// time-sliced peer's context can run while this one waits (a spinning
// kernel could hold the GPU for its whole time slice, or forever).
#pragma once

#include <cstdint>
#include <string>

namespace ringreduce::cuda {

// Whether this driver provides them; `why` when not. Never throws.
bool streamMemOpsAvailable(std::string* why);

// After all earlier work on `stream` (and with its writes visible), stores
// `value` at `address` (device memory, a peer's mapped memory included).
void streamWriteValue32(void* stream, uint32_t* address, uint32_t value);
// Later work on `stream` waits until the word at `address` has reached
// `value` in cyclic order ((int32_t)(word - value) >= 0), so a count that
// wraps still compares, and a value far ahead releases any wait for an
// earlier one (how a failed group frees its stuck stream).
void streamWaitValue32(void* stream, const uint32_t* address, uint32_t value);
// Later work on `stream` waits until the word at `address` equals `value`.
void streamWaitValue32Equal(void* stream, const uint32_t* address, uint32_t value);

}  // namespace ringreduce::cuda
