// Allgather through the group's host channel (allgather.h)
#include "algorithms/host_channel/allgather.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/stretches.h"
#include "algorithms/host_channel/turn.h"

namespace ringreduce {

namespace {

// The message is `parts` inputs laid end to end (inputOf(i), bytesOf(i)
// bytes; one for a single tensor); blockAt(r, i): where rank r's part i
// goes; inPlace(i): this rank's part i is there already, not copied again.
// This rank's own parts go from its inputs, still in cache, while the peers
// fill their buffers; for a message of several pieces the inputs must then
// stay as they were until the last piece, so an input that overlaps a
// peer's place in an output must be a copy (the backend's callers make one).
template <typename InputOf, typename BytesOf, typename BlockAt, typename InPlace>
void gatherParts(const Comm& comm, const OpContext& op, size_t parts, const InputOf& inputOf,
                 const BytesOf& bytesOf, const BlockAt& blockAt, const InPlace& inPlace) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const int rank = channel.rank();
  const size_t perTurn = channel.bufferBytes();
  size_t total = 0;
  for (size_t i = 0; i < parts; ++i) total += bytesOf(i);
  for (size_t first = 0; first < total; first += perTurn) {
    const size_t piece = std::min(perTurn, total - first);
    const auto stretches = [&](const auto& fn) {
      forEachStretch(parts, bytesOf, first, piece, fn);
    };
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, piece, first + piece >= total,
        [&](char* mine) {
          stretches([&](size_t i, size_t at, size_t window, size_t bytes) {
            channel.copyIn(mine + window, static_cast<const char*>(inputOf(i)) + at, bytes);
          });
        },
        [&] {
          // memmove: an input may be part of an output (not its own place).
          stretches([&](size_t i, size_t at, size_t, size_t bytes) {
            if (inPlace(i)) return;
            std::memmove(static_cast<char*>(blockAt(rank, i)) + at,
                         static_cast<const char*>(inputOf(i)) + at, bytes);
          });
        });
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    for (int r = 0; r < n; ++r) {
      if (r == rank) continue;
      const char* theirs = channel.buffer(r, turn);
      stretches([&](size_t i, size_t at, size_t window, size_t bytes) {
        std::memcpy(static_cast<char*>(blockAt(r, i)) + at, theirs + window, bytes);
      });
    }
  }
}

// One tensor: a message of one part.
template <typename BlockAt>
void gatherBlocks(const Comm& comm, const OpContext& op, const void* in, size_t blockBytes,
                  bool skipOwn, const BlockAt& blockAt) {
  gatherParts(
      comm, op, 1, [&](size_t) { return in; }, [&](size_t) { return blockBytes; },
      [&](int r, size_t) { return blockAt(r); }, [&](size_t) { return skipOwn; });
}

}  // namespace

bool hostChannelAllgatherApplies(const Comm& comm, size_t blockBytes) {
  return hostChannelCollectiveApplies(comm, blockBytes) ||
         crossMemoryGatherCarries(comm, blockBytes);
}

void hostChannelAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  auto* output = static_cast<char*>(args.output);
  const size_t block = args.blockBytes;
  const bool inPlace = args.input == output + static_cast<size_t>(comm.channel->rank()) * block;
  const auto blockAt = [&](int r) { return output + static_cast<size_t>(r) * block; };
  const auto throughBuffers = [&] { gatherBlocks(comm, op, args.input, block, inPlace, blockAt); };
  if (!crossMemoryGatherApplies(*comm.channel, block)) return throughBuffers();
  runChosenGatherForm(
      comm, op, block, block,
      [&](const GatherForms::Call* voting) {
        notePeersReadInPlace(comm, op, args.input, block);
        crossMemoryGather(comm, op, args.input, block, 0, inPlace ? nullptr : args.input, blockAt,
                          true, voting);
      },
      throughBuffers);
}

void hostChannelAllgatherBlocks(const Comm& comm, const OpContext& op, const void* input,
                                const std::vector<void*>& outputs, size_t blockBytes) {
  const bool inPlace = input == outputs[static_cast<size_t>(comm.channel->rank())];
  const auto blockAt = [&](int r) { return outputs[static_cast<size_t>(r)]; };
  const auto throughBuffers = [&] {
    gatherBlocks(comm, op, input, blockBytes, inPlace, blockAt);
  };
  if (!crossMemoryGatherApplies(*comm.channel, blockBytes)) return throughBuffers();
  runChosenGatherForm(
      comm, op, blockBytes, blockBytes,
      [&](const GatherForms::Call* voting) {
        notePeersReadInPlace(comm, op, input, blockBytes);
        crossMemoryGather(comm, op, input, blockBytes, 0, inPlace ? nullptr : input, blockAt, true,
                          voting);
      },
      throughBuffers);
}

namespace {

// Parts of one message (the coalesced all-gathers), each rank's part i at
// blockAt(rank, i): read in place or through the buffers, as chosen.
template <typename Part, typename BlockAt>
void gatherPartsEitherWay(const Comm& comm, const OpContext& op, const std::vector<Part>& parts,
                          const BlockAt& blockAt) {
  const int rank = comm.channel->rank();
  const auto inputOf = [&](size_t i) { return parts[i].input; };
  const auto bytesOf = [&](size_t i) { return parts[i].bytes; };
  const auto inItsPlace = [&](size_t i) { return parts[i].input == blockAt(rank, i); };
  const auto throughBuffers = [&] {
    gatherParts(comm, op, parts.size(), inputOf, bytesOf, blockAt, inItsPlace);
  };
  size_t total = 0;
  for (const Part& p : parts) total += p.bytes;
  if (!hostChannelAllgatherPartsReadInPlace(comm, parts.size(), total)) return throughBuffers();
  runChosenGatherForm(
      comm, op, total, total,
      [&](const GatherForms::Call* voting) {
        for (const Part& p : parts) notePeersReadInPlace(comm, op, p.input, p.bytes);
        crossMemoryGatherParts(
            comm, op, parts.size(), inputOf, bytesOf,
            [&](size_t i) -> const void* { return inItsPlace(i) ? nullptr : parts[i].input; },
            blockAt, voting);
      },
      throughBuffers);
}

}  // namespace

bool hostChannelAllgatherPartsReadInPlace(const Comm& comm, size_t parts, size_t bytes) {
  return crossMemoryGatherPartsApply(*comm.channel, parts, bytes);
}

void hostChannelAllgatherParts(const Comm& comm, const OpContext& op,
                               const std::vector<AllgatherPart>& parts) {
  gatherPartsEitherWay(comm, op, parts, [&](int r, size_t i) {
    return static_cast<char*>(parts[i].output) + static_cast<size_t>(r) * parts[i].bytes;
  });
}

void hostChannelAllgatherListParts(const Comm& comm, const OpContext& op,
                                   const std::vector<AllgatherListPart>& parts) {
  gatherPartsEitherWay(comm, op, parts,
                       [&](int r, size_t i) { return parts[i].outputs[static_cast<size_t>(r)]; });
}

}  // namespace ringreduce
