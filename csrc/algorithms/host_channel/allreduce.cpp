// Allreduce through the group's host channel (allreduce.h)
#include "algorithms/host_channel/allreduce.h"

#include <algorithm>
#include <cstring>

#include "algorithms/host_channel/reduction.h"
#include "algorithms/host_channel/stretches.h"
#include "algorithms/host_channel/turn.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "core/plan/partition.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

bool hostChannelAllreduceApplies(const Comm& comm, size_t bytes) {
  if (!hostChannelCollectiveApplies(comm, bytes)) return false;
  if (comm.config.hostWireDtype != WireDtype::None) return false;
  // Several pieces (up to kHostChannelMaxPieces, as checked above): as asked
  // (RINGREDUCE_ALGORITHM=shm), or below the size from which cma is as fast.
  return bytes <= comm.channel->bufferBytes() ||
         comm.config.allreduceAlgorithm == AllreduceAlgorithm::HostChannel ||
         bytes < kHostChannelAllreduceBelowBytes;
}

namespace {

// The message as one run of bytes over its segments, in order
// (forEachStretch): calls f(segment bytes, offset in the run, length) for
// each segment's part of [first, first + bytes).
struct Segments {
  const AllreduceSegment* begin;
  const AllreduceSegment* end;
};

template <typename F>
void forEachPart(const Segments& segments, size_t esize, size_t first, size_t bytes,
                 const F& f) {
  const AllreduceSegment* s = segments.begin;
  forEachStretch(
      static_cast<size_t>(segments.end - s), [&](size_t i) { return s[i].count * esize; }, first,
      bytes, [&](size_t i, size_t inPart, size_t inWindow, size_t length) {
        f(static_cast<char*>(s[i].data) + inPart, first + inWindow, length);
      });
}

// One piece of the message, [first, first + count) of its elements, at
// most a buffer: one turn of the channel.
void reducePiece(const Comm& comm, const OpContext& op, DataType type, ReduceOp reduceOp,
                 const Segments& segments, size_t first, size_t count, bool lastPiece) {
  HostChannel& channel = *comm.channel;
  const int rank = channel.rank();
  const size_t esize = elementSize(type);
  const size_t base = first * esize;
  const size_t bytes = count * esize;
  const ReductionArgs args{nullptr, count, type, reduceOp};
  const int n = channel.size();
  const bool twoPhase = bytes >= twoPhaseFromBytes(n);
  // The two-phase form publishes its share of the result after this turn.
  const bool lastTurn = lastPiece && !twoPhase;
  // In two phases no peer reads this rank's own chunk of its buffer before
  // the result goes there: its reduction reads that chunk from the input
  // itself (reduceInRankOrder's values in place), and the copy skips it.
  const Range chunk = chunkOf(count, n, rank);
  const size_t chunkFirst = base + chunk.offset * esize;
  const size_t chunkEnd = chunkFirst + chunk.count * esize;
  const HostChannel::Turn turn = exchangeTurn(comm, op, bytes, lastTurn, [&](char* mine) {
    const auto copyIn = [&](char* part, size_t at, size_t length) {
      channel.copyIn(mine + (at - base), part, length);
    };
    if (!twoPhase) return forEachPart(segments, esize, base, bytes, copyIn);
    forEachPart(segments, esize, base, chunkFirst - base, copyIn);
    forEachPart(segments, esize, chunkEnd, base + bytes - chunkEnd, copyIn);
  });
  if (op.stoppedAhead()) return;  // published ahead: the queued run goes on from here
  char* mine = channel.buffer(rank, turn);
  if (!twoPhase) {
    PhaseScope reducing(op.phases, Phase::Reduce);
    forEachPart(segments, esize, base, bytes, [&](char* part, size_t at, size_t length) {
      reduceInRankOrder(channel, turn, args, part, at - base, length);
    });
    return;
  }
  // Two phases: this rank's chunk of everyone's buffer, reduced into its
  // place in the output and back into this rank's buffer for the others.
  {
    PhaseScope reducing(op.phases, Phase::Reduce);
    forEachPart(segments, esize, chunkFirst, chunkEnd - chunkFirst,
                [&](char* part, size_t at, size_t length) {
                  reduceInRankOrder(channel, turn, args, part, at - base, length, part);
                  // Into lines a peer read last time: with the stores that
                  // are faster there, as the copy in (channel_stores.h).
                  channel.copyIn(mine + (at - base), part, length);
                });
  }
  publishAndAwait(comm, op, FlagKind::Reduced, turn);
  for (int r = 0; r < n; ++r) {
    if (r == rank) continue;
    const Range theirs = chunkOf(count, n, r);
    const char* buffer = channel.buffer(r, turn);
    forEachPart(segments, esize, base + theirs.offset * esize, theirs.count * esize,
                [&](char* part, size_t at, size_t length) {
                  std::memcpy(part, buffer + (at - base), length);
                });
  }
}

}  // namespace

void hostChannelAllreduceSegments(const Comm& comm, const OpContext& op, DataType type,
                                  ReduceOp reduceOp, const AllreduceSegment* segments,
                                  size_t howMany) {
  const size_t esize = elementSize(type);
  size_t total = 0;
  for (size_t i = 0; i < howMany; ++i) total += segments[i].count;
  const Segments all{segments, segments + howMany};
  // Every rank cuts the message alike: the same turns in the same order.
  const size_t perPiece = std::max<size_t>(1, comm.channel->bufferBytes() / esize);
  for (size_t first = 0; first < total; first += perPiece) {
    reducePiece(comm, op, type, reduceOp, all, first, std::min(perPiece, total - first),
                first + perPiece >= total);
    if (op.stoppedAhead()) return;
  }
}

void hostChannelAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  const AllreduceSegment whole{args.data, args.count};
  hostChannelAllreduceSegments(comm, op, args.type, args.op, &whole, 1);
}

}  // namespace ringreduce
