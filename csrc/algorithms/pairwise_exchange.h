// Collectives where every rank talks to its peers directly, one message per
// pair: gather to a root, scatter from a root, all-to-all. Block i of a
// layout is `bytes[i]` bytes at `offsets[i]`; sizes may differ per rank.
// A rank's own block is copied locally, never sent to itself. Messages use
// tag slot `slot` of the op, so an algorithm can append one of these to its
// own steps without the tags colliding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/comm.h"
#include "core/base/inline_vector.h"
#include "core/base/op_context.h"

namespace ringreduce {

// A rank's blocks, one per rank of the group: held inline up to 8 ranks
// (one host's), built at every call (inline_vector.h).
using PerRank = InlineVector<size_t, 8>;

struct BlockLayout {
  PerRank offsets;
  PerRank bytes;

  // n equal blocks of `blockBytes`, back to back.
  static BlockLayout uniform(int n, size_t blockBytes);
};

// Rank i's `input` lands in block i of the root's `output` (ignored elsewhere).
struct GatherArgs {
  const void* input = nullptr;
  size_t inputBytes = 0;
  void* output = nullptr;
  BlockLayout layout;  // of the root's output
  int root = 0;
  uint32_t slot = 0;
  // At the root, where given: rank r's block lands at blocks[r] (the
  // caller's own tensors) instead of output + layout.offsets[r].
  std::vector<void*> blocks{};
};
void gatherToRoot(const Comm& comm, const OpContext& op, const GatherArgs& args);

// Block i of the root's `input` (ignored elsewhere) lands in rank i's `output`.
struct ScatterArgs {
  const void* input = nullptr;
  BlockLayout layout;  // of the root's input
  void* output = nullptr;
  size_t outputBytes = 0;
  int root = 0;
  uint32_t slot = 0;
  // At the root, where given: rank r's block is at blocks[r] (the caller's
  // own tensors) instead of input + layout.offsets[r].
  std::vector<const void*> blocks{};
};
void scatterFromRoot(const Comm& comm, const OpContext& op, const ScatterArgs& args);

// Block p of `send` goes to rank p; what rank p sends arrives in block p of `recv`.
struct AllToAllArgs {
  const void* send = nullptr;
  BlockLayout sendLayout;
  void* recv = nullptr;
  BlockLayout recvLayout;
};
void allToAll(const Comm& comm, const OpContext& op, const AllToAllArgs& args);

}  // namespace ringreduce
