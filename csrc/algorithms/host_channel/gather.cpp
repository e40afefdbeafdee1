// Gather and scatter of equal blocks through the group's host channel (gather.h)
#include "algorithms/host_channel/gather.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool hostChannelGatherApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes) ||
         crossMemoryGatherCarries(comm, blockBytes);
}

bool hostChannelScatterApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes * static_cast<size_t>(comm.size()));
}

namespace {

// Where block r of a root's flat buffer of n blocks starts; none elsewhere.
std::vector<size_t> blockOffsets(const HostChannel& channel, int root, size_t blockBytes) {
  std::vector<size_t> offsets;
  if (channel.rank() != root) return offsets;
  for (int r = 0; r < channel.size(); ++r) offsets.push_back(static_cast<size_t>(r) * blockBytes);
  return offsets;
}

}  // namespace

void hostChannelGather(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args) {
  std::vector<void*> outputs;
  for (size_t at : blockOffsets(*comm.channel, args.root, args.blockBytes)) {
    outputs.push_back(static_cast<char*>(args.output) + at);
  }
  hostChannelGatherBlocks(comm, op, args.input, outputs, args.blockBytes, args.root);
}

void hostChannelScatter(const Comm& comm, const OpContext& op, const RootedBlocksArgs& args) {
  std::vector<const void*> inputs;
  for (size_t at : blockOffsets(*comm.channel, args.root, args.blockBytes)) {
    inputs.push_back(static_cast<const char*>(args.input) + at);
  }
  hostChannelScatterBlocks(comm, op, inputs, args.output, args.blockBytes, args.root);
}

void hostChannelGatherBlocks(const Comm& comm, const OpContext& op, const void* input,
                             const std::vector<void*>& outputs, size_t blockBytes, int root) {
  HostChannel& channel = *comm.channel;
  const int rank = channel.rank();
  const size_t perTurn = channel.bufferBytes();
  const auto* in = static_cast<const char*>(input);
  const auto out = [&](int r) { return static_cast<char*>(outputs[static_cast<size_t>(r)]); };
  // Beyond what the buffers carry, the root reads every peer's block where it
  // lies; they only wait for it. Not within: there each peer's copy into its
  // buffer runs on its own core beside the root's copy of its own block, and
  // the root's read from the peer's memory costs more than its copy out of
  // the buffer (1 MiB per rank at world 2 on the Xeon VM of 2026-12-02: 196
  // us read in place against 170 through the buffers, Open MPI 174).
  if (!hostChannelCollectiveApplies(comm, blockBytes) &&
      crossMemoryGatherApplies(channel, blockBytes)) {
    if (rank != root) notePeersReadInPlace(comm, op, in, blockBytes);  // the root reads it
    return crossMemoryGather(comm, op, in, blockBytes, 0, in, out, rank == root);
  }
  for (size_t first = 0; first < blockBytes; first += perTurn) {
    const size_t piece = std::min(perTurn, blockBytes - first);
    // The root's own block goes from its input to its output, while the
    // peers fill their buffers: its buffer stays unread, unfilled.
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, first + piece >= blockBytes,
        [&](char* mine) {
          if (rank != root) channel.copyIn(mine, in + first, piece);
        },
        [&] {
          if (rank == root) std::memmove(out(rank) + first, in + first, piece);
        },
        /*readsPeers=*/rank == root);  // the others' last turn does not wait for the root
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    if (rank != root) continue;
    for (int r = 0; r < channel.size(); ++r) {
      if (r != rank) std::memcpy(out(r) + first, channel.buffer(r, turn), piece);
    }
  }
}

void hostChannelScatterBlocks(const Comm& comm, const OpContext& op,
                              const std::vector<const void*>& inputs, void* output,
                              size_t blockBytes, int root) {
  HostChannel& channel = *comm.channel;
  const size_t n = static_cast<size_t>(channel.size());
  const bool atRoot = channel.rank() == root;
  const size_t slotBytes = slotBytesFor(channel.bufferBytes(), n, blockBytes, 1);
  auto* out = static_cast<char*>(output);
  const size_t mine = static_cast<size_t>(channel.rank()) * slotBytes;
  for (size_t first = 0; first < blockBytes; first += slotBytes) {
    const size_t piece = std::min(slotBytes, blockBytes - first);
    // The root's own block goes from its input to its output, while the
    // peers wait for theirs: its slot stays unfilled.
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, n * slotBytes, first + piece >= blockBytes,
        [&](char* buffer) {
          if (!atRoot) return;
          for (size_t r = 0; r < n; ++r) {
            if (static_cast<int>(r) == root) continue;
            channel.copyIn(buffer + r * slotBytes, static_cast<const char*>(inputs[r]) + first,
                           piece);
          }
        },
        [&] {
          if (atRoot) {
            std::memmove(out + first, static_cast<const char*>(inputs[static_cast<size_t>(root)]) + first,
                         piece);
          }
        },
        /*readsPeers=*/!atRoot);  // the root's last turn does not wait for the others
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    if (!atRoot) std::memcpy(out + first, channel.buffer(root, turn) + mine, piece);
  }
}

}  // namespace ringreduce
