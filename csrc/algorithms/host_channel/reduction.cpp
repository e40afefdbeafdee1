// The arithmetic of the host channel's reducing collectives (reduction.h)
#include "algorithms/host_channel/reduction.h"

#include <algorithm>
#include <cstring>

#include "core/math/host_reduce.h"
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

}  // namespace

namespace {

// Rank 0's own input is the expression's start. Of two ranks, rank 1
// computes its input (op) buffer_0 where that has the same bits (integer
// types): one pass instead of a copy and a pass.
bool swapsTwo(const HostChannel& channel, const ReductionArgs& args) {
  return channel.size() == 2 && channel.rank() == 1 && commutesExactly(args.type, args.op);
}

}  // namespace

bool reduceInRankOrderReadsOwnBuffer(const HostChannel& channel, const ReductionArgs& args) {
  return channel.rank() != 0 && !swapsTwo(channel, args);
}

void reduceInRankOrder(const HostChannel& channel, const HostChannel::Turn& turn,
                       const ReductionArgs& args, char* dst, size_t firstByte, size_t bytes,
                       const char* ownValues) {
  const size_t esize = elementSize(args.type);
  const int n = channel.size();
  const ReduceOp op = args.op == ReduceOp::Avg ? ReduceOp::Sum : args.op;
  const bool swapTwo = swapsTwo(channel, args);
  const bool dstHoldsFirst = channel.rank() == 0 || swapTwo;
  // Own values in dst itself: each slice of them is kept here (in L1)
  // before rank 0's values overwrite it.
  const bool ownInDst = ownValues == dst && !dstHoldsFirst;
  alignas(64) char kept[kSliceBytes];
  for (size_t done = 0; done < bytes;) {
    const size_t slice = std::min(kSliceBytes / esize * esize, bytes - done);
    const size_t at = firstByte + done;
    const size_t count = slice / esize;
    if (ownInDst) std::memcpy(kept, dst + done, slice);
    if (!dstHoldsFirst) std::memcpy(dst + done, channel.buffer(0, turn) + at, slice);
    for (int r = 1; r < n; ++r) {
      const int from = swapTwo ? 0 : r;
      const char* src = from != channel.rank() || ownValues == nullptr ? channel.buffer(from, turn) + at
                        : ownInDst                                     ? kept
                                                                       : ownValues + done;
      if (args.op == ReduceOp::Avg && r == n - 1) {
        reduceAndAverage(args.type, dst + done, src, count, n);
      } else {
        reduceInto(args.type, op, dst + done, src, count);
      }
    }
    done += slice;
  }
}

}  // namespace ringreduce
