// crossMemoryGather's body (cross_memory_gather.h), a template for the
// gathers' ways of placing a rank's block.
#pragma once

#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

template <typename PublishedOf, typename BytesOf, typename OwnOf, typename BlockAt>
void crossMemoryGatherOf(const Comm& comm, const OpContext& op, size_t parts,
                         const PublishedOf& publishedOf, const BytesOf& bytesOf, size_t readAt,
                         const OwnOf& ownOf, const BlockAt& blockAt, bool reads) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  // Not the last turn: the Reduced flag follows it.
  const HostChannel::Turn turn = exchangeTurn(
      comm, op, parts * sizeof(CrossMemoryBlock), false,
      [&](char* mine) {
        for (size_t i = 0; i < parts; ++i) {
          const CrossMemoryBlock block{reinterpret_cast<uintptr_t>(publishedOf(i)), bytesOf(i)};
          std::memcpy(mine + i * sizeof(block), &block, sizeof(block));
        }
      },
      [&] {
        // memmove: an input may be part of an output (not its own place).
        for (size_t i = 0; reads && i < parts; ++i) {
          if (const void* own = ownOf(i)) std::memmove(blockAt(rank, i), own, bytesOf(i));
        }
      });
  if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
  for (int r = 1; reads && r < n; ++r) {
    const int peer = (rank + r) % n;  // each rank starts with a different peer
    for (size_t i = 0; i < parts; ++i) {
      readPeerBlock(comm, op, turn, peer, blockAt(peer, i), bytesOf(i), readAt, i);
    }
  }
  // Done reading the peers' inputs; back to the caller once they are done with this one's.
  publishAndAwait(comm, op, FlagKind::Reduced, turn);
}

template <typename BlockAt>
void crossMemoryGather(const Comm& comm, const OpContext& op, const void* published,
                       size_t blockBytes, size_t readAt, const void* own, const BlockAt& blockAt,
                       bool reads) {
  crossMemoryGatherOf(
      comm, op, 1, [&](size_t) { return published; }, [&](size_t) { return blockBytes; }, readAt,
      [&](size_t) { return own; }, [&](int r, size_t) { return blockAt(r); }, reads);
}

template <typename PublishedOf, typename BytesOf, typename OwnOf, typename BlockAt>
void crossMemoryGatherParts(const Comm& comm, const OpContext& op, size_t parts,
                            const PublishedOf& publishedOf, const BytesOf& bytesOf,
                            const OwnOf& ownOf, const BlockAt& blockAt) {
  crossMemoryGatherOf(comm, op, parts, publishedOf, bytesOf, 0, ownOf, blockAt, true);
}

}  // namespace ringreduce
