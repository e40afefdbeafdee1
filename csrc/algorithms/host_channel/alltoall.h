// All-to-all of equal blocks through the group's host channel
// (algorithms/host_channel/turn.h): in each turn every rank copies a piece of each of
// its n blocks into its buffer (block j's piece in slot j), and once every
// peer's flag is up, rank r copies slot r of each rank q's buffer into its
// block q. Pieces of a buffer, the same on every rank. A rank's block to
// itself skips the buffer: input to output directly.
//
// Uneven splits (hostChannelUnevenAlltoall, alltoall_uneven.cpp): a rank
// cannot tell from its own arguments how large its peers' blocks are, so how
// many turns it takes is agreed in the first: each rank's buffer starts with
// what it sends to each rank, and every rank reads them all before it counts
// the turns. A rank whose largest block to a peer is at least 128 KiB,
// where the ranks can read each other's memory
// (cross_memory_gather.h), also puts where its blocks lie there and none of
// them into its buffer: its peers read theirs from its memory after the
// turns, one copy instead of two, and no rank returns before every peer has
// said it is done reading (a Reduced flag). Every rank decides alike from
// the first turn's headers; a body run to publish ahead never offers (its
// copies of a strided input go with it).
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/pairwise_exchange.h"

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// Whether an all-to-all of `bytes` (each rank's whole input) in equal
// blocks goes through the channel: the same answer on every rank
// (hostChannelCollectiveApplies).
bool hostChannelAlltoallApplies(const Comm& comm, size_t bytes);

// n blocks of `blockBytes` back to back in `input` and in `output`: block
// j of rank q's input lands in block q of rank j's output. Input and
// output must not overlap.
struct EqualAlltoallArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t blockBytes = 0;
};
void hostChannelAlltoall(const Comm& comm, const OpContext& op, const EqualAlltoallArgs& args);

// Whether an all-to-all of split sizes given (each rank its own) starts on
// the channel: there is one and nothing asks for another algorithm. Not the
// sizes, which differ per rank: those decide after the first turn.
bool hostChannelUnevenAlltoallApplies(const Comm& comm);

// As allToAll (pairwise_exchange.h): block j of `args.send` (sendLayout) lands
// in block i of rank j's `args.recv` (recvLayout), i this rank. False, with
// the output undefined, when the largest block of any rank would take more
// than kHostChannelMaxPieces turns and every rank `mayDecline`: every rank
// then says false after the same first turn, and the caller moves the
// blocks another way. A rank that may not (the caller's thread, which has no
// transport to move them with) says so in the first turn, and every rank
// then takes as many turns as the blocks need. Throws TransportError where a
// peer sends this rank another size than its recvLayout expects (a
// mismatch: the group fails, its peers told). Input and output must not
// overlap.
bool hostChannelUnevenAlltoall(const Comm& comm, const OpContext& op, const AllToAllArgs& args,
                               bool mayDecline = true);

// The same with every block apart (torch's all_to_all of lists, read and
// written where they are, no flat buffer between): block j, sendBytes[j] at
// send[j], goes to rank j; rank q's block to this rank lands at recv[q]
// (recvBytes[q] expected). No block may overlap another.
struct AllToAllBlocks {
  InlineVector<const void*, 8> send;
  PerRank sendBytes;
  InlineVector<void*, 8> recv;
  PerRank recvBytes;
};
bool hostChannelUnevenAlltoallBlocks(const Comm& comm, const OpContext& op,
                                     const AllToAllBlocks& blocks, bool mayDecline = true);

// Whether every block this rank sends and receives (its layouts) fits
// kHostChannelMaxPieces turns: where every rank's do, the uneven all-to-all
// never declines, so a rank gains nothing by keeping a way to decline. A
// caller runs it on its own thread only then, so that it seldom makes its
// peers take many turns for blocks another way would move faster.
bool hostChannelUnevenAlltoallFits(const Comm& comm, const BlockLayout& send,
                                   const BlockLayout& recv);

}  // namespace ringreduce
