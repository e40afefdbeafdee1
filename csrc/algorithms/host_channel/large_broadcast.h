// A broadcast beyond three of the host channel's buffers, where every rank is
// on one host: the channel carries it still, the way that pays at the moment.
//
// The root says with its first turn's flag (HostChannel::setNote) how the
// message goes, and where its tensor lies; its choice, from its own view of
// the cores (HostChannel::coresLoadLevel):
// - through the buffers, as a broadcast that fits three (hostChannelBroadcast),
//   in as many turns as it takes, the first carrying the first piece beside
//   the note: the root copies piece k into its buffer while the receivers
//   copy piece k - 1 out of its other one, a 1 MiB piece staying in cache
//   between the two copies. Two ranks on free cores, 8-64 MiB: 0.38-0.55x
//   Open MPI's Bcast, against 0.53-0.69x for the root writing half of the
//   message into the receiver's tensor while the receiver reads the other
//   half (process_vm_writev/readv: the kernel pins every page; tried, not
//   kept), and 1.04-1.23x for the receiver reading it all through UCX's cma
//   rendezvous (the chain, before; benchmarks/history/
//   2026-12-05-large-broadcast.md). A turn of its own for the note (until
//   2026-12-07) made the root wait for its receivers to come before it
//   copied anything: quiet, 4-16 MiB took 0.87-0.92x that time in one set
//   of ten runs after, 0.93-1.06x in another;
// - where each rank gets a quarter of a core or less (4 or more runnable
//   tasks per core, CpuContention::level 2) and every rank reaches every
//   other's memory (transport/cross_memory.h): every receiver reads the
//   root's tensor straight from its memory, the root sets its Reduced flag
//   at once (it reads no peer's memory), and the Reduced flags close it. One
//   copy, by the kernel, instead of two, and one hand-off instead of one a
//   piece. Forcing each form, world 2, 2-vCPU EPYC Zen 4 (AVX-512), twelve runs each
//   (busy_cores.py --ops broadcast, p50 medians): with 8 busy processes 4
//   MiB 1564 us in place against 2324 through the buffers, 8 MiB 2733
//   against 6071; with 2 busy 8 MiB 2581 against 2043, 4 MiB 1149 against
//   430 (both ranks copy at once while each still gets half a core). Until
//   2026-12-07 the root read in place from one task beyond the cores: with
//   2 and 4 busy, 8 MiB through the buffers took 0.74-0.88x that time in 7
//   of 8 sets of ten runs (1.08x in the eighth). Three turns or fewer stay
//   in the buffers whatever the load (broadcast.cpp). The reads pin every
//   page of the root's tensor, so the root notes it first: one of 4 MiB or
//   more that comes back goes onto 2 MiB pages (core/base/huge_pages.h), as
//   the in-place gathers' blocks do. With 2-8 busy processes, 8 and 16 MiB
//   broadcasts took 0.70-0.94x the time they took on 4 KiB pages
//   (busy_cores.py, medians of six runs, EPYC Zen 3).
// Every wait is the channel's: a dead, failed or departed peer, an abort and
// the deadline end it as in every channel collective.
//
// What the root puts up must stay where it is until the Reduced flags: the
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

// How the root has a large broadcast go (its note says so to the receivers).
enum class LargeBroadcastForm : uint64_t { ThroughBuffers = 1, ReadInPlace = 2 };
// The load from which the receivers read in place (CpuContention::level: 4
// or more runnable tasks per core).
constexpr int kReadInPlaceLoadLevel = 2;
// The root's choice, from its view of the cores (HostChannel::coresLoadLevel):
// read in place only from kReadInPlaceLoadLevel and where every rank can
// reach every other's memory.
LargeBroadcastForm largeBroadcastForm(int loadLevel, bool peersReadable);

// As chainBroadcast: the root's `bytes` at `data` land at every other rank's
// `data`. Needs largeBroadcastCarries on every rank.
void largeBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args);

}  // namespace ringreduce
