// Gather and scatter of equal blocks through the group's host channel
// (algorithms/host_channel/turn.h). Gather: in each turn every rank copies a piece of
// its block into its buffer and the root copies every rank's piece into
// its place. Scatter: in each turn the root copies a piece of each rank's
// block into slot r of its buffer and every rank copies its slot out.
// Pieces alike on every rank; every rank sets its flag in every turn.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether a gather or scatter of `blockBytes` per rank goes through the
// channel: the same answer on every rank (hostChannelCollectiveApplies;
// a scatter's root puts n blocks into its buffers).
bool hostChannelGatherApplies(const Comm& comm, size_t blockBytes);
bool hostChannelScatterApplies(const Comm& comm, size_t blockBytes);

// Gather: each rank's `blockBytes` at `input` land at rank * blockBytes of
// the root's `output` (unused elsewhere). Scatter: block r of the root's
// `input` (unused elsewhere) lands at rank r's `output`.
struct RootedBlocksArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t blockBytes = 0;
  int root = 0;
};
void hostChannelGather(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args);
void hostChannelScatter(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args);

// The same with the root's blocks apart (torch's gather and scatter lists,
// read and written where they are, no flat buffer between): gather's rank r
// lands at the root's outputs[r], scatter's root sends inputs[r] to rank r.
// Empty elsewhere. A block may overlap no other block nor `input`/`output`
// (but gather's outputs[root] may be `input` itself).
void hostChannelGatherBlocks(const Comm& comm, const OpContext& op, const void* input,
                             const std::vector<void*>& outputs, size_t blockBytes, int root);
void hostChannelScatterBlocks(const Comm& comm, const OpContext& op,
                              const std::vector<const void*>& inputs, void* output,
                              size_t blockBytes, int root);

}  // namespace ringreduce
