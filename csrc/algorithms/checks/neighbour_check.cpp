// The always-on collective check: the fingerprint to the next rank (neighbour_check.h)
#include "algorithms/checks/neighbour_check.h"

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// Point-to-point tag space, above every user tag torch can pass (an int):
// bit 42 set, then the collective's sequence number.
uint64_t checkTag(int sourceRank, uint64_t seq) {
  return makeP2PTag(sourceRank, static_cast<int64_t>((1ull << 42) | (seq & 0xffffffffull)));
}

}  // namespace

NeighbourCheck::NeighbourCheck(Transport& transport, const OpContext& op,
                               const CollectiveFingerprint& mine, Describe describe)
    : transport_(transport), op_(op), message_(op), mine_(mine), describe_(std::move(describe)) {
  const int n = transport.size();
  if (n < 2) return;
  message_.pointToPoint = true;
  message_.partOfCollective = true;
  const int rank = transport.rank();
  const int left = (rank - 1 + n) % n;
  const int right = (rank + 1) % n;
  recv_ = transport.irecv(left, checkTag(left, op.seq), &theirs_, sizeof(theirs_), message_);
  try {
    send_ = transport.isend(right, checkTag(rank, op.seq), &mine_, sizeof(mine_), message_);
  } catch (...) {
    // No destructor runs for a constructor that throws, and the receive is
    // into this object, on its caller's stack: left posted, the left
    // neighbour's fingerprint would land in whatever frame lives there
    // then. (UCX could not connect to a right neighbour already dead; a
    // survivor then died of "stack smashing detected", seed_sweep.py --kill,
    // a rank killed before its first collective over tcp.)
    transport.abandon(recv_);
    throw;
  }
  active_ = true;
  transport.setWatch([this] { watch(); });
}

NeighbourCheck::~NeighbourCheck() {
  transport_.setWatch(nullptr);
  if (!active_) return;
  transport_.abandon(recv_);
  transport_.abandon(send_);
}

void NeighbourCheck::watch() {
  if (arrived_ || !transport_.test(recv_, message_)) return;
  arrived_ = true;
  compare();
}

void NeighbourCheck::verify() {
  if (!active_) return;
  transport_.setWatch(nullptr);
  transport_.wait(recv_, message_);
  transport_.wait(send_, message_);
  active_ = false;
  compare();
}

void NeighbourCheck::compare() const {
  if (theirs_ == mine_) return;
  const int n = transport_.size();
  const int left = (transport_.rank() - 1 + n) % n;
  throw TransportError("ringreduce: " + op_.describe() + " on rank " +
                       std::to_string(transport_.rank()) + ": ranks called different collectives "
                       "as #" + std::to_string(op_.seq) + ": rank " + std::to_string(left) +
                       " calls " + describe_(theirs_) + ", rank " +
                       std::to_string(transport_.rank()) + " calls " + describe_(mine_));
}

}  // namespace ringreduce
