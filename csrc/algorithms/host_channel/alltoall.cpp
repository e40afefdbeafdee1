// All-to-all of equal blocks through the group's host channel (alltoall.h)
#include "algorithms/host_channel/alltoall.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/host_channel/allreduce.h"
#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/turn.h"
#include "core/base/errors.h"

namespace ringreduce {

bool hostChannelAlltoallApplies(const Comm& comm, size_t bytes) {
  if (hostChannelCollectiveApplies(comm, bytes)) return true;
  const size_t n = comm.channel == nullptr ? 1 : static_cast<size_t>(comm.channel->size());
  return bytes % n == 0 && crossMemoryGatherCarries(comm, bytes / n);
}

void hostChannelAlltoall(const Comm& comm, const OpContext& op, const EqualAlltoallArgs& args) {
  HostChannel& channel = *comm.channel;
  const int n = channel.size();
  const size_t rank = static_cast<size_t>(channel.rank());
  const size_t slotBytes =
      slotBytesFor(channel.bufferBytes(), static_cast<size_t>(n), args.blockBytes, 1);
  const auto* input = static_cast<const char*>(args.input);
  auto* output = static_cast<char*>(args.output);
  if (crossMemoryGatherApplies(channel, args.blockBytes)) {
    // Block `rank` of each peer's input, read where it lies.
    return crossMemoryGather(comm, op, input, args.blockBytes, rank * args.blockBytes,
                             input + rank * args.blockBytes,
                             [&](int q) { return output + static_cast<size_t>(q) * args.blockBytes; });
  }
  // This rank's own block goes straight from its input to its output: a
  // third fewer bytes copied at world 2 (1 MiB: 69 -> 50 us, Open MPI's 59,
  // on the 2-core machine), its slot left unused.
  for (size_t first = 0; first < args.blockBytes; first += slotBytes) {
    const size_t piece = std::min(slotBytes, args.blockBytes - first);
    const HostChannel::Turn turn = exchangeTurn(
        comm, op, n * slotBytes, first + piece >= args.blockBytes,
        [&](char* mine) {
          for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
            if (j == rank) continue;
            channel.copyIn(mine + j * slotBytes, input + j * args.blockBytes + first, piece);
          }
        },
        [&] {  // while the peers fill their buffers
          std::memcpy(output + rank * args.blockBytes + first,
                      input + rank * args.blockBytes + first, piece);
        });
    if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
    for (size_t q = 0; q < static_cast<size_t>(n); ++q) {
      if (q == rank) continue;
      std::memcpy(output + q * args.blockBytes + first,
                  channel.buffer(static_cast<int>(q), turn) + rank * slotBytes, piece);
    }
  }
}

bool hostChannelUnevenAlltoallApplies(const Comm& comm) {
  return hostChannelCollectiveApplies(comm, 0);
}

namespace {

// Each turn's buffer: what this rank sends to each rank (n words) and
// whether it may decline (a word), read after the first turn; then a slot
// per rank for its piece of that block.
size_t unevenHeaderBytes(size_t n) { return ((n + 1) * sizeof(uint64_t) + 63) / 64 * 64; }

size_t unevenSlotBytes(const HostChannel& channel) {
  const size_t n = static_cast<size_t>(channel.size());
  return std::max<size_t>(1, (channel.bufferBytes() - unevenHeaderBytes(n)) / n);
}

}  // namespace

bool hostChannelUnevenAlltoallFits(const Comm& comm, const BlockLayout& send,
                                   const BlockLayout& recv) {
  const size_t slotBytes = unevenSlotBytes(*comm.channel);
  const auto fits = [&](const BlockLayout& layout) {
    return std::all_of(layout.bytes.begin(), layout.bytes.end(), [&](size_t bytes) {
      return turnsFor(bytes, slotBytes) <= kHostChannelMaxPieces;
    });
  };
  return fits(send) && fits(recv);
}

bool hostChannelUnevenAlltoall(const Comm& comm, const OpContext& op, const AllToAllArgs& args,
                               bool mayDecline) {
  AllToAllBlocks blocks{{}, args.sendLayout.bytes, {}, args.recvLayout.bytes};
  for (size_t offset : args.sendLayout.offsets) {
    blocks.send.push_back(static_cast<const char*>(args.send) + offset);
  }
  for (size_t offset : args.recvLayout.offsets) {
    blocks.recv.push_back(static_cast<char*>(args.recv) + offset);
  }
  return hostChannelUnevenAlltoallBlocks(comm, op, blocks, mayDecline);
}

