// Reduce-scatter through the group's host channel (reduce_scatter.h)
#include "algorithms/host_channel/reduce_scatter.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/reduction.h"
#include "algorithms/host_channel/turn.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "core/plan/partition.h"

namespace ringreduce {

namespace {

// blockAt(j): where block j (chunkOf(input.count, n, j)) starts.
template <typename BlockAt>
void reduceScatterBlocks(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                         const BlockAt& blockAt, void* output) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t esize = elementSize(input.type);
  // The first chunk is the largest (chunkOf): it sets the number of turns.
  const size_t longest = chunkOf(input.count, n, 0).count;
  // Elements of each block per turn: room for the longest, at most an n-th of a buffer.
  const size_t slotBytes =
      slotBytesFor(channel.bufferBytes(), static_cast<size_t>(n), longest * esize, esize);
  const size_t perSlot = slotBytes / esize;
  const auto pieceOf = [&](int block, size_t first) {
    const size_t count = chunkOf(input.count, n, block).count;
    return count > first ? std::min(perSlot, count - first) : size_t{0};
  };
  auto* out = static_cast<char*>(output);
  for (size_t first = 0; first < longest; first += perSlot) {
    const size_t bytes = pieceOf(rank, first) * esize;
    char* dst = out + first * esize;
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, static_cast<size_t>(n) * slotBytes,
        [&](char* mine) {
          for (int j = 0; j < n; ++j) {
            channel.copyIn(mine + static_cast<size_t>(j) * slotBytes,
                           static_cast<const char*>(blockAt(j)) + first * esize,
                           pieceOf(j, first) * esize);
          }
        },
        [&] {
          // reduceInRankOrder starts from this rank's own values where it
          // needs them: from the input, still in cache, while the peers fill
          // their buffers (memmove: the output may be the input's own block).
          std::memmove(dst, static_cast<const char*>(blockAt(rank)) + first * esize, bytes);
        });
    PhaseScope reducing(op.phases, Phase::Reduce);
    reduceInRankOrder(channel, turn, input, dst, static_cast<size_t>(rank) * slotBytes, bytes);
  }
}

}  // namespace

bool hostChannelReduceScatterApplies(const Comm& comm, size_t bytes) {
  return hostChannelCollectiveApplies(comm, bytes);
}

void hostChannelReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                              void* output) {
  const auto* data = static_cast<const char*>(input.data);
  const size_t esize = elementSize(input.type);
  const int n = comm.size();
  reduceScatterBlocks(
      comm, op, input,
      [&](int j) { return data + chunkOf(input.count, n, j).offset * esize; }, output);
}

void hostChannelReduceScatterBlocks(const Comm& comm, const OpContext& op,
                                    const ReductionArgs& input,
                                    const std::vector<const void*>& blocks, void* output) {
  reduceScatterBlocks(comm, op, input, [&](int j) { return blocks[static_cast<size_t>(j)]; },
                      output);
}

}  // namespace ringreduce
