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
                               const CollectiveFingerprint& mine, Describe describe, Spare* spare)
    : transport_(transport),
      op_(op),
      message_(op),
      spare_(spare),
      exchange_(spare != nullptr && *spare ? std::move(*spare) : std::make_shared<Exchange>()),
      describe_(std::move(describe)) {
  exchange_->mine = mine;
  exchange_->theirs = CollectiveFingerprint{};
  const int n = transport.size();
  if (n < 2) return;
  message_.pointToPoint = true;
  message_.partOfCollective = true;
  const int rank = transport.rank();
  const int left = (rank - 1 + n) % n;
  const int right = (rank + 1) % n;
  Exchange& exchange = *exchange_;
  recv_ = transport.irecv(left, checkTag(left, op.seq), &exchange.theirs, sizeof(exchange.theirs),
                          message_);
  try {
    send_ = transport.isend(right, checkTag(rank, op.seq), &exchange.mine, sizeof(exchange.mine),
                            message_);
  } catch (...) {
    // No destructor runs for a constructor that throws: the receive must be
    // taken back here. (UCX could not connect to a right neighbour already
    // dead; when the exchange lived in this object, on the caller's stack,
    // a survivor then died of "stack smashing detected", seed_sweep.py
    // --kill, a rank killed before its first collective over tcp.)
    transport.abandon(recv_);
    transport.keepUntilClosed(std::move(exchange_));
    throw;
  }
  active_ = true;
  transport.setWatch([this] { watch(); });
}

NeighbourCheck::~NeighbourCheck() {
  transport_.setWatch(nullptr);
  if (active_ && (recv_.handle != nullptr || send_.handle != nullptr)) {
    transport_.abandon(recv_);
    transport_.abandon(send_);
    transport_.keepUntilClosed(std::move(exchange_));
    return;
  }
  if (spare_ != nullptr && exchange_) *spare_ = std::move(exchange_);
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
  const Exchange& exchange = *exchange_;
  if (exchange.theirs == exchange.mine) return;
  const int n = transport_.size();
  const int left = (transport_.rank() - 1 + n) % n;
  throw TransportError("ringreduce: " + op_.describe() + " on rank " +
                       std::to_string(transport_.rank()) + ": ranks called different collectives "
                       "as #" + std::to_string(op_.seq) + ": rank " + std::to_string(left) +
                       " calls " + describe_(exchange.theirs) + ", rank " +
                       std::to_string(transport_.rank()) + " calls " + describe_(exchange.mine));
}

}  // namespace ringreduce
