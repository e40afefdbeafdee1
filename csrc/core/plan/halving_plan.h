// Who pairs with whom in recursive halving (reduce-scatter) and recursive
// doubling (allgather) over m ranks, shared by the algorithm
// (algorithms/halving_doubling.h) and the cost model that prices it.
//
// m need not be a power of two: with m = 2^L + extra, the first 2*extra
// ranks fold in pairs first (even rank 2i hands its whole buffer to 2i+1 and
// sits out), the remaining 2^L "virtual" ranks halve and double, and the
// odd ranks hand the result back at the end (the usual fold, as in MPICH).
//
// Neighbours first (the allreduce's order), step i (0..L-1) pairs virtual
// ranks v and v ^ 2^i, so with ranks laid out node by node the big early
// halves stay on the node and only the small late ones cross the network;
// far first, step i pairs v and v ^ 2^(L-1-i). The buffer is cut into 2^L
// blocks; virtual rank v ends the reduce-scatter owning block blockOf(v)
// (v's bits reversed when neighbours go first, v itself when far ones do:
// the order reduce_scatter needs), and the allgather runs the steps backwards.
#pragma once

namespace ringreduce {

class HalvingPlan {
 public:
  enum class Order { NeighboursFirst, FarFirst };

  explicit HalvingPlan(int size, Order order = Order::NeighboursFirst)
      : size_(size), farFirst_(order == Order::FarFirst) {
    while (pow2_ * 2 <= size) {
      pow2_ *= 2;
      ++steps_;
    }
    extra_ = size - pow2_;
  }

  int size() const { return size_; }
  int pow2() const { return pow2_; }    // ranks that halve and double
  int steps() const { return steps_; }  // log2(pow2)
  bool folds() const { return extra_ > 0; }

  // -1 for a rank folded out (its partner is rank + 1).
  int virtualOf(int rank) const {
    if (rank < 2 * extra_) return rank % 2 == 1 ? rank / 2 : -1;
    return rank - extra_;
  }
  int rankOf(int v) const { return v < extra_ ? 2 * v + 1 : v + extra_; }
  // The lowest rank behind virtual rank v (the folded one, if any), and
  // size() for v == pow2(): virtual ranks [a, b) stand for the ranks
  // [lowestRankOf(a), lowestRankOf(b)), which the rank-order reduce-scatter
  // uses to give virtual rank v the chunks of both ranks of its pair.
  int lowestRankOf(int v) const { return v < extra_ ? 2 * v : v + extra_; }
  // The rank a folded-out rank hands its buffer to, and gets the result from.
  int foldPartner(int rank) const { return rank + 1; }
  // The rank folded into `rank`, or -1.
  int foldedInto(int rank) const { return rank < 2 * extra_ && rank % 2 == 1 ? rank - 1 : -1; }

  // The bit of the virtual rank that step i flips (and that chooses the half kept).
  int bitOf(int step) const { return farFirst_ ? steps_ - 1 - step : step; }

  // The block virtual rank v owns after the reduce-scatter.
  int blockOf(int v) const {
    if (farFirst_) return v;
    int block = 0;
    for (int i = 0; i < steps_; ++i) block |= ((v >> i) & 1) << (steps_ - 1 - i);
    return block;
  }
  // The virtual rank owning `block` (either map is its own inverse).
  int ownerOf(int block) const { return blockOf(block); }

 private:
  int size_;
  bool farFirst_;
  int pow2_ = 1;
  int steps_ = 0;
  int extra_ = 0;
};

}  // namespace ringreduce
