// Pipelined ring allgather of equal-sized byte blocks: rank r's block ends up
// at offset r * blockBytes of every rank's output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// `input` may alias the rank's own block of `output` (in-place allgather).
struct AllgatherArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t blockBytes = 0;
};
void ringAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args);

class ChunkLayout;

// The same on chunks of any sizes (core/plan/chunk_layout.h, in bytes), in place:
// rank r's chunk is already at chunks.chunk(r) of `data`, and every rank
// ends with all of them. The phases of the two-level allgather use it.
void ringAllgatherInPlace(const Comm& comm, const OpContext& op, void* data,
                          const ChunkLayout& chunks);
// The same on tag slots [firstSlot, firstSlot + slots) (transport/tag.h),
// for an allgather that follows a ring reduce-scatter between the same
// ranks in the same operation (the two-level allreduce's node phase): its
// messages then never share a tag with the reduce-scatter's.
void ringAllgatherInPlace(const Comm& comm, const OpContext& op, void* data,
                          const ChunkLayout& chunks, uint32_t firstSlot, uint32_t slots);

}  // namespace ringreduce
