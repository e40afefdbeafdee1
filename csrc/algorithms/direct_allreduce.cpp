// The direct allreduce: two rounds of messages between every pair of ranks (direct_allreduce.h)
#include "algorithms/direct_allreduce.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "core/math/host_reduce.h"
#include "core/plan/partition.h"
#include "core/observe/phase_recorder.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// Segments of round 1 in flight at once: while one is reduced, the next
// ones arrive. Each takes one slot per peer of the scratch; fewer when the
// peers are many (never less than one).
constexpr size_t kSegmentsInFlight = 4;
// Segments of round 1 sent ahead of the one being reduced. Each send is a
// rendezvous whose request waits in the peer's shared-memory FIFO
// (transport/ucx/eager_policy.h): a few at a time, not a block's worth.
constexpr size_t kSendsAhead = 8;
// The window shrinks to keep the scratch in the last-level cache. The
// segment does not: smaller segments would multiply the messages (a
// rendezvous each) for many peers, where a block-sized scratch was the rule.
constexpr size_t kCachedScratchBytes = size_t{8} << 20;
// Of my block, with one piece of each peer's beside it, well inside L2.
constexpr size_t kReducePieceBytes = 128 * 1024;

using SegmentReduced = std::function<void(size_t k, const char* at, size_t bytes)>;

