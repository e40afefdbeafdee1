// Allgather through the group's host channel (allgather.h)
#include "algorithms/host_channel/allgather.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool hostChannelAllgatherApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes);
}

void hostChannelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  const HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t perTurn = channel.bufferBytes();
  const auto* input = static_cast<const char*>(args.input);
  auto* output = static_cast<char*>(args.output);
  // The caller's block already in its place (in place): not copied again.
  const bool inPlace = input == output + static_cast<size_t>(rank) * args.blockBytes;
  for (size_t first = 0; first < args.blockBytes; first += perTurn) {
    const size_t piece = std::min(perTurn, args.blockBytes - first);
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, [&](char* mine) { std::memcpy(mine, input + first, piece); });
    for (int r = 0; r < n; ++r) {
      if (r == rank && inPlace) continue;
      std::memcpy(output + static_cast<size_t>(r) * args.blockBytes + first,
                  channel.buffer(r, turn.parity), piece);
    }
  }
}

}  // namespace ringreduce
