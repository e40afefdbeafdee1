// Rabenseifner's allreduce: recursive halving, then recursive doubling (halving_doubling.h)
#include "algorithms/halving_doubling.h"

#include <cstring>
#include <string>

#include "core/base/errors.h"
#include "core/math/host_reduce.h"
#include "core/observe/phase_recorder.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// Message slots: the fold, then one per reduce-scatter step, one per
// allgather step, and the unfold; a step's message is one message.
uint32_t foldSlot() { return 0; }
uint32_t scatterSlot(int step) { return 1 + static_cast<uint32_t>(step); }
uint32_t gatherSlot(const HalvingPlan& plan, int step) {
  return 1 + static_cast<uint32_t>(plan.steps() + step);
}
uint32_t unfoldSlot(const HalvingPlan& plan) { return 1 + 2 * static_cast<uint32_t>(plan.steps()); }

void checkLayout(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                 const ChunkLayout& chunks) {
  if (chunks.parts() != comm.size() || chunks.total() != args.count) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName + ": a chunk layout of " +
                          std::to_string(chunks.parts()) + " chunks, " +
                          std::to_string(chunks.total()) + " elements, for " +
                          std::to_string(comm.size()) + " ranks, " +
                          std::to_string(args.count) + " elements");
  }
}

// One rank's view of a run: its buffer, its place in the plan, and the
// exchanges the steps are made of.
class Halving {
 public:
  // `chunks` (null: the plan's 2^L equal blocks, neighbours first, for the
  // allreduce): the rank-order forms, far first, where virtual rank v's
  // blocks are the chunks of the ranks behind it.
  Halving(const Comm& comm, const OpContext& op, const ReductionArgs& args,
          const ChunkLayout* chunks)
      : comm_(comm),
        op_(op),
        args_(args),
        chunks_(chunks),
        plan_(comm.size(), chunks ? HalvingPlan::Order::FarFirst
                                  : HalvingPlan::Order::NeighboursFirst),
        rank_(comm.rank()),
        v_(plan_.virtualOf(rank_)),
        esize_(elementSize(args.type)),
        payload_(!comm.config.payloadFree) {}

  const HalvingPlan& plan() const { return plan_; }
  int virtualRank() const { return v_; }

  // Elements of blocks [first, first + blocks).
  Range blocks(int first, int blocks) const {
    if (chunks_ != nullptr) {
      const int low = plan_.lowestRankOf(first);
      return chunks_->span(low, plan_.lowestRankOf(first + blocks) - low);
    }
    const Range a = halvingBlock(args_.count, plan_, first);
    const Range b = halvingBlock(args_.count, plan_, first + blocks - 1);
    return {a.offset, b.offset + b.count - a.offset};
  }
  Range whole() const { return {0, args_.count}; }
  // Rank r's own chunk (rank-order forms only).
  Range chunk(int rank) const { return chunks_->chunk(rank); }

  // Sends `mine` to `peer` and receives its `theirs` into scratch, then
  // combines it into `theirs` of the buffer (dividing when `divisor`).
  void exchangeReduce(int peer, uint32_t slot, const Range& mine, const Range& theirs,
                      int divisor) {
    Transport& t = comm_.transport;
    char* scratch = payload_
                        ? static_cast<char*>(comm_.workspace.get(Workspace::kRecvA, bytes(theirs)))
                        : nullptr;
    Request recv = t.irecv(peer, makeTag(peer, op_.seq, slot), scratch, bytes(theirs), op_);
    Request send = t.isend(peer, makeTag(rank_, op_.seq, slot), at(mine), bytes(mine), op_);
    t.wait(recv, op_);
    if (payload_ && theirs.count > 0) {
      PhaseScope reducing(op_.phases, Phase::Reduce);
      if (divisor != 0) {
        reduceAndAverage(args_.type, at(theirs), scratch, theirs.count, divisor);
      } else {
        reduceInto(args_.type, args_.op, at(theirs), scratch, theirs.count);
      }
    }
    t.wait(send, op_);
  }

  // Sends `mine` and receives `theirs` in place (allgather steps).
  void exchange(int peer, uint32_t slot, const Range& mine, const Range& theirs) {
    Transport& t = comm_.transport;
    Request recv = t.irecv(peer, makeTag(peer, op_.seq, slot), at(theirs), bytes(theirs), op_);
    Request send = t.isend(peer, makeTag(rank_, op_.seq, slot), at(mine), bytes(mine), op_);
    t.wait(recv, op_);
    t.wait(send, op_);
  }

  void send(int peer, uint32_t slot, const Range& r) {
    Request s = comm_.transport.isend(peer, makeTag(rank_, op_.seq, slot), at(r), bytes(r), op_);
    comm_.transport.wait(s, op_);
  }
  void receive(int peer, uint32_t slot, const Range& r) {
    Request s = comm_.transport.irecv(peer, makeTag(peer, op_.seq, slot), at(r), bytes(r), op_);
    comm_.transport.wait(s, op_);
  }
  // The fold's receive: the partner's whole buffer, combined into ours.
  void receiveReduce(int peer, uint32_t slot) {
    Transport& t = comm_.transport;
    const Range all = whole();
    char* scratch =
        payload_ ? static_cast<char*>(comm_.workspace.get(Workspace::kRecvA, bytes(all))) : nullptr;
    Request recv = t.irecv(peer, makeTag(peer, op_.seq, slot), scratch, bytes(all), op_);
    t.wait(recv, op_);
    if (payload_) {
      PhaseScope reducing(op_.phases, Phase::Reduce);
      reduceInto(args_.type, args_.op, at(all), scratch, all.count);
    }
  }

