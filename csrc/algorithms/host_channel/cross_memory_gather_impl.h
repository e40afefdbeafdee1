// crossMemoryGather's body (cross_memory_gather.h), a template for the
// gathers' ways of placing a rank's block.
#pragma once

#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

template <typename BlockAt>
void crossMemoryGather(const Comm& comm, const OpContext& op, const void* published,
                       size_t blockBytes, size_t readAt, const void* own, const BlockAt& blockAt,
                       bool reads) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  // Not the last turn: the Reduced flag follows it.
  const HostChannel::Turn turn = exchangeTurn(
      comm, op, sizeof(CrossMemoryBlock), false,
      [&](char* mine) {
        const CrossMemoryBlock block{reinterpret_cast<uintptr_t>(published), blockBytes};
        std::memcpy(mine, &block, sizeof(block));
      },
      [&] {
        // memmove: the input may be part of an output (not its own place).
        if (reads && own != nullptr) std::memmove(blockAt(rank), own, blockBytes);
      });
  if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
  for (int r = 1; reads && r < n; ++r) {
    const int peer = (rank + r) % n;  // each rank starts with a different peer
    readPeerBlock(comm, op, turn, peer, blockAt(peer), blockBytes, readAt);
  }
  // Done reading the peers' inputs; back to the caller once they are done with this one's.
  publishAndAwait(comm, op, FlagKind::Reduced, turn);
}

}  // namespace ringreduce
