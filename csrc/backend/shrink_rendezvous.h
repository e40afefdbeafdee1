// Where the ranks that stay in a shrunk group meet, on the parent's store,
// before they make the new group (backend/shrink.cpp).
//
// A shrink may fail part-way (a rank that stays came late, or not at all)
// and be retried. Keys that say "rank r arrived" outlive the attempt they
// were written in, so a retry that read them would meet ranks that have
// since left, or half of a group that the others never make. Each attempt
// therefore meets under keys of its own, and the ranks agree on which
// attempt they are in through the store alone (a late rank has made fewer
// attempts than the others, so no local count can say):
//   - "attempt" holds the number of the attempt under way;
//   - each rank that arrives adds 1 to "<n>/count"; the rank that makes it
//     the number of ranks that stay sets "<n>/outcome" to "met";
//   - a rank whose wait ran out adds kClosed to the same counter: if every
//     rank had arrived before that (count below kClosed but complete), the
//     attempt met after all; otherwise it is closed, and the first rank to
//     close it sets "<n>/outcome" to "closed" and moves "attempt" on;
//   - a rank that arrives in a closed attempt goes on to the next one.
// One atomic counter decides, so no rank can make the group of an attempt
// that another gave up on. The attempt that met names the new group's keys.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringreduce {

// "1, 3": ranks, for messages.
std::string joinRanks(const std::vector<int>& ranks);

// Rank `rank` (in the parent group) meets the other ranks of `staying` on
// `store` (a prefix of the parent's, the same on all of them), each waiting
// at most `timeout`. Returns the number of the attempt that met. Throws
// DistBackendError naming the ranks that did not come, or saying the
// store failed; `what` starts each message.
int64_t meetRanksThatStay(c10d::Store& store, int rank, const std::vector<int>& staying,
                          std::chrono::milliseconds timeout, const std::string& what);

}  // namespace ringreduce
