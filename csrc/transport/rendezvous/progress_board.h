// Where each rank is, published through the group's store only when a
// collective has been waiting for a while (never on the fast path), so that a
// timeout can name the ranks that never joined the collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class ProgressBoard {
 public:
  ProgressBoard(std::shared_ptr<KeyValueStore> store, std::string prefix, int rank, int size);

  // This rank is (still) in collective `seq`. Publishes once per seq; store
  // errors are ignored (the board only improves error messages).
  void announce(uint64_t seq);

  struct Laggard {
    int rank;
    int64_t lastSeq;  // -1: never announced
  };
  // Ranks whose last announced collective is older than `seq`.
  std::vector<Laggard> ranksBehind(uint64_t seq);
  // "2 (last seen in #5), 3 (not seen waiting in any collective)"
  static std::string describe(const std::vector<Laggard>& laggards);

 private:
  std::string keyOf(int rank) const { return prefix_ + std::to_string(rank); }

  std::shared_ptr<KeyValueStore> store_;
  const std::string prefix_;
  const int rank_;
  const int size_;
  int64_t announced_ = -1;
};

}  // namespace ringreduce
