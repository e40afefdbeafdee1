// All-to-all of uneven splits through the group's host channel (alltoall.h)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/host_channel/allreduce.h"
#include "algorithms/host_channel/alltoall.h"
#include "algorithms/host_channel/cross_memory_gather.h"
#include "algorithms/host_channel/turn.h"
#include "core/base/errors.h"
#include "core/observe/log.h"
#include "transport/cross_memory.h"

namespace ringreduce {

namespace {

// Each turn's buffer starts with a header, read after the first turn: what
// this rank sends to each rank (n words), whether it may decline (a word),
// whether its blocks are read where they lie (a word: then it puts none of
// them into its buffer, and its peers read them from its memory), and where
// each block lies (n words). Then a slot per rank for its piece of that block.
size_t unevenHeaderBytes(size_t n) {
  return ((2 * n + 2) * sizeof(uint64_t) + 63) / 64 * 64;
}

// A turn takes half the buffer (the header and n slots): consecutive turns
// on a buffer then alternate between its halves (HostChannel::takeTurn), so
// a rank does not write the very lines its peers read from it in the
// previous collective, which a store must first take back from their caches.
// The whole buffer a turn, as before 2026-12-02, put every turn at its start:
// world 2 on the 2-vCPU Xeon VM, p50 back to back, 64 KiB per rank:
// all_to_all_single with split sizes 11.2-11.7 us -> 9.0-9.2, all_to_all of
// lists 11.1-11.6 -> 9.5-9.6 (Open MPI 6.7-7.8); 4 KiB and 256-512 KiB
// alike either way (a quarter of the buffer measured as a half).
size_t unevenSlotBytes(const HostChannel& channel) {
  const size_t n = static_cast<size_t>(channel.size());
  const size_t turnBytes = channel.bufferBytes() / 2;
  const size_t header = unevenHeaderBytes(n);
  return std::max<size_t>(1, (turnBytes > header ? turnBytes - header : 0) / n);
}

uint64_t headerWord(const char* header, size_t index) {
  uint64_t word = 0;
  std::memcpy(&word, header + index * sizeof(word), sizeof(word));
  return word;
}

void putHeaderWord(char* header, size_t index, uint64_t word) {
  std::memcpy(header + index * sizeof(word), &word, sizeof(word));
}

// From this many bytes in a block to a peer, a rank offers its blocks in
// place. Lower than the equal all-to-all's kCrossMemoryGatherFromBytes: the
// uneven form's turns through the buffers cost more (a header, half a
// buffer a turn). World 2 on the 2-vCPU Xeon VM, p50 back to back, two
// rounds, offered from 32 KiB against from 256 KiB: the splits' 170 KiB
// blocks (256 KiB per rank) 19.9-20.8 us against 22.9-23.9 (Open MPI
// 17.2-17.9), their 85 KiB blocks 12.7-13.1 against 13.7-13.8, lists of
// 128 KiB blocks 20.0-20.1 against 20.9-21.6; but lists of 64 KiB blocks
// 15.2-16.6 against 13.4-13.5 and of 32 KiB 10.6-11.0 against 9.5-9.6.
constexpr size_t kUnevenInPlaceFromBytes = size_t{128} << 10;

// Whether this rank offers its blocks to be read where they lie: its peers
// can read its memory (agreed when the channel opened), a block to a peer
// is large enough that one copy instead of two pays for the system call and
// the second flag, and the blocks outlive the body: not a body run to
// publish ahead, whose copies of strided or overlapping inputs go with it.
// Where its blocks also fit the buffers' turns, the rank times both
// (HostChannel::unevenForms: warm-up calls in place, then trials of each,
// then the faster for the rest of a round of 1024 calls of that size class;
// blocks of 128-512 KiB share the first class), as the equal gathers do: on
// the EPYC of 2026-12-04 the buffers were the faster (all_to_all_single
// with split sizes of 1 MiB per rank, blocks of 341-683 KiB, 1.07-1.14x
// Open MPI's call read in place, 0.68-0.81x timed), on the Xeon of
// 2026-12-02 in place. Each rank's own choice: every rank may offer or not.
struct Offer {
  bool inPlace = false;
  bool timed = false;  // a call of its size class, whose time counts
  GatherForms::Call call;
};

Offer chooseOffer(HostChannel& channel, const OpContext& op, const PerRank& sendBytes) {
  const size_t rank = static_cast<size_t>(channel.rank());
  size_t largest = 0;
  for (size_t j = 0; j < sendBytes.size(); ++j) {
    if (j != rank) largest = std::max(largest, sendBytes[j]);
  }
  Offer offer;
  if (op.publishOnly() || !channel.peersReadable() || largest < kUnevenInPlaceFromBytes) {
    return offer;
  }
  offer.timed = turnsFor(largest, unevenSlotBytes(channel)) <= kHostChannelMaxPieces;
  if (offer.timed) offer.call = channel.unevenForms().next(largest);
  offer.inPlace = !offer.timed || offer.call.form == GatherForms::Form::InPlace;
  return offer;
}

// A timed call's time, under the form its first turn put up (a turn
// published ahead offered nothing, whatever the trial asked); after the
// round's last trial, the faster form where both were timed.
void recordOffer(HostChannel& channel, Offer offer, bool offeredInPlace,
                 std::chrono::steady_clock::time_point start) {
  if (!offer.timed) return;
  GatherForms& forms = channel.unevenForms();
  offer.call.form = offeredInPlace ? GatherForms::Form::InPlace : GatherForms::Form::Buffers;
  const auto took = std::chrono::steady_clock::now() - start;
  forms.record(offer.call, static_cast<uint64_t>(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
  if (!offer.call.votes) return;
  const GatherForms::Vote mine = forms.vote(offer.call);
  if (mine.inPlaceNanos == 0 || mine.buffersNanos == 0) return;  // a trial declined: no decision
  forms.decide(offer.call, {mine});
  // The first class starts where a rank offers at all.
  const size_t from = offer.call.sizeClass == 0 ? kUnevenInPlaceFromBytes
                                                : GatherForms::kFirstClassBytes << offer.call.sizeClass;
  RR_LOG(Info, channel.rank(),
         "uneven all-to-alls whose largest block to a peer is " << from << "+ bytes: "
             << (forms.decidedFor(offer.call) == GatherForms::Form::InPlace
                     ? "offered in place"
                     : "through the buffers")
             << " (this rank's fastest trials: in place " << mine.inPlaceNanos / 1000
             << " us, through the buffers " << mine.buffersNanos / 1000 << " us)");
}

}  // namespace

bool hostChannelUnevenAlltoallApplies(const Comm& comm) {
  if (!hostChannelCollectiveApplies(comm, 0)) return false;
  // A turn's half of the buffer must hold the header and a byte a rank (not
  // so with many ranks on the host and a tiny RINGREDUCE_SHM_BYTES: those
  // take UCX's pairwise exchange). The same on every rank: the world and
  // the buffers' size are agreed.
  const HostChannel& channel = *comm.channel;
  const size_t n = static_cast<size_t>(channel.size());
  return unevenHeaderBytes(n) + n <= channel.bufferBytes() / 2;
}

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
  blocks.send.reserve(args.sendLayout.offsets.size());
  blocks.recv.reserve(args.recvLayout.offsets.size());
  for (size_t offset : args.sendLayout.offsets) {
    blocks.send.push_back(static_cast<const char*>(args.send) + offset);
  }
  for (size_t offset : args.recvLayout.offsets) {
    blocks.recv.push_back(static_cast<char*>(args.recv) + offset);
  }
  return hostChannelUnevenAlltoallBlocks(comm, op, blocks, mayDecline);
}

// Every rank learns every rank's header in the first turn, and decides from
// those n headers alone, alike: how many turns the blocks that go through
// the buffers take (those of ranks that do not offer theirs in place),
// whether to decline, and whether a Reduced flag ("done reading your
// memory") closes the collective. A rank that offers its blocks in place
// puts none into its buffer, in any turn; the others cut theirs into a
// piece per turn as before.
bool hostChannelUnevenAlltoallBlocks(const Comm& comm, const OpContext& op,
                                     const AllToAllBlocks& blocks, bool mayDecline) {
  HostChannel& channel = *comm.channel;
  const size_t n = static_cast<size_t>(channel.size());
  const size_t rank = static_cast<size_t>(channel.rank());
  const size_t headerBytes = unevenHeaderBytes(n);
  const size_t slotBytes = unevenSlotBytes(channel);
  const PerRank& sendBytes = blocks.sendBytes;
  const PerRank& recvBytes = blocks.recvBytes;
  const size_t declineWord = n, inPlaceWord = n + 1, addressWords = n + 2;
  const auto pieceOf = [&](size_t bytes, size_t first) {
    return bytes > first ? std::min(slotBytes, bytes - first) : size_t{0};
  };
  // Whose blocks are read where they lie, from the first turn's headers
  // (this rank's own too: a turn published ahead says what it offered then).
  InlineVector<bool, 8> inPlace(n, false);
  InlineVector<uint64_t, 8> addresses(n, 0);  // of each peer's block to this rank
  bool anyInPlace = false;
  const auto start = std::chrono::steady_clock::now();
  const Offer chosen = chooseOffer(channel, op, sendBytes);
  const bool offer = chosen.inPlace;
  for (size_t j = 0; offer && j < n; ++j) {
    if (j != rank) notePeersReadInPlace(comm, op, blocks.send[j], sendBytes[j]);
  }
  size_t turns = 1;  // until the first turn has told every rank's sizes
  HostChannel::Turn turn;
  for (size_t t = 0; t < turns; ++t) {
    const size_t first = t * slotBytes;
    // Half the buffer whatever the sizes, which the first turn tells.
    // The number of turns is known only after the first (the peers' sizes);
    // a Reduced flag follows the last where any block was read in place.
    const bool lastTurn = t > 0 && t + 1 >= turns && !anyInPlace;
    turn = exchangeTurn(comm, op, headerBytes + n * slotBytes, lastTurn, [&](char* mine) {
      if (t == 0) {
        for (size_t j = 0; j < n; ++j) {
          putHeaderWord(mine, j, sendBytes[j]);
          putHeaderWord(mine, addressWords + j, reinterpret_cast<uintptr_t>(blocks.send[j]));
        }
        putHeaderWord(mine, declineWord, mayDecline ? 0 : 1);
        putHeaderWord(mine, inPlaceWord, offer ? 1 : 0);
      }
      if (t == 0 ? offer : inPlace[rank]) return;  // read from this rank's memory
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
      size_t largest = 0;  // of the blocks that go through the buffers
      bool declinable = true;
      for (size_t q = 0; q < n; ++q) {
        const char* theirs = channel.buffer(static_cast<int>(q), turn);
        if (headerWord(theirs, declineWord) != 0) declinable = false;
        inPlace[q] = headerWord(theirs, inPlaceWord) != 0;
        anyInPlace = anyInPlace || inPlace[q];
        addresses[q] = headerWord(theirs, addressWords + rank);
        for (size_t j = 0; j < n; ++j) {
          const uint64_t bytes = headerWord(theirs, j);
          if (!inPlace[q]) largest = std::max(largest, static_cast<size_t>(bytes));
          if (j == rank && bytes != recvBytes[q]) {
            throw TransportError("ringreduce: " + op.describe() + " on rank " +
                                  std::to_string(rank) + ": rank " + std::to_string(q) +
                                  " sends " + std::to_string(bytes) +
                                  " bytes to this rank, whose output split sizes expect " +
                                  std::to_string(recvBytes[q]));
          }
        }
      }
      // The same count and answer on every rank: from the same n headers.
      turns = std::max<size_t>(1, turnsFor(largest, slotBytes));
      if (turns > kHostChannelMaxPieces && declinable) return false;
    }
    for (size_t q = 0; q < n; ++q) {
      const size_t piece = q == rank || inPlace[q] ? 0 : pieceOf(recvBytes[q], first);
      if (piece == 0) continue;
      std::memcpy(static_cast<char*>(blocks.recv[q]) + first,
                  channel.buffer(static_cast<int>(q), turn) + headerBytes +
                      rank * slotBytes,
                  piece);
    }
  }
  if (!anyInPlace) {
    recordOffer(channel, chosen, inPlace[rank], start);
    return true;
  }
  // What the turns did not cover of this rank's own block (all of it beyond
  // the first turn's piece where the buffers took fewer turns than it needs).
  const size_t own = std::min(sendBytes[rank], recvBytes[rank]);
  const size_t covered = std::min(own, turns * slotBytes);
  if (own > covered) {
    std::memcpy(static_cast<char*>(blocks.recv[rank]) + covered,
                static_cast<const char*>(blocks.send[rank]) + covered, own - covered);
  }
  // Block `rank` of each peer that offered its blocks, where it lies; each
  // rank starts with a different peer.
  for (size_t r = 1; r < n; ++r) {
    const size_t q = (rank + r) % n;
    if (!inPlace[q] || recvBytes[q] == 0) continue;
    const int peer = static_cast<int>(q);
    const int error = crossMemoryRead(channel.pid(peer), addresses[q], blocks.recv[q], recvBytes[q]);
    if (error != 0) channel.throwUnreadable(peer, op, error);
  }
  // Done reading the peers' memory; back to the caller once they are done with this one's.
  publishAndAwait(comm, op, FlagKind::Reduced, turn);
  recordOffer(channel, chosen, inPlace[rank], start);
  return true;
}

}  // namespace ringreduce