bool hostChannelUnevenAlltoallBlocks(const Comm& comm, const OpContext& op,
                                     const AllToAllBlocks& blocks, bool mayDecline) {
  HostChannel& channel = *comm.channel;
  const size_t n = static_cast<size_t>(channel.size());
  const size_t rank = static_cast<size_t>(channel.rank());
  const size_t headerBytes = unevenHeaderBytes(n);
  const size_t slotBytes = unevenSlotBytes(channel);
  const std::vector<size_t>& sendBytes = blocks.sendBytes;
  const std::vector<size_t>& recvBytes = blocks.recvBytes;
  const auto pieceOf = [&](size_t bytes, size_t first) {
    return bytes > first ? std::min(slotBytes, bytes - first) : size_t{0};
  };
  size_t turns = 1;  // until the first turn has told every rank's sizes
  for (size_t t = 0; t < turns; ++t) {
    const size_t first = t * slotBytes;
    // The whole buffer: the sizes, and so the footprint, are learnt in the first turn.
    // The number of turns is known only after the first (the peers' sizes).
    const bool lastTurn = t > 0 && t + 1 >= turns;
    const HostChannel::Turn turn = exchangeTurn(comm, op, channel.bufferBytes(), lastTurn, [&](char* mine) {
      if (t == 0) {
        for (size_t j = 0; j < n; ++j) {
          const uint64_t bytes = sendBytes[j];
          std::memcpy(mine + j * sizeof(uint64_t), &bytes, sizeof(bytes));
        }
        const uint64_t mustFinish = mayDecline ? 0 : 1;
        std::memcpy(mine + n * sizeof(uint64_t), &mustFinish, sizeof(mustFinish));
      }
      for (size_t j = 0; j < n; ++j) {
        const size_t piece = j == rank ? 0 : pieceOf(sendBytes[j], first);
        if (piece > 0) {
          channel.copyIn(mine + headerBytes + j * slotBytes,
                         static_cast<const char*>(blocks.send[j]) + first, piece);
        }
      }
    }, [&] {
      // This rank's own block, this turn's piece of it, from its input to its
      // output while the peers fill their buffers: its slot stays unfilled
      // (where the sizes disagree the first turn's check throws, and a
      // declined one leaves the output to the form that then moves every
      // block). A piece a turn, not the whole in the first: the next turn's
      // flag, which the peers wait for, comes no later for it.
      const size_t piece = pieceOf(std::min(sendBytes[rank], recvBytes[rank]), first);
      if (piece > 0) {
        std::memcpy(static_cast<char*>(blocks.recv[rank]) + first,
                    static_cast<const char*>(blocks.send[rank]) + first, piece);
      }
    });
    // Published ahead: the queued run goes on from here (and never declines).
    if (op.stoppedAhead()) return true;
    if (t == 0) {
      size_t largest = 0;
      bool declinable = true;
      for (size_t q = 0; q < n; ++q) {
        const char* theirs = channel.buffer(static_cast<int>(q), turn);
        uint64_t mustFinish = 0;
        std::memcpy(&mustFinish, theirs + n * sizeof(uint64_t), sizeof(mustFinish));
        if (mustFinish != 0) declinable = false;
        for (size_t j = 0; j < n; ++j) {
          uint64_t bytes = 0;
          std::memcpy(&bytes, theirs + j * sizeof(uint64_t), sizeof(bytes));
          largest = std::max(largest, static_cast<size_t>(bytes));
          if (j == rank && bytes != recvBytes[q]) {
            throw TransportError("ringreduce: " + op.describe() + " on rank " +
                                  std::to_string(rank) + ": rank " + std::to_string(q) +
                                  " sends " + std::to_string(bytes) +
                                  " bytes to this rank, whose output split sizes expect " +
                                  std::to_string(recvBytes[q]));
          }
        }
      }
      // The same count and answer on every rank: from the same n x n sizes
      // and n words.
      turns = std::max<size_t>(1, turnsFor(largest, slotBytes));
      if (turns > kHostChannelMaxPieces && declinable) return false;
    }
    for (size_t q = 0; q < n; ++q) {
      const size_t piece = q == rank ? 0 : pieceOf(recvBytes[q], first);
      if (piece == 0) continue;
      std::memcpy(static_cast<char*>(blocks.recv[q]) + first,
                  channel.buffer(static_cast<int>(q), turn) + headerBytes +
                      rank * slotBytes,
                  piece);
    }
  }
  return true;
}

}  // namespace ringreduce
