// Allreduce for ranks that share a host and may reach each other's memory
// (algorithms/cross_memory/peer_processes.h). Rank r owns block r of the buffer
// (chunkOf(count, n, r)). For each segment of it, it reads every peer's
// segment straight from that peer's buffer into a cache-sized scratch,
// reduces it into its own, and then writes the result into every peer's
// buffer while it is still in cache. No peer's thread takes part in the
// copies: the ranks exchange their buffers' addresses at the start and one
// word at the end (algorithms/cross_memory/stop_words.h): "finished" or "failed", and no
// rank returns its tensor, even after a failure, before every peer that
// entered the collective has said it, or died. Between segments a rank
// stops on a peer's "failed", a death, a rank giving up or the deadline.
// What stays open: a rank that copies and is not scheduled for longer than
// the 100 ms after its peer's deadline, or a peer's abort(), which does not
// wait; torch's own advice after a timeout is to end the process.
//
// Why: the ring (and direct) pulls each reduced block in a second pass that
// reads it back from memory and writes a destination the reader does not
// have in cache. Here the destination is the very bytes this rank just read
// from the peer, so the result goes out from cache into lines already held:
// per rank four passes over its block's bytes (read the peer's, read mine,
// write mine, write the peer's) instead of six. 64 MiB at world 2 on the
// 2-core machine: benchmarks/RESULTS.md.
//
// Same element math as the ring: block r is the reduction of rank r's
// values with each peer's in the order r+1, r+2, ... (mod n), float16 and
// bfloat16 combined in float32 and rounded once per peer, AVG's division
// fused into the last. Every rank ends with the same bytes: each block is
// computed once, by its owner.
#pragma once

#include "algorithms/comm.h"
#include "algorithms/cross_memory/peer_processes.h"
#include "algorithms/ring_allreduce.h"
#include "core/base/op_context.h"

namespace ringreduce {

// In place. Throws InvalidArgument when `peers` is not usable (naming why),
// TransportError when a peer's memory cannot be reached (its process gone),
// TimeoutError past op's deadline.
void crossMemoryAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          const PeerProcesses& peers);

}  // namespace ringreduce
