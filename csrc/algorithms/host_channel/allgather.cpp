// Allgather through the group's host channel (allgather.h)
#include "algorithms/host_channel/allgather.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

namespace {

// blockAt(r): where rank r's block goes; `skipOwn`: this rank's is there
// already (in place), not copied again. This rank's own block goes from its
// input, still in cache, while the peers fill their buffers; for a message of
// several pieces the input must then stay as it was until its last piece, so
// an input that overlaps a peer's block of the output must be a copy (the
// backend's callers make one).
template <typename BlockAt>
void gatherBlocks(const Comm& comm, const OpContext& op, const void* in, size_t blockBytes,
                  bool skipOwn, const BlockAt& blockAt) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t perTurn = channel.bufferBytes();
  const auto* input = static_cast<const char*>(in);
  for (size_t first = 0; first < blockBytes; first += perTurn) {
    const size_t piece = std::min(perTurn, blockBytes - first);
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, [&](char* mine) { channel.copyIn(mine, input + first, piece); },
        [&] {
          // memmove: the input may be part of the output (not its own block).
          if (!skipOwn) std::memmove(static_cast<char*>(blockAt(rank)) + first, input + first, piece);
        });
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      std::memcpy(static_cast<char*>(blockAt(r)) + first, channel.buffer(r, turn), piece);
    }
  }
}

}  // namespace

bool hostChannelAllgatherApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes);
}

void hostChannelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  auto* output = static_cast<char*>(args.output);
  const size_t block = args.blockBytes;
  const bool inPlace = args.input == output + static_cast<size_t>(comm.channel->rank()) * block;
  gatherBlocks(comm, op, args.input, block, inPlace,
               [&](int r) { return output + static_cast<size_t>(r) * block; });
}

void hostChannelAllgatherBlocks(const Comm& comm, const OpContext& op, const void* input,
                                const std::vector<void*>& outputs, size_t blockBytes) {
  const bool inPlace = input == outputs[static_cast<size_t>(comm.channel->rank())];
  gatherBlocks(comm, op, input, blockBytes, inPlace,
               [&](int r) { return outputs[static_cast<size_t>(r)]; });
}

}  // namespace ringreduce