// Round 1, a reduce-scatter: rank r's block (chunkOf(count, n, r)) of its
// buffer ends with the reduction of every rank's; or, given `output`, that
// reduction lands there and the buffer stays as it was. Returns the tag slot
// after the ones it used.
// `reduced`, when given, hears of each segment of the block as soon as it
// is reduced: its index, where it lies and its bytes.
// `blocks`, when given, holds the input block by block (block j, chunkOf(
// count, n, j) elements, at blocks[j]; `args.data` unused): the list form
// of reduce_scatter reads its tensors where they are. Needs `output`.
uint32_t reduceOwnBlock(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                        char* output = nullptr, const SegmentReduced& reduced = nullptr,
                        const void* const* blocks = nullptr) {
  Transport& t = comm.transport;
  const int n = comm.size();
  const int rank = comm.rank();
  const bool payload = !comm.config.payloadFree;
  const size_t esize = elementSize(args.type);
  const size_t peers = static_cast<size_t>(n - 1);
  // Where segment `r` of `owner`'s block of the input lies. Null in
  // payload-free runs: offsets give the transport its sizes.
  auto at = [&](int owner, const Range& r) -> char* {
    if (!payload) return nullptr;
    if (blocks == nullptr) return static_cast<char*>(args.data) + r.offset * esize;
    const size_t first = chunkOf(args.count, n, owner).offset;
    return static_cast<char*>(const_cast<void*>(blocks[owner])) + (r.offset - first) * esize;
  };

  // Round 1 travels in segments, so that each arrives into a small scratch
  // and is reduced while it is still in cache: one block-sized scratch
  // made the copy write it out to memory and the reduction read it back
  // (four ranks on two cores, 64 MiB: 34 ms per op; a stand-alone loop of
  // the same copies took 30 ms whole, 21 ms in 256 KiB segments). Every
  // block gets the largest block's number of segments, as in the ring.
  const SegmentPlan plan = planSegments(chunkOf(args.count, n, 0).count, esize,
                                        comm.config.segmentBytes, kRingPhaseSlots - 1);
  const size_t slotBytes = plan.elemsPerSegment * esize;
  const size_t window = std::min(
      plan.segments,
      std::clamp<size_t>(kCachedScratchBytes / (peers * slotBytes), 1, kSegmentsInFlight));
  char* scratch = payload ? static_cast<char*>(comm.workspace.get(
                                Workspace::kRecvA, window * peers * slotBytes))
                          : nullptr;
  // Peer `from`'s part of my segment k: slot (k mod window, peer index).
  auto slotOf = [&](int from, size_t k) {
    const size_t index = static_cast<size_t>(from < rank ? from : from - 1);
    return payload ? scratch + ((k % window) * peers + index) * slotBytes : nullptr;
  };
  const Range mine = chunkOf(args.count, n, rank);
  auto segmentOfBlock = [&](int owner, size_t k) {
    return segmentOf(chunkOf(args.count, n, owner), plan.elemsPerSegment, k);
  };
  // Round 1: each peer's copy of my block, segment by segment, into the
  // scratch window; my copy of each peer's block to it, kSendsAhead
  // segments ahead of my reduction.
  std::vector<Request> recvs(plan.segments * peers), sends;
  sends.reserve(plan.segments * peers);
  auto postRecvs = [&](size_t k) {
    const Range seg = segmentOfBlock(rank, k);
    for (int i = 1; i < n; ++i) {
      const int from = (rank - i + n) % n;
      recvs[k * peers + static_cast<size_t>(i - 1)] =
          t.irecv(from, makeTag(from, op.seq, static_cast<uint32_t>(k)), slotOf(from, k),
                  seg.count * esize, op);
    }
  };
  for (size_t k = 0; k < window; ++k) postRecvs(k);
  // Peers in a rotated order (r+1, r+2, ...), so ranks do not all hit rank
  // 0 first.
  auto postSends = [&](size_t k) {
    for (int i = 1; i < n; ++i) {
      const int to = (rank + i) % n;
      const Range seg = segmentOfBlock(to, k);
      sends.push_back(t.isend(to, makeTag(rank, op.seq, static_cast<uint32_t>(k)), at(to, seg),
                              seg.count * esize, op));
    }
  };
  const size_t sendWindow = std::min(plan.segments, kSendsAhead);
  for (size_t k = 0; k < sendWindow; ++k) postSends(k);

  // In rank order, my own block in its place, so every run combines alike;
  // piece by piece, every peer's part while the piece is in cache.
  const int last = rank == n - 1 ? n - 2 : n - 1;
  const size_t piece = std::max<size_t>(1, kReducePieceBytes / esize);
  for (size_t k = 0; k < plan.segments; ++k) {
    for (size_t i = 0; i < peers; ++i) t.wait(recvs[k * peers + i], op);
    const Range seg = segmentOfBlock(rank, k);
    // Into the output: my own part first, then the same steps.
    char* own = at(rank, seg);
    char* into = !payload ? nullptr : output ? output + (seg.offset - mine.offset) * esize : own;
    if (payload && seg.count > 0) {
      PhaseScope reducing(op.phases, Phase::Reduce);
      if (into != own) std::memcpy(into, own, seg.count * esize);  // unless output is my block
      for (size_t first = 0; first < seg.count; first += piece) {
        const size_t count = std::min(piece, seg.count - first);
        char* dst = into + first * esize;
        for (int peer = 0; peer < n; ++peer) {
          if (peer == rank) continue;
          const char* src = slotOf(peer, k) + first * esize;
          if (peer == last && args.op == ReduceOp::Avg) {
            reduceAndAverage(args.type, dst, src, count, n);
          } else {
            reduceInto(args.type, args.op, dst, src, count);
          }
        }
      }
    }
    if (reduced) reduced(k, into, seg.count * esize);
    if (k + window < plan.segments) postRecvs(k + window);  // its slots are free again
    if (k + sendWindow < plan.segments) postSends(k + sendWindow);
  }
  t.waitAll(sends, op);
  return static_cast<uint32_t>(plan.segments);
}

// Round 2, an allgather: `mine` to every peer, and each peer's block into
// `blockOf(peer)`, all under tag slot `slot`.
template <typename BlockOf>
void exchangeBlocks(const Comm& comm, const OpContext& op, uint32_t slot, const char* mine,
                    size_t mineBytes, const BlockOf& blockOf) {
  Transport& t = comm.transport;
  const int n = comm.size();
  const int rank = comm.rank();
  std::vector<Request> recvs, sends;
  for (int i = 1; i < n; ++i) {
    const int from = (rank - i + n) % n;
    const auto [at, bytes] = blockOf(from);
    recvs.push_back(t.irecv(from, makeTag(from, op.seq, slot), at, bytes, op));
  }
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    sends.push_back(t.isend(to, makeTag(rank, op.seq, slot), mine, mineBytes, op));
  }
  t.waitAll(recvs, op);
  t.waitAll(sends, op);
}

}  // namespace

void directAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  const int n = comm.size();
  if (n == 1 || args.count == 0) return;
  // Round 2 writes where peers read round 1 from: round 1 returns once they
  // have (its sends are complete).
  const uint32_t slot = reduceOwnBlock(comm, op, args);
  const size_t esize = elementSize(args.type);
  char* data = comm.config.payloadFree ? nullptr : static_cast<char*>(args.data);
  auto at = [&](const Range& r) { return data ? data + r.offset * esize : nullptr; };
  const Range mine = chunkOf(args.count, n, comm.rank());
  // My reduced block to everyone, theirs straight into place.
  exchangeBlocks(comm, op, slot, at(mine), mine.count * esize, [&](int from) {
    const Range theirs = chunkOf(args.count, n, from);
    return std::pair{at(theirs), theirs.count * esize};
  });
}

void directReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  if (comm.size() == 1 || args.count == 0) return;  // AVG over one rank is the identity
  reduceOwnBlock(comm, op, args);
}

void directReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                         void* output) {
  if (input.count == 0) return;
  if (comm.size() == 1) {  // AVG over one rank is the identity
    if (!comm.config.payloadFree) {
      std::memcpy(output, input.data, input.count * elementSize(input.type));
    }
    return;
  }
  reduceOwnBlock(comm, op, input, comm.config.payloadFree ? nullptr : static_cast<char*>(output));
}

void directReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root,
                  void* chunk) {
  const int n = comm.size();
  const int rank = comm.rank();
  if (n == 1 || args.count == 0) return;  // AVG over one rank is the identity
  Transport& t = comm.transport;
  const OpContext gather = op.part(1);
  char* output = comm.config.payloadFree ? nullptr : static_cast<char*>(chunk);
  if (rank != root) {
    // Each reduced segment on to the root at once: the gather runs beside
    // the reduction, and the segment is still in cache when the root reads it.
    std::vector<Request> sends;
    reduceOwnBlock(comm, op.part(0), args, output, [&](size_t k, const char* at, size_t bytes) {
      sends.push_back(t.isend(root, makeTag(rank, gather.seq, static_cast<uint32_t>(k)), at, bytes,
                              gather));
    });
    t.waitAll(sends, gather);
    return;
  }
  // Each peer's segments straight into place. Peer j sends segment k of its
  // block only once it has read mine (round 1), so nothing lands where it
  // is still reading.
  const size_t esize = elementSize(args.type);
  const SegmentPlan plan = planSegments(chunkOf(args.count, n, 0).count, esize,
                                        comm.config.segmentBytes, kRingPhaseSlots - 1);
  char* data = comm.config.payloadFree ? nullptr : static_cast<char*>(args.data);
  std::vector<Request> recvs;
  for (int i = 1; i < n; ++i) {
    const int from = (rank - i + n) % n;
    const Range block = chunkOf(args.count, n, from);
    for (size_t k = 0; k < plan.segments; ++k) {
      const Range seg = segmentOf(block, plan.elemsPerSegment, k);
      recvs.push_back(t.irecv(from, makeTag(from, gather.seq, static_cast<uint32_t>(k)),
                              data ? data + seg.offset * esize : nullptr, seg.count * esize,
                              gather));
    }
  }
  reduceOwnBlock(comm, op.part(0), args);
  t.waitAll(recvs, gather);
}

void directReduceScatterBlocks(const Comm& comm, const OpContext& op, const ReductionArgs& input,
                               const std::vector<const void*>& blocks, void* output) {
  if (input.count == 0) return;
  if (comm.size() == 1) {  // AVG over one rank is the identity
    if (!comm.config.payloadFree && output != blocks[0]) {
      std::memcpy(output, blocks[0], input.count * elementSize(input.type));
    }
    return;
  }
  reduceOwnBlock(comm, op, input, comm.config.payloadFree ? nullptr : static_cast<char*>(output),
                 nullptr, blocks.data());
}

void directAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  const int n = comm.size();
  if (n == 1 || args.blockBytes == 0) return ringAllgather(comm, op, args);
  char* output = comm.config.payloadFree ? nullptr : static_cast<char*>(args.output);
  auto blockAt = [&](int r) {
    return output ? output + static_cast<size_t>(r) * args.blockBytes : nullptr;
  };
  char* mine = blockAt(comm.rank());
  if (mine != nullptr && args.input != mine) std::memmove(mine, args.input, args.blockBytes);
  exchangeBlocks(comm, op, 0, mine, args.blockBytes,
                 [&](int from) { return std::pair{blockAt(from), args.blockBytes}; });
}

}  // namespace ringreduce
