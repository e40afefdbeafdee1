// All-to-all of equal blocks through the group's host channel
// (algorithms/host_channel/turn.h): in each turn every rank copies a piece of each of
// its n blocks into its buffer (block j's piece in slot j), and once every
// peer's flag is up, rank r copies slot r of each rank q's buffer into its
// block q. Pieces of a buffer, the same on every rank. Uneven splits are
// not taken here: a rank cannot tell from its own arguments that its peers'
// splits are even too, so the caller keeps those on the pairwise exchange.
#pragma once

#include <cstddef>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether an all-to-all of `bytes` (each rank's whole input) in equal
// blocks goes through the channel: the same answer on every rank
// (hostChannelCollectiveApplies).
bool hostChannelAlltoallApplies(const Comm& comm, size_t bytes);

// n blocks of `blockBytes` back to back in `input` and in `output`: block
// j of rank q's input lands in block q of rank j's output. Input and
// output must not overlap.
struct EqualAlltoallArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t blockBytes = 0;
};
void hostChannelAlltoall(const Comm& comm, const OpContext& op, const EqualAlltoallArgs& args);

}  // namespace ringreduce
