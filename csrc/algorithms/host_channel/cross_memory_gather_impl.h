// crossMemoryGather's body (cross_memory_gather.h), a template for the
// gathers' ways of placing a rank's block.
#pragma once

#include <chrono>
#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

template <typename PublishedOf, typename BytesOf, typename OwnOf, typename BlockAt>
void crossMemoryGatherOf(const Comm& comm, const OpContext& op, size_t parts,
                         const PublishedOf& publishedOf, const BytesOf& bytesOf, size_t readAt,
                         const OwnOf& ownOf, const BlockAt& blockAt, bool reads,
                         const GatherForms::Call* voting) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t votes = voting ? sizeof(GatherForms::Vote) : 0;
  // Not the last turn: the Reduced flag follows it.
  const HostChannel::Turn turn = exchangeTurn(
      comm, op, parts * sizeof(CrossMemoryBlock) + votes, false,
      [&](char* mine) {
        for (size_t i = 0; i < parts; ++i) {
          const CrossMemoryBlock block{reinterpret_cast<uintptr_t>(publishedOf(i)), bytesOf(i)};
          std::memcpy(mine + i * sizeof(block), &block, sizeof(block));
        }
        if (voting) putUpVote(mine, parts, channel.gatherForms(), *voting);
      },
      [&] {
        // memmove: an input may be part of an output (not its own place).
        for (size_t i = 0; reads && i < parts; ++i) {
          if (const void* own = ownOf(i)) std::memmove(blockAt(rank, i), own, bytesOf(i));
        }
      });
  if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
  if (voting) decideFromVotes(channel, turn, parts, *voting);
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
                       bool reads, const GatherForms::Call* voting) {
  crossMemoryGatherOf(
      comm, op, 1, [&](size_t) { return published; }, [&](size_t) { return blockBytes; }, readAt,
      [&](size_t) { return own; }, [&](int r, size_t) { return blockAt(r); }, reads, voting);
}

template <typename PublishedOf, typename BytesOf, typename OwnOf, typename BlockAt>
void crossMemoryGatherParts(const Comm& comm, const OpContext& op, size_t parts,
                            const PublishedOf& publishedOf, const BytesOf& bytesOf,
                            const OwnOf& ownOf, const BlockAt& blockAt,
                            const GatherForms::Call* voting) {
  crossMemoryGatherOf(comm, op, parts, publishedOf, bytesOf, 0, ownOf, blockAt, true, voting);
}

template <typename ReadInPlace, typename ThroughBuffers>
void runChosenGatherForm(const Comm& comm, const OpContext& op, size_t blockBytes,
                         size_t messageBytes, const ReadInPlace& readInPlace,
                         const ThroughBuffers& throughBuffers) {
  if (!hostChannelCollectiveApplies(comm, messageBytes)) return readInPlace(nullptr);
  GatherForms& forms = comm.channel->gatherForms();
  if (op.publishOnly()) {
    const GatherForms::Call call = forms.peek(blockBytes);
    if (call.form == GatherForms::Form::InPlace) return readInPlace(call.votes ? &call : nullptr);
    return throughBuffers();
  }
  const GatherForms::Call call = forms.next(blockBytes);
  const auto start = std::chrono::steady_clock::now();
  if (call.form == GatherForms::Form::InPlace) {
    readInPlace(call.votes ? &call : nullptr);
  } else {
    throughBuffers();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  forms.record(call, static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
}

}  // namespace ringreduce
