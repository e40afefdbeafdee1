#include "algorithms/direct_allreduce.h"

#include <algorithm>
#include <vector>

#include "core/host_reduce.h"
#include "core/partition.h"
#include "core/phase_recorder.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {
// Of my block, with one piece of each peer's beside it, well inside L2.
constexpr size_t kReducePieceBytes = 128 * 1024;
}  // namespace

void directAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  Transport& t = comm.transport;
  const int n = comm.size();
  const int rank = comm.rank();
  if (n == 1 || args.count == 0) return;
  const bool payload = !comm.config.payloadFree;
  const size_t esize = elementSize(args.type);
  // Null in payload-free runs: offsets give the transport its sizes.
  auto at = [&](const Range& r) {
    return payload ? static_cast<char*>(args.data) + r.offset * esize : nullptr;
  };
  const Range mine = chunkOf(args.count, n, rank);
  const size_t mineBytes = mine.count * esize;
  char* scratch = payload ? static_cast<char*>(comm.workspace.get(
                                Workspace::kRecvA, static_cast<size_t>(n - 1) * mineBytes))
                          : nullptr;
  auto slotOf = [&](int peer) { return scratch + (peer < rank ? peer : peer - 1) * mineBytes; };

  // Round 1: peer's copy of my block into scratch; my copy of peer's block to it.
  std::vector<Request> recvs, sends;
  for (int i = 1; i < n; ++i) {
    const int from = (rank - i + n) % n;
    recvs.push_back(
        t.irecv(from, makeTag(from, op.seq, 0), payload ? slotOf(from) : nullptr, mineBytes, op));
  }
  // Peers in a rotated order (r+1, r+2, ...) so ranks do not all hit rank 0 first.
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    const Range theirs = chunkOf(args.count, n, to);
    sends.push_back(t.isend(to, makeTag(rank, op.seq, 0), at(theirs), theirs.count * esize, op));
  }
  t.waitAll(recvs, op);
  if (payload && mine.count > 0) {
    // In rank order, my own block in its place, so every run combines alike.
    // Piece by piece, every peer's part while the piece is in cache: my
    // block crosses memory once instead of n - 1 times, in the same order
    // of operations (four ranks on two cores, 64 MiB: the reduction took
    // 15% of the cycles in n - 1 passes).
    PhaseScope reducing(op.phases, Phase::Reduce);
    const int last = rank == n - 1 ? n - 2 : n - 1;
    const size_t piece = std::max<size_t>(1, kReducePieceBytes / esize);
    for (size_t first = 0; first < mine.count; first += piece) {
      const size_t count = std::min(piece, mine.count - first);
      char* dst = at(mine) + first * esize;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == rank) continue;
        const char* src = slotOf(peer) + first * esize;
        if (peer == last && args.op == ReduceOp::Avg) {
          reduceAndAverage(args.type, dst, src, count, n);
        } else {
          reduceInto(args.type, args.op, dst, src, count);
        }
      }
    }
  }
  t.waitAll(sends, op);

  // Round 2: my reduced block to everyone, theirs straight into place.
  recvs.clear();
  sends.clear();
  for (int i = 1; i < n; ++i) {
    const int from = (rank - i + n) % n;
    const Range theirs = chunkOf(args.count, n, from);
    recvs.push_back(t.irecv(from, makeTag(from, op.seq, 1), at(theirs), theirs.count * esize, op));
  }
  for (int i = 1; i < n; ++i) {
    const int to = (rank + i) % n;
    sends.push_back(t.isend(to, makeTag(rank, op.seq, 1), at(mine), mineBytes, op));
  }
  t.waitAll(recvs, op);
  t.waitAll(sends, op);
}

}  // namespace ringreduce
