// Allgather through the group's host channel (algorithms/host_channel/turn.h): in
// each turn every rank copies a piece of its block into its buffer, sets its
// flag, copies the same piece from its input into its own place in the
// output while the peers do the same, and once every peer's flag is up,
// copies each peer's piece into its place. Pieces of a buffer, the same on
// every rank. (Its own piece from its input rather than back out of its
// buffer, and during the wait: 64 KiB per rank at world 2 went from 13.5 to
// 9.7 us, 1 MiB from 151 to 86; benchmarks/RESULTS.md, "Writes into the
// host channel".)
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/comm.h"
#include "algorithms/ring_allgather.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether an allgather of `blockBytes` per rank goes through the channel:
// the same answer on every rank (hostChannelCollectiveApplies).
bool hostChannelAllgatherApplies(const Comm& comm, size_t blockBytes);

// As ringAllgather: rank r's block lands at r * blockBytes of every
// output; `input` may be this rank's own block of the output.
void hostChannelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args);

// The same with rank r's block landing at outputs[r] (n separate buffers:
// torch's list all_gather, gathered straight into the caller's tensors).
// `input` may be outputs[rank] itself (in place) and must overlap no other
// output.
void hostChannelAllgatherBlocks(const Comm& comm, const OpContext& op, const void* input,
                                const std::vector<void*>& outputs, size_t blockBytes);

// One tensor of a coalesced allgather (torch's all_gather_into_tensor_coalesced):
// this rank's `bytes` at `input`; rank r's land at output + r * bytes.
struct AllgatherPart {
  const void* input;
  void* output;
  size_t bytes;
};

// Several tensors as one message (algorithms/host_channel/stretches.h): one
// turn for a block that fits a buffer, however many tensors it has. An input
// may be its own place in its output (in place) and must overlap no other
// place of any output.
void hostChannelAllgatherParts(const Comm& comm, const OpContext& op,
                               const std::vector<AllgatherPart>& parts);

// Whether such a message of `parts` tensors, `bytes` per rank together, is
// read from the peers' tensors in place (algorithms/host_channel/cross_memory_gather.h)
// rather than through the buffers: the same answer on every rank. Its parts
// must then stay where they are until it returns, so a caller never runs it
// to publish ahead with copies it drops.
bool hostChannelAllgatherPartsReadInPlace(const Comm& comm, size_t parts, size_t bytes);

// One tensor of torch's all_gather_coalesced, which gathers into one output
// list per rank: this rank's `bytes` at `input`; rank r's land at
// outputs[r].
struct AllgatherListPart {
  const void* input;
  void* const* outputs;  // one place per rank, rank by rank (the caller's array)
  size_t bytes;
};

// The same message as hostChannelAllgatherParts (the turns alike), each
// rank's part landing in its own buffer. An input may be its own place
// (outputs[rank]) and must overlap no other place.
void hostChannelAllgatherListParts(const Comm& comm, const OpContext& op,
                                   const std::vector<AllgatherListPart>& parts);

}  // namespace ringreduce
