#include "algorithms/halving_doubling.h"

#include <cstring>

#include "core/host_reduce.h"
#include "core/phase_recorder.h"
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

// One rank's view of a run: its buffer, its place in the plan, and the
// exchanges the steps are made of.
class Halving {
 public:
  Halving(const Comm& comm, const OpContext& op, const ReductionArgs& args,
          HalvingPlan::Order order)
      : comm_(comm),
        op_(op),
        args_(args),
        plan_(comm.size(), order),
        rank_(comm.rank()),
        v_(plan_.virtualOf(rank_)),
        esize_(elementSize(args.type)),
        payload_(!comm.config.payloadFree) {}

  const HalvingPlan& plan() const { return plan_; }
  int virtualRank() const { return v_; }

  // Elements of blocks [first, first + blocks).
  Range blocks(int first, int blocks) const {
    const Range a = halvingBlock(args_.count, plan_, first);
    const Range b = halvingBlock(args_.count, plan_, first + blocks - 1);
    return {a.offset, b.offset + b.count - a.offset};
  }
  Range whole() const { return {0, args_.count}; }

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
  const HalvingPlan plan_;
  const int rank_;
  const int v_;
  const size_t esize_;
  const bool payload_;
};

}  // namespace

void halvingReduceScatter(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          int avgDivisor, HalvingPlan::Order order) {
  Halving h(comm, op, args, order);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) {
    if (avgDivisor > 1 && !comm.config.payloadFree) {
      finishAverage(args.type, args.data, args.count, avgDivisor);
    }
    return;
  }
  const int v = h.virtualRank();
  if (v < 0) {
    h.send(plan.foldPartner(comm.rank()), foldSlot(), h.whole());
    return;
  }
  const int folded = plan.foldedInto(comm.rank());
  if (folded >= 0) h.receiveReduce(folded, foldSlot());
  // Step i keeps the half of the current blocks that v's bit bitOf(i)
  // selects and sends the other half to the partner, which keeps that one.
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

void doublingAllgather(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       HalvingPlan::Order order) {
  Halving h(comm, op, args, order);
  const HalvingPlan& plan = h.plan();
  if (plan.size() == 1) return;
  const int v = h.virtualRank();
  if (v < 0) {
    h.receive(plan.foldPartner(comm.rank()), unfoldSlot(plan), h.whole());
    return;
  }
  // Backwards through the steps: the partner at step i holds the sibling of
  // our blocks, so the pair doubles what it holds.
  int first = plan.blockOf(v);
  int count = 1;
  for (int i = plan.steps() - 1; i >= 0; --i) {
    const int sibling = first ^ count;
    h.exchange(plan.rankOf(v ^ (1 << plan.bitOf(i))), gatherSlot(plan, i), h.blocks(first, count),
               h.blocks(sibling, count));
    first = first < sibling ? first : sibling;
    count *= 2;
  }
  const int folded = plan.foldedInto(comm.rank());
  if (folded >= 0) h.send(folded, unfoldSlot(plan), h.whole());
}

void halvingDoublingAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args) {
  if (comm.size() == 1 || args.count == 0) return;  // AVG over one rank is the identity
  halvingReduceScatter(comm, op, args, args.op == ReduceOp::Avg ? comm.size() : 0);
  doublingAllgather(comm, op, args);
}

}  // namespace ringreduce
