#include "algorithms/shared_memory_allreduce.h"

#include <algorithm>
#include <cstring>

#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "core/plan/partition.h"
#include "transport/host/host_channel.h"

namespace ringreduce {

namespace {

// The reduction runs in slices of this many bytes, so each slice of the
// output stays in L1 while every peer's buffer is added to it.
constexpr size_t kSliceBytes = 16 * 1024;

// Whether a (op) b has the bits of b (op) a for every a and b of `type`:
// integer and boolean sums, products and bitwise ops. Not floating point:
// of two NaNs x86 keeps the first operand's payload and sign, and MIN and
// MAX pick between -0 and +0 (or two NaNs) by order.
bool commutesExactly(DataType type, ReduceOp op) {
  if (!isIntegral(type) && type != DataType::Bool) return false;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
    case ReduceOp::Product:
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      return true;
    case ReduceOp::Min:
    case ReduceOp::Max:
      break;
  }
  return false;
}

// dst[range] = buffer_0 (op) buffer_1 (op) ... (op) buffer_{n-1}, in rank
// order: the same expression on every rank. dst holds this rank's own
// input (buffer_rank's values). AVG divides in the last step, once
// (reduceAndAverage).
void reduceInRankOrder(const HostChannel& channel, int parity, const ReductionArgs& args,
                       char* dst, size_t firstByte, size_t bytes) {
  const size_t esize = elementSize(args.type);
  const int n = channel.size();
  const ReduceOp op = args.op == ReduceOp::Avg ? ReduceOp::Sum : args.op;
  // Rank 0's own input is the expression's start. Of two ranks, rank 1
  // computes its input (op) buffer_0 where that has the same bits (integer
  // types): one pass instead of a copy and a pass.
  const bool swapTwo = n == 2 && channel.rank() == 1 && commutesExactly(args.type, args.op);
  const bool dstHoldsFirst = channel.rank() == 0 || swapTwo;
  for (size_t done = 0; done < bytes;) {
    const size_t slice = std::min(kSliceBytes / esize * esize, bytes - done);
    const size_t at = firstByte + done;
    const size_t count = slice / esize;
    if (!dstHoldsFirst) std::memcpy(dst + done, channel.buffer(0, parity) + at, slice);
    for (int r = 1; r < n; ++r) {
      const char* src = channel.buffer(swapTwo ? 0 : r, parity) + at;
      if (args.op == ReduceOp::Avg && r == n - 1) {
        reduceAndAverage(args.type, dst + done, src, count, n);
      } else {
        reduceInto(args.type, op, dst + done, src, count);
      }
    }
    done += slice;
  }
}

}  // namespace

bool sharedMemoryAllreduceApplies(const Comm& comm, size_t bytes) {
  const AllreduceAlgorithm forced = comm.config.allreduceAlgorithm;
  return comm.channel != nullptr &&
         bytes <= comm.channel->bufferBytes() * kSharedMemoryMaxPieces &&
         (forced == AllreduceAlgorithm::Auto || forced == AllreduceAlgorithm::SharedMemory) &&
         comm.config.hostWireDtype == WireDtype::None && !comm.config.payloadFree;
}

namespace {

// One piece of the message, at most a buffer: one turn of the channel.
void reducePiece(HostChannel& channel, SpinBudget& spin, Transport* driven, const OpContext& op,
                 const ReductionArgs& args, char* data, size_t count) {
  const int rank = channel.rank();
  const size_t esize = elementSize(args.type);
  const size_t bytes = count * esize;
  const HostChannel::Turn turn = channel.takeTurn();
  char* mine = channel.buffer(rank, turn.parity);

  std::memcpy(mine, data, bytes);
  channel.publish(FlagKind::Input, turn, op);
  probe::mark(ProbePoint::Published);
  {
    PhaseScope waiting(op.phases, Phase::WaitPeers);
    channel.awaitPeers(FlagKind::Input, turn, op, spin, driven);
  }
  probe::mark(ProbePoint::PeersHere);
  if (bytes < kTwoPhaseFromBytes) {
    PhaseScope reducing(op.phases, Phase::Reduce);
    reduceInRankOrder(channel, turn.parity, args, data, 0, bytes);
    return;
  }
  // Two phases: this rank's chunk of everyone's buffer, reduced into its
  // place in the output and back into this rank's buffer for the others.
  const int n = channel.size();
  const Range chunk = chunkOf(count, n, rank);
  {
    PhaseScope reducing(op.phases, Phase::Reduce);
    char* dst = data + chunk.offset * esize;
    reduceInRankOrder(channel, turn.parity, args, dst, chunk.offset * esize, chunk.count * esize);
    std::memcpy(mine + chunk.offset * esize, dst, chunk.count * esize);
  }
  channel.publish(FlagKind::Reduced, turn, op);
  probe::mark(ProbePoint::Published);
  {
    PhaseScope waiting(op.phases, Phase::WaitPeers);
    channel.awaitPeers(FlagKind::Reduced, turn, op, spin, driven);
  }
  probe::mark(ProbePoint::PeersHere);
  for (int r = 0; r < n; ++r) {
    if (r == rank) continue;
    const Range theirs = chunkOf(count, n, r);
    std::memcpy(data + theirs.offset * esize,
                channel.buffer(r, turn.parity) + theirs.offset * esize, theirs.count * esize);
  }
}

}  // namespace

void sharedMemoryAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  HostChannel& channel = *comm.channel;
  SpinBudget& spin = comm.spinBudget();
  const size_t esize = elementSize(args.type);
  // Every rank cuts the message alike: the same turns in the same order.
  const size_t perPiece = std::max<size_t>(1, channel.bufferBytes() / esize);
  char* data = static_cast<char*>(args.data);
  for (size_t first = 0; first < args.count; first += perPiece) {
    reducePiece(channel, spin, comm.drivenTransport(), op, args, data + first * esize,
                std::min(perPiece, args.count - first));
  }
}

}  // namespace ringreduce
