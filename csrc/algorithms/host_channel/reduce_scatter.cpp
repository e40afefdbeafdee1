// Reduce-scatter through the group's host channel (reduce_scatter.h)
#include "algorithms/host_channel/reduce_scatter.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "algorithms/host_channel/reduction.h"
#include "algorithms/host_channel/stretches.h"
#include "algorithms/host_channel/turn.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "core/plan/partition.h"

namespace ringreduce {

namespace {

// Whether any part's output, [outputOf(i), + lengthOf(i) elements), overlaps
// any part's block `rank` of its input. Exactly, so that a run that
// published a turn ahead and the run that takes it up later answer alike:
// they may hold different temporaries (an output that overlapped an input,
// a copy of an input that was not plain memory), and a temporary overlaps
// nothing. Beyond kMostPartsCompared parts, "may": the slot is filled.
constexpr size_t kMostPartsCompared = 16;

template <typename LengthOf, typename BlockAt, typename OutputOf>
bool outputsMayOverlapOwnBlocks(size_t parts, size_t esize, const LengthOf& lengthOf,
                                const BlockAt& blockAt, const OutputOf& outputOf, int rank) {
  if (parts > kMostPartsCompared) return true;
  for (size_t i = 0; i < parts; ++i) {
    const auto out = reinterpret_cast<uintptr_t>(outputOf(i));
    const size_t outBytes = lengthOf(i) * esize;
    for (size_t k = 0; k < parts; ++k) {
      const auto in = reinterpret_cast<uintptr_t>(blockAt(k, rank));
      const size_t inBytes = lengthOf(k) * esize;
      if (outBytes > 0 && inBytes > 0 && out < in + inBytes && in < out + outBytes) return true;
    }
  }
  return false;
}

// The message is `parts` inputs (part i: countOf(i) elements, its block j
// chunkOf(countOf(i), n, j) at blockAt(i, j)); block j of every part, laid
// end to end, goes in slot j; part i's chunk of the reduction lands at
// outputOf(i). One part for a single tensor.
template <typename CountOf, typename BlockAt, typename OutputOf>
void reduceScatterParts(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                        size_t parts, const CountOf& countOf, const BlockAt& blockAt,
                        const OutputOf& outputOf) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t esize = elementSize(input.type);
  const auto blockLength = [&](int block) {
    return [&, block](size_t i) { return chunkOf(countOf(i), n, block).count; };
  };
  // Every part's first chunk is its largest (chunkOf): block 0 sets the number of turns.
  size_t longest = 0;
  for (size_t i = 0; i < parts; ++i) longest += blockLength(0)(i);
  // Elements of each block per turn: room for the longest, at most an n-th of a buffer.
  const size_t slotBytes =
      slotBytesFor(channel.bufferBytes(), static_cast<size_t>(n), longest * esize, esize);
  const size_t perSlot = slotBytes / esize;
  // No peer reads this rank's own slot: only this rank's reduction might,
  // and that reads its own block from the input instead (one copy of an
  // n-th of the message saved), unless the outputs, written as it reduces,
  // might overlap that block (an in-place call: the slot keeps a copy).
  // Ranks whose expression starts from their own values (rank 0, rank 1 of
  // two for integers) start from them in the output, as before.
  const bool readsOwn = reduceInRankOrderReadsOwnBuffer(channel, input);
  const bool ownSlot = readsOwn && outputsMayOverlapOwnBlocks(parts, esize, blockLength(rank),
                                                              blockAt, outputOf, rank);
  for (size_t first = 0; first < longest; first += perSlot) {
    // The stretches of block j's stream in this turn (in elements).
    const auto stretches = [&](int block, const auto& fn) {
      forEachStretch(parts, blockLength(block), first, perSlot, fn);
    };
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, static_cast<size_t>(n) * slotBytes, first + perSlot >= longest,
        [&](char* mine) {
          for (int j = 0; j < n; ++j) {
            if (j == rank && !ownSlot) continue;
            char* slot = mine + static_cast<size_t>(j) * slotBytes;
            stretches(j, [&](size_t i, size_t at, size_t window, size_t count) {
              channel.copyIn(slot + window * esize,
                             static_cast<const char*>(blockAt(i, j)) + at * esize, count * esize);
            });
          }
        },
        [&] {
          // reduceInRankOrder starts from this rank's own values where it
          // needs them: from the input, still in cache, while the peers fill
          // their buffers (memmove: an output may be the input's own block).
          if (readsOwn) return;  // its expression starts from rank 0's buffer
          stretches(rank, [&](size_t i, size_t at, size_t, size_t count) {
            std::memmove(static_cast<char*>(outputOf(i)) + at * esize,
                         static_cast<const char*>(blockAt(i, rank)) + at * esize, count * esize);
          });
        });
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    PhaseScope reducing(op.phases, Phase::Reduce);
    stretches(rank, [&](size_t i, size_t at, size_t window, size_t count) {
      const char* own = static_cast<const char*>(blockAt(i, rank)) + at * esize;
      reduceInRankOrder(channel, turn, input, static_cast<char*>(outputOf(i)) + at * esize,
                        static_cast<size_t>(rank) * slotBytes + window * esize, count * esize,
                        ownSlot ? nullptr : own);
    });
  }
}

// One tensor: a message of one part.
template <typename BlockAt>
void reduceScatterBlocks(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                         const BlockAt& blockAt, void* output) {
  reduceScatterParts(
      comm, op, input, 1, [&](size_t) { return input.count; },
      [&](size_t, int j) { return blockAt(j); }, [&](size_t) { return output; });
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

void hostChannelReduceScatterParts(const Comm& comm, const OpContext& op, DataType type,
                                   ReduceOp reduceOp, const std::vector<ReduceScatterPart>& parts) {
  const size_t esize = elementSize(type);
  const int n = comm.size();
  reduceScatterParts(
      comm, op, ReductionArgs{nullptr, 0, type, reduceOp}, parts.size(),
      [&](size_t i) { return parts[i].count; },
      [&](size_t i, int j) {
        return static_cast<const char*>(parts[i].input) + chunkOf(parts[i].count, n, j).offset * esize;
      },
      [&](size_t i) { return parts[i].output; });
}

}  // namespace ringreduce
