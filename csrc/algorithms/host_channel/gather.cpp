// Gather and scatter of equal blocks through the group's host channel (gather.h)
#include "algorithms/host_channel/gather.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool hostChannelGatherApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes);
}

bool hostChannelScatterApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes * static_cast<size_t>(comm.size()));
}

void hostChannelGather(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args) {
  HostChannel& channel = *comm.channel;
  const bool root = channel.rank() == args.root;
  const size_t perTurn = channel.bufferBytes();
  const auto* input = static_cast<const char*>(args.input);
  auto* output = static_cast<char*>(args.output);
  for (size_t first = 0; first < args.blockBytes; first += perTurn) {
    const size_t piece = std::min(perTurn, args.blockBytes - first);
    const size_t own = static_cast<size_t>(channel.rank()) * args.blockBytes;
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, [&](char* mine) { channel.copyIn(mine, input + first, piece); },
        [&] {  // the root's own block from its input, while the peers fill their buffers
          if (root) std::memmove(output + own + first, input + first, piece);
        });
    if (!root) continue;
    for (int r = 0; r < channel.size(); ++r) {
      if (r == channel.rank()) continue;
      std::memcpy(output + static_cast<size_t>(r) * args.blockBytes + first,
                  channel.buffer(r, turn), piece);
    }
  }
}

void hostChannelScatter(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args) {
  HostChannel& channel = *comm.channel;
  const size_t n = static_cast<size_t>(channel.size());
  const bool root = channel.rank() == args.root;
  const size_t slotBytes = slotBytesFor(channel.bufferBytes(), n, args.blockBytes, 1);
  const auto* input = static_cast<const char*>(args.input);
  auto* output = static_cast<char*>(args.output);
  const size_t mine = static_cast<size_t>(channel.rank()) * slotBytes;
  for (size_t first = 0; first < args.blockBytes; first += slotBytes) {
    const size_t piece = std::min(slotBytes, args.blockBytes - first);
    const HostChannel::Turn turn = exchangeTurn(comm, op, n * slotBytes, [&](char* buffer) {
      if (!root) return;
      for (size_t r = 0; r < n; ++r) {
        channel.copyIn(buffer + r * slotBytes, input + r * args.blockBytes + first, piece);
      }
    });
    std::memcpy(output + first, channel.buffer(args.root, turn) + mine, piece);
  }
}

}  // namespace ringreduce
