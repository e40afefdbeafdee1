// A broadcast beyond the host channel's four buffers, where every rank is on
// one host: the channel carries it still, the way that pays at the moment.
//
// Its first turn: each rank puts up where its tensor lies, the root also how
// the message goes, its choice from its own view of the cores
// (HostChannel::coresContended):
// - the cores free: through the buffers, as a broadcast that fits them
//   (hostChannelBroadcast), in as many turns as it takes: the root copies
//   piece k into its buffer while the receivers copy piece k - 1 out of its
//   other one, a 1 MiB piece staying in cache between the two copies. Two
//   ranks, 8-64 MiB: 0.38-0.55x Open MPI's Bcast, against 0.53-0.69x for the
//   root writing half of the message into the receiver's tensor while the
//   receiver reads the other half (process_vm_writev/readv: the kernel pins
//   every page; tried, not kept), and 1.04-1.23x for the receiver reading it
//   all through UCX's cma rendezvous (the chain, before; benchmarks/history/
//   2026-12-05-large-broadcast.md);
// - where other work wants the cores and every rank reaches every other's
//   memory (transport/cross_memory.h): every receiver reads the root's tensor
//   straight from its memory, the root says with its record that it is done
//   with its peers' memory, and the Reduced flags close it. One rank's time
//   slice per copy instead of both ranks' for every piece (busy_cores.py
//   --ops broadcast, 2-8 busy processes: through the buffers always,
//   1.02-1.58x the UCX path's p50 in 5 of 12 loaded cells; so, 0.71-1.28x).
//   "Wanted" by a margin of one task (HostChannel::coresContended). The
//   reads pin every page of the root's tensor, so the root notes it first:
//   one of 4 MiB or more that comes back goes onto 2 MiB pages
//   (core/base/huge_pages.h), as the in-place gathers' blocks do. With 2-8
//   busy processes, 8 and 16 MiB broadcasts took 0.70-0.94x the time they
//   took on 4 KiB pages (busy_cores.py, medians of six runs, EPYC Zen 3).
// Every wait is the channel's: a dead, failed or departed peer, an abort and
// the deadline end it as in every channel collective.
//
// What a rank puts up must stay where it is until the Reduced flags: the
// backend never runs it to publish ahead (its contiguous copy of a strided
// tensor lives only as long as the body).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/chain_broadcast.h"
#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a broadcast of `bytes` beyond the channel's buffers goes this way:
// the channel's settings allow it. The same answer on every rank.
bool largeBroadcastCarries(const Comm& comm, size_t bytes);

// How the root has a large broadcast go (its record says so to the receivers).
enum class LargeBroadcastForm : uint64_t { ThroughBuffers = 1, ReadInPlace = 2 };
// The root's choice: read in place only where the cores are wanted and
// every rank can reach every other's memory.
LargeBroadcastForm largeBroadcastForm(bool coresContended, bool peersReadable);

// As chainBroadcast: the root's `bytes` at `data` land at every other rank's
// `data`. Needs largeBroadcastCarries on every rank.
void largeBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

}  // namespace ringreduce
