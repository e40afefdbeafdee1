// The always-on collective check: every rank sends the full fingerprint of
// the collective it runs (op, dtype, element count, root, reduce op) to the
// next rank and compares the one it gets from the previous rank. If every
// rank agrees with its predecessor, all agree, so every mismatch is seen by
// at least one rank, which fails with both descriptions and tells the others
// (the group's failure announcement); they fail at once on their pending or
// next collective. Unlike the 8-bit hash in the tags this has no blind spot:
// two ranks that both think they are a broadcast's root, or two collectives
// whose hashes collide, are caught too.
//
// Cost: one small eager message each way per collective, posted before the
// collective runs and checked after it, so its latency hides under the
// collective's own; while the collective waits, the transport's watch also
// looks at it, so a mismatch that would make the collective hang (ranks in
// different algorithms never send each other anything) is an error at once.
// The full allgather check (collective_check.h) replaces it when on.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "algorithms/checks/collective_check.h"
#include "transport/transport.h"

namespace ringreduce {

class NeighbourCheck {
 public:
  using Describe = std::function<std::string(const CollectiveFingerprint&)>;
  // What travels, on the heap rather than in the check (which lives on its
  // caller's stack): a send abandoned in flight cannot be taken back from
  // UCX, which may pack its buffer later, so an abandoned exchange goes to
  // the transport to keep (Transport::keepUntilClosed). Otherwise it goes
  // back to the caller's `spare` for the next collective: no allocation per
  // collective.
  struct Exchange {
    CollectiveFingerprint mine;
    CollectiveFingerprint theirs;
  };
  using Spare = std::shared_ptr<Exchange>;

  // Posts the exchange for collective `op` (a group of one has nothing to
  // do), in `*spare` if it holds one.
  NeighbourCheck(Transport& transport, const OpContext& op, const CollectiveFingerprint& mine,
                 Describe describe, Spare* spare = nullptr);
  // Cancels what is still in flight (when the collective itself failed).
  ~NeighbourCheck();
  NeighbourCheck(const NeighbourCheck&) = delete;
  NeighbourCheck& operator=(const NeighbourCheck&) = delete;

  // After the collective: waits (until op's deadline) for the previous
  // rank's fingerprint; throws TransportError naming both when they differ.
  void verify();

 private:
  void compare() const;  // throws when the fingerprints differ
  void watch();          // the transport's watch: compares once the fingerprint is in

  Transport& transport_;
  OpContext op_;       // the collective
  OpContext message_;  // the exchange travels as a point-to-point message
  Spare* spare_;
  Spare exchange_;
  Describe describe_;
  Request send_, recv_;
  bool active_ = false;
  bool arrived_ = false;
};

}  // namespace ringreduce
