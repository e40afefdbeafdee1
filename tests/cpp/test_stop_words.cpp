// The last words of a collective whose ranks touch each other's memory
// (algorithms/cross_memory/stop_words.h): what ends a failed rank's wait for its peers.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "algorithms/cross_memory/stop_words.h"
#include "in_flight_transport.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;
using ringreduce::testing::TransportKind;

// A peer that destroyed its transport (it said goodbye, as a rank does that
// destroys its group or exits) copies nothing any more, word or no word: a
// rank that failed stops waiting for it at once instead of at its deadline.
// (Before, a survivor of a killed rank waited out the whole group timeout
// for a peer that had already finished and left.)
TEST(StopWords, APeerThatLeftWithoutAWordEndsTheWait) {
  const auto limit = std::chrono::seconds(60);
  std::chrono::milliseconds waited{};
  runRanks(2, [&](Transport& t, int rank) {
    const OpContext op("allreduce", 1, limit);
    StopWords words(t, op, /*slot=*/1);
    if (rank == 1) return;  // leaves without a word: its transport closes, saying goodbye
    const auto start = Clock::now();
    words.stopAfterFailure({true, true}, start + limit, "rank 0 failed on purpose");
    waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  }, Config{}, TransportKind::Ucx);
  // Far below the deadline: it did not wait the peer out.
  EXPECT_LT(waited.count(), std::chrono::milliseconds(limit / 2).count());
}

namespace {

// A rank fails in a cross-memory collective: it says "failed" and gives up
// waiting at once (its deadline has passed), its words still in flight.
__attribute__((noinline)) void failWithTheWordsInFlight(Transport& transport) {
  StopWords words(transport, OpContext("allreduce", 9, std::chrono::seconds(5)), /*slot=*/1);
  words.stopAfterFailure({true, true, true}, Clock::now(), "rank 1 ran out of memory");
}

}  // namespace

// UCX may pack an abandoned "failed" after the collective is gone: a peer
// must still read "failed" and its reason, not a stale frame (which it
// could take for "finished", and trust a result this rank never completed).
TEST(StopWords, AWordAbandonedInFlightStillSaysWhatThisRankSaid) {
  ringreduce::testing::InFlightTransport transport(1, 3);
  failWithTheWordsInFlight(transport);
  ringreduce::testing::overwriteTheStack();
  ASSERT_EQ(transport.sends.size(), 2u);  // to ranks 0 and 2
  for (const auto& sent : transport.sends) EXPECT_TRUE(sent.unchanged());
}
