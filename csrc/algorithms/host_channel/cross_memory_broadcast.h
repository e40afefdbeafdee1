// A broadcast beyond the host channel's buffers between ranks that can reach
// each other's memory (transport/cross_memory.h): the root and its receivers
// copy at the same time, each on its own core, instead of one receiver
// reading the root's memory alone.
//
// The channel carries one turn: each rank puts up where its tensor lies (the
// root's is the source, a receiver's the destination; the root's record also
// says where its share starts) and raises its Input flag; once every peer's
// is up, every receiver reads the message up to the root's share from the
// root's memory, and the root writes its share into every receiver's. With
// the cores free the message is cut in n shares of whole pages and the
// root's is the last, so each rank copies (n - 1) / n of it; where other
// work wants the cores the root's share is empty. Then each raises its Reduced
// flag ("done with your memory"), and no rank returns before every peer has
// said so: a receiver's tensor is whole only once the root has written its
// share, and the root's may not change while a receiver still reads it. Every
// wait is the channel's: a dead, failed or departed peer, an abort and the
// deadline end it as in every channel collective.
//
// Why: one copy of the message per receiver either way (UCX's cma rendezvous
// is a single read by the receiver too), but a reader on one core copies
// through the kernel at 7-12 GB/s here, and with the root writing half
// meanwhile 16 MiB moved in 1.1-1.2 ms instead of 1.8-2.1 (2-vCPU EPYC Zen 4,
// a C loop of process_vm_readv and process_vm_writev; benchmarks/RESULTS.md
// for the broadcast itself).
//
// What a rank puts up must stay where it is until the Reduced flags: the
// backend never runs it to publish ahead (its contiguous copy of a strided
// tensor lives only as long as the body).
#pragma once

#include <cstddef>

#include "algorithms/chain_broadcast.h"
#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a broadcast of `bytes` beyond the channel's buffers goes this way:
// the channel's settings allow it and every rank can reach every other's
// memory (HostChannel::peersReadable). The same answer on every rank.
bool crossMemoryBroadcastCarries(const Comm& comm, size_t bytes);

// Where the root's share starts in a message of `bytes` among `n` ranks: the
// last of n shares, on a page boundary (0 < n); where other work wants the
// cores (`coresContended`, the root's view, put up in its record), nothing:
// the receivers read it all, as with UCX's cma rendezvous, since a rank
// that waits for its peer's share waits for that peer's time slice too
// (busy_cores.py --ops broadcast, 8 MiB with 2-8 busy processes: 1.8-5.1 ms
// at p50 with the root's share, 2.0-3.6 without).
size_t crossMemoryBroadcastRootShareAt(size_t bytes, int n, bool coresContended);

// As chainBroadcast: the root's `bytes` at `data` land at every other rank's
// `data`. Needs crossMemoryBroadcastCarries on every rank.
void crossMemoryBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

}  // namespace ringreduce
