// A copy with non-temporal ("streaming") stores: each destination cache line
// is written whole, past this core's caches, without being read first.
//
// Why: the host channel's buffers are read by the peers between two writes
// of this rank, so when a rank writes its next input there, the lines are
// held by the peers' cores. An ordinary store must first own each line
// (read-for-ownership: the peers' copies invalidated and the line fetched),
// one line after another. On the 2-vCPU AMD EPYC VM, with the cores placed
// apart, 64 KiB into such lines took 28 us with memcpy and 2.1 us streamed
// (1 MiB: 420 us and 38 us), against 1.2 us into a private buffer; with the
// cores close, memcpy took 7.2 us and streaming still 2.1. The price is on
// the reader's side: streamed lines come from memory, not from the writer's
// cache (64 KiB read back in 4.1 us instead of 1.5; 1 MiB 50 us instead of
// 25), so the channel chooses per size by measurement
// (transport/host/channel_stores.h).
#pragma once

#include <cstddef>

namespace ringreduce {

// Copies `bytes` from `src` to `dst` (not overlapping), the whole cache lines
// of `dst` with streaming stores where the CPU has them (x86-64: SSE2, every
// such CPU), the partial lines at either end with memcpy. Fenced before it
// returns: a flag stored after it (release) is seen after the data.
// Elsewhere it is memcpy.
void copyStreaming(void* dst, const void* src, size_t bytes);

// Whether copyStreaming streams on this build (false: it is memcpy).
bool streamingStoresAvailable();

}  // namespace ringreduce
