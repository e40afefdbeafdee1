// All-to-all of equal blocks through the group's host channel (alltoall.h)
#include "algorithms/host_channel/alltoall.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/turn.h"

namespace ringreduce {

bool hostChannelAlltoallApplies(const Comm& comm, size_t bytes) {
  return hostChannelCollectiveApplies(comm, bytes);
}

void hostChannelAlltoall(const Comm& comm, const OpContext& op, const EqualAlltoallArgs& args) {
  const HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const size_t rank = static_cast<size_t>(channel.rank());
  const size_t slotBytes = std::max<size_t>(1, channel.bufferBytes() / static_cast<size_t>(n));
  const auto* input = static_cast<const char*>(args.input);
  auto* output = static_cast<char*>(args.output);
  for (size_t first = 0; first < args.blockBytes; first += slotBytes) {
    const size_t piece = std::min(slotBytes, args.blockBytes - first);
    const HostChannel::Turn turn = exchangeTurn(comm, op, [&](char* mine) {
      for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
        std::memcpy(mine + j * slotBytes, input + j * args.blockBytes + first, piece);
      }
    });
    for (size_t q = 0; q < static_cast<size_t>(n); ++q) {
      std::memcpy(output + q * args.blockBytes + first,
                  channel.buffer(static_cast<int>(q), turn.parity) + rank * slotBytes, piece);
    }
  }
}

}  // namespace ringreduce
