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

#include "core/op_context.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

struct BlockLayout {
  std::vector<size_t> offsets;
  std::vector<size_t> bytes;

  // n equal blocks of `blockBytes`, back to back.
  static BlockLayout uniform(int n, size_t blockBytes);
};

// Rank i's `input` lands in block i of the root's `output` (ignored elsewhere).
void gatherToRoot(UcxTransport& transport, const OpContext& op, const void* input,
                  size_t inputBytes, void* output, const BlockLayout& layout, int root,
                  uint32_t slot = 0);

// Block i of the root's `input` (ignored elsewhere) lands in rank i's `output`.
void scatterFromRoot(UcxTransport& transport, const OpContext& op, const void* input,
                     const BlockLayout& layout, void* output, size_t outputBytes, int root,
                     uint32_t slot = 0);

// Block p of `send` goes to rank p; what rank p sends arrives in block p of `recv`.
void allToAll(UcxTransport& transport, const OpContext& op, const void* send,
              const BlockLayout& sendLayout, void* recv, const BlockLayout& recvLayout);

}  // namespace ringreduce
