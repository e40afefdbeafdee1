// Gathers over the group's host channel that read each peer's block straight
// from the peer's tensor (transport/cross_memory.h: the kernel copies from
// its address space) instead of through the peer's channel buffer: one copy
// of each block instead of two (the peer's into its buffer, this rank's out
// of it), the way Open MPI's shared-memory transport moves anything above
// 4 KiB. The channel still carries the collective's one turn: each rank puts
// where its block lies into its buffer and raises its Input flag; once every
// peer's is up, each rank reads the peers' blocks into its output; then a
// second flag (Reduced) says it is done reading, and no rank returns (and so
// lets its caller change its input) before every peer has said so. Every
// wait is the channel's: a dead, failed or departed peer, an abort and the
// deadline end it as in every channel collective.
//
// Chosen alike on every rank: where the channel found every rank able to
// read every other's memory when it was opened (HostChannel::peersReadable)
// and the block is at least kCrossMemoryGatherFromBytes, whatever the
// buffers hold (crossMemoryGatherCarries). What a rank puts up must stay
// where it is until the Reduced flags: a body run to publish ahead
// (OpContext::ahead) may put up only memory that outlives it, so the backend
// never runs these ahead (runOnHostChannel's mayPublishAhead): a copy it makes
// of a strided or overlapping input lives as long as the body.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "core/base/op_context.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

// Within what the buffers carry, the channel times both forms and the
// ranks agree on the faster per size class (core/plan/gather_forms.h:
// on the Xeon below in place won, on the 2-vCPU EPYC of 2026-12-04 the
// buffers, 1 MiB all_gather_into_tensor 66 against 100 us);
// runChosenGatherForm runs a gather so. Beyond it, always in place.
//
// From this many bytes per block. World 2 on the 2-vCPU Xeon (AVX-512 with
// AMX) of 2026-12-02 (collective_anchors.py, back to back, p50, with
// RINGREDUCE_CROSS_MEMORY=0 for the buffers' form): all_gather_into_tensor
// of 256 KiB per rank 36.4 us read in place against 43.4 through the
// buffers (Open MPI 41-43), 1 MiB 185 against 210 (MPI 175); the list
// all_gather alike; all_to_all_single of 1 MiB (512 KiB blocks) 106
// against 113 (MPI 94-96). Below, the second flag and the system call cost
// more than the copy saves: 64 KiB 14.5 against 13.7 us, an all-to-all's
// 128 KiB blocks 21.1 against 20.2.
constexpr size_t kCrossMemoryGatherFromBytes = size_t{256} << 10;

// Whether an all-gather of `blockBytes` per rank reads its peers' blocks in
// place: the same answer on every rank.
bool crossMemoryGatherApplies(const HostChannel& channel, size_t blockBytes);
// The same for a message of `parts` tensors of `bytes` together (the
// coalesced all-gathers): at most kCrossMemoryMaxParts, whose records fit
// the turn's first lines.
constexpr size_t kCrossMemoryMaxParts = 64;
bool crossMemoryGatherPartsApply(const HostChannel& channel, size_t parts, size_t bytes);
// Whether the channel carries such a gather however large (it moves no
// block through its buffers): it applies, and the settings allow the
// channel (hostChannelSettingsAllow). The gathers' rules take it beside
// their buffers' limit (hostChannelAllgatherApplies and the others).
bool crossMemoryGatherCarries(const Comm& comm, size_t blockBytes);

// Runs a gather that may read in place (crossMemoryGatherApplies for
// `blockBytes`): in place where the buffers cannot carry `messageBytes`
// (each rank's bytes through them, as hostChannelCollectiveApplies counts
// them), else in the form the channel's GatherForms gives this call, timed
// where the call is a trial. readInPlace(voting): `voting` is the call whose
// records carry the ranks' votes (pass it to crossMemoryGather), or null.
// A run that only publishes ahead (op.publishOnly()) takes the form
// without counting the call: the later run counts it.
template <typename ReadInPlace, typename ThroughBuffers>
void runChosenGatherForm(const Comm& comm, const OpContext& op, size_t blockBytes,
                         size_t messageBytes, const ReadInPlace& readInPlace,
                         const ThroughBuffers& throughBuffers);

