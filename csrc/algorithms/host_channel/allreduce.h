// Allreduce through the group's host channel (transport/host/host_channel.h),
// when every rank is on this host and the message fits the channel (below):
// what MPI's shared-memory transport and DeepSpeed's CPU allreduce do, with
// the group's contracts kept (the channel's waits end on deaths, departures,
// failures, aborts, mismatched collectives and the deadline).
//
// In pieces of a buffer, each one turn of the channel. One pass, up to
// twoPhaseFromBytes: every rank copies its input into its buffer and sets
// its Input flag; once every peer's is set, each rank
// reduces all buffers into its own tensor in rank order. Every rank computes
// the same expression, so every rank holds the same bits.
// Two phases, above: every rank copies all but its own chunk into its
// buffer; rank r reduces chunk r of every buffer (in rank order, its own
// values from its input, in place) and puts the result into its own buffer
// (Reduced flag); then every rank copies each peer's reduced chunk. Each
// rank reads n chunks of b/n instead of n buffers of b.
//
// No thread hand-off, allocation or lock of its own: it runs on whichever
// thread runs the collective (the caller's, Engine::runOnCaller, or the
// executor's), spinning with the SpinBudget it is given.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/huge_pages.h"
#include "core/base/op_context.h"

namespace ringreduce {

// From this size the two-phase form (benchmarks/RESULTS.md, "Small
// collectives"). Of two ranks, from 512 KiB: there one pass reads twice what
// two phases read, not n times, and saves the second wait, where a rank
// preempted by other processes costs a time slice: at 256 KiB with 2-8 busy
// processes on the 2 cores the preempted cells' p50 went from about 850 to
// 590 us (cma's: 490), for about 12 us more on a quiet machine (0.6-0.7x
// the faster of Open MPI and DeepSpeed to 0.9-1.0x; RESULTS, "Busy cores").
constexpr size_t kTwoPhaseFromBytes = size_t{256} << 10;
constexpr size_t kTwoRanksTwoPhaseFromBytes = size_t{512} << 10;
inline size_t twoPhaseFromBytes(int ranks) {
  return ranks == 2 ? kTwoRanksTwoPhaseFromBytes : kTwoPhaseFromBytes;
}
// A message larger than a buffer goes through it in pieces, one turn each,
// up to this many; beyond, cma (algorithms/cross_memory/allreduce.h) is
// faster (benchmarks/RESULTS.md, "Small collectives").
constexpr size_t kHostChannelMaxPieces = 4;

// An allreduce goes through it where it fits one buffer, or up to
// kHostChannelMaxPieces buffers while it is smaller than the buffers cma
// moves onto 2 MiB pages (HugePageAdvisor::kMinBytes, 4 MiB): with the
// default 1 MiB buffer, up to 4 MiB exclusive. Beyond, cma, which reads
// the peers' memory in place, one memory pass fewer than the channel (which
// copies the message into its buffers before reducing). Below 4 MiB cma
// loses that pass to the kernel pinning every 4 KiB page of a peer's tensor
// it copies: in `perf`, about as many cycles as the copies at 2 MiB (a
// tensor that small from torch's allocator holds no whole 2 MiB page, and
// cma leaves buffers under 4 MiB on small pages anyway).
// World 2 on the 2-core EPYC, 2026-12-02, three runs of busy_cores.py at
// 0, 2, 4 and 8 busy processes: the channel's p50 below cma's in 12 of 12
// cells at 2 MiB (quiet 179-212 us against 259-286, 8 busy 1.0-1.5 ms
// against 2.7-3.6), 11 of 12 at 3 MiB, 7 of 12 at 4 MiB (mixed with 2 and
// 4 busy processes). Worlds 3 and 4 on the same 2 cores at 2 MiB:
// 0.75-0.81x cma's p50 (benchmarks/RESULTS.md, "Busy cores"). Until that
// day one buffer: 2026-11-29's runs had had the channel at 1.3-2x cma's p50
// at 2-4 MiB with 4-8 busy processes. Since cma reads 256 KiB at a time
// (2026-12-07) it is the faster quiet at 1-3 MiB on the Xeon 6 VM and on the
// EPYC Zen 3 where the cores' placement slows the buffers' copies (up to
// 1.5x), while under load the channel stayed the faster on that EPYC (24 of
// 27 loaded cells at 1.5-3 MiB, to 0.35x cma's p50): no bound suits both,
// and the bound stays (RESULTS.md, cma).
constexpr size_t kHostChannelAllreduceBelowBytes = HugePageAdvisor::kMinBytes;

// Whether an allreduce of `bytes` goes through the host channel: there is
// one (every rank on this host, RINGREDUCE_SHM_BYTES not 0 anywhere), it
// fits one buffer, or kHostChannelMaxPieces below
// kHostChannelAllreduceBelowBytes (at any size where RINGREDUCE_ALGORITHM=shm
// asks for the channel), and no setting asks for another algorithm. A
// function of what every rank holds alike (the channel's existence and size
// are agreed when the group is made), so every rank answers the same for
// the same collective.
bool hostChannelAllreduceApplies(const Comm& comm, size_t bytes);

// In place, like ringAllreduce; waits with comm.spinBudget().
void hostChannelAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args);

// One tensor of a coalesced allreduce: `count` elements at `data`, reduced
// in place.
struct AllreduceSegment {
  void* data = nullptr;
  size_t count = 0;
};

// The same for several tensors of one dtype, as if they were one message,
// their elements in order (what allreduce_coalesced's fused buffer holds):
// the same turns, flags and bits as hostChannelAllreduce of that message, so
// a rank running this meets a peer that runs the fused buffer, with no
// buffer to fuse into and copy back out of. The segments must not overlap.
void hostChannelAllreduceSegments(const Comm& comm, const OpContext& op, DataType type,
                                  ReduceOp reduceOp, const AllreduceSegment* segments,
                                  size_t howMany);

}  // namespace ringreduce