 private:
  // In payload-free runs the buffer is null: the offsets still give the
  // transport its sizes, and nothing is read or written.
  char* at(const Range& r) const {
    return payload_ ? static_cast<char*>(args_.data) + r.offset * esize_ : nullptr;
  }
  size_t bytes(const Range& r) const { return r.count * esize_; }

  const Comm& comm_;
  const OpContext& op_;
  const ReductionArgs& args_;
  const ChunkLayout* chunks_;
  const HalvingPlan plan_;
  const int rank_;
  const int v_;
  const size_t esize_;
  const bool payload_;
};

// Step i keeps the half of the current blocks that v's bit bitOf(i)
// selects and sends the other half to the partner, which keeps that one.
void halvingSteps(Halving& h, int avgDivisor) {
  const HalvingPlan& plan = h.plan();
  const int v = h.virtualRank();
  int first = 0;
  int count = plan.pow2();
  for (int i = 0; i < plan.steps(); ++i) {
    const int half = count / 2;
    const bool upper = ((v >> plan.bitOf(i)) & 1) != 0;
    const int keep = upper ? first + half : first;
    const int give = upper ? first : first + half;
    const bool last = i == plan.steps() - 1;
    h.exchangeReduce(plan.rankOf(v ^ (1 << plan.bitOf(i))), scatterSlot(i), h.blocks(give, half),
                     h.blocks(keep, half), last ? avgDivisor : 0);
    first = keep;
    count = half;
  }
}

// Backwards through the steps: the partner at step i holds the sibling of
// our blocks, so the pair doubles what it holds.
void doublingSteps(Halving& h) {
  const HalvingPlan& plan = h.plan();
  const int v = h.virtualRank();
  int first = plan.blockOf(v);
  int count = 1;
  for (int i = plan.steps() - 1; i >= 0; --i) {
    const int sibling = first ^ count;
    h.exchange(plan.rankOf(v ^ (1 << plan.bitOf(i))), gatherSlot(plan, i), h.blocks(first, count),
               h.blocks(sibling, count));
    first = first < sibling ? first : sibling;
    count *= 2;
  }
}

// A group of one: AVG's given divisor still divides.
void reduceAlone(const Comm& comm, const ReductionArgs& args, int avgDivisor) {
  if (avgDivisor > 1 && !comm.config.payloadFree) {
    finishAverage(args.type, args.data, args.count, avgDivisor);
  }
}

}  // namespace

void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor) {
  Halving h(comm, op, args, nullptr);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) return reduceAlone(comm, args, avgDivisor);
  if (h.virtualRank() < 0) {
    h.send(plan.foldPartner(comm.rank()), foldSlot(), h.whole());
    return;
  }
  const int folded = plan.foldedInto(comm.rank());
  if (folded >= 0) h.receiveReduce(folded, foldSlot());
  halvingSteps(h, avgDivisor);
}

void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  Halving h(comm, op, args, nullptr);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) return;
  if (h.virtualRank() < 0) {
    h.receive(plan.foldPartner(comm.rank()), unfoldSlot(plan), h.whole());
    return;
  }
  doublingSteps(h);
  const int folded = plan.foldedInto(comm.rank());
  if (folded >= 0) h.send(folded, unfoldSlot(plan), h.whole());
}

void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor, const ChunkLayout& chunks) {
  checkLayout(comm, op, args, chunks);
  Halving h(comm, op, args, &chunks);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) return reduceAlone(comm, args, avgDivisor);
  const int rank = comm.rank();
  if (h.virtualRank() < 0) {
    // Everything to the partner, which reduces our chunk with the rest of
    // its blocks; our chunk, reduced, comes back.
    h.send(plan.foldPartner(rank), foldSlot(), h.whole());
    h.receive(plan.foldPartner(rank), unfoldSlot(plan), h.chunk(rank));
    return;
  }
  const int folded = plan.foldedInto(rank);
  if (folded >= 0) h.receiveReduce(folded, foldSlot());
  halvingSteps(h, avgDivisor);
  if (folded >= 0) h.send(folded, unfoldSlot(plan), h.chunk(folded));
}

void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       const ChunkLayout& chunks) {
  checkLayout(comm, op, args, chunks);
  Halving h(comm, op, args, &chunks);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) return;
  const int rank = comm.rank();
  if (h.virtualRank() < 0) {
    // Our chunk to the partner, which gathers for both; all of it comes back.
    h.send(plan.foldPartner(rank), foldSlot(), h.chunk(rank));
    h.receive(plan.foldPartner(rank), unfoldSlot(plan), h.whole());
    return;
  }
  const int folded = plan.foldedInto(rank);
  if (folded >= 0) h.receive(folded, foldSlot(), h.chunk(folded));
  doublingSteps(h);
  if (folded >= 0) h.send(folded, unfoldSlot(plan), h.whole());
}

void halvingDoublingAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  if (comm.size() == 1 || args.count == 0) return;  // AVG over one rank is the identity
  halvingReduceScatter(comm, op, args, args.op == ReduceOp::Avg ? comm.size() : 0);
  doublingAllgather(comm, op, args);
}

}  // namespace ringreduce