// Each rank puts up `published` for its peers; where `reads`, this rank
// reads `blockBytes` at `readAt` bytes into each peer's into blockAt(peer),
// and its own block from `own` (null: in its place already; a rank that
// does not read, a rooted gather's peers, copies nothing). An all-gather
// publishes its input and reads at 0; an all-to-all its whole input, read
// at this rank's block. One turn of the channel whatever the size.
// `blockAt` must not overlap any rank's published bytes but this rank's own.
// `voting`: this call's records also carry each rank's GatherForms vote,
// and every rank decides from them.
template <typename BlockAt>
void crossMemoryGather(const Comm& comm, const OpContext& op, const void* published,
                       size_t blockBytes, size_t readAt, const void* own, const BlockAt& blockAt,
                       bool reads = true, const GatherForms::Call* voting = nullptr);

// The same for `parts` tensors at once, one record each (at most
// kCrossMemoryMaxParts): part i of each rank is bytesOf(i) at
// publishedOf(i); this rank reads each peer's into blockAt(peer, i) and its
// own from ownOf(i) (null: in place).
template <typename PublishedOf, typename BytesOf, typename OwnOf, typename BlockAt>
void crossMemoryGatherParts(const Comm& comm, const OpContext& op, size_t parts,
                            const PublishedOf& publishedOf, const BytesOf& bytesOf,
                            const OwnOf& ownOf, const BlockAt& blockAt,
                            const GatherForms::Call* voting = nullptr);

// The peers are about to read [data, data + bytes) of this rank's memory in
// place (these gathers, and the blocks an uneven all-to-all offers: alltoall.h),
// and the kernel pins every page they read: a buffer of 4 MiB or more
// that comes back goes onto 2 MiB pages (noteCallerBuffer, core/base/
// huge_pages.h), as the UCX path's gathers do with theirs. Without it, 16 MiB
// all-gathers read in place took 1.05-1.16x the UCX path's time quiet on the
// EPYC Zen 3 of 2026-12-07 (`perf`: the pinning's follow_page_pte and
// __get_user_pages ten times the UCX path's), 0.94-0.95x with it, and under
// load 1.09x against 0.79-0.95x (benchmarks/RESULTS.md, "Busy cores"). Not in
// a run that only publishes ahead: the run that follows counts the call.
inline void notePeersReadInPlace(const Comm& comm, const OpContext& op, const void* data,
                                 size_t bytes) {
  if (!op.publishOnly()) noteCallerBuffer(comm, data, bytes);
}

// What it shares with its instances: where this rank's block lies, put up
// for the peers in the turn's first line.
struct CrossMemoryBlock {
  uint64_t address = 0;
  uint64_t bytes = 0;  // the block's, which every rank's fingerprint agrees on
};
// Reads `bytes` at `readAt` of what `peer` put up in `turn` into `into`;
// throws TransportError naming the peer and the reason where the kernel
// refuses.
void readPeerBlock(const Comm& comm, const OpContext& op, const HostChannel::Turn& turn,
                   int peer, void* into, size_t bytes, size_t readAt, size_t part = 0);
// Puts this rank's vote after `parts` records of its turn (`mine`); once
// every peer's turn is up, reads all of them and decides (GatherForms).
void putUpVote(char* mine, size_t parts, const GatherForms& forms, const GatherForms::Call& call);
void decideFromVotes(HostChannel& channel, const HostChannel::Turn& turn, size_t parts,
                     const GatherForms::Call& call);

}  // namespace ringreduce

#include "algorithms/host_channel/cross_memory_gather_impl.h"
