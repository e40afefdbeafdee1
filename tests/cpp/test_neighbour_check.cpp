// The always-on collective check sees every mismatch (algorithms/checks/neighbour_check.h)
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "algorithms/checks/neighbour_check.h"
#include "core/base/errors.h"
#include "in_flight_transport.h"
#include "rank_threads.h"

using namespace ringreduce;
using ringreduce::testing::runRanks;
using ringreduce::testing::TransportKind;

namespace {
std::string describe(const CollectiveFingerprint& fp) {
  return "op" + std::to_string(fp.opType) + "/root" + std::to_string(fp.root);
}
}  // namespace

// Rank 2 thinks it is the root where the others think rank 0 is: its
// successor (rank 0) and rank 2 itself see the difference; a hash in the tag
// could collide, the whole fingerprint cannot.
TEST(NeighbourCheck, EveryMismatchIsSeenByTheRanksNextToIt) {
  std::atomic<int> raised{0};
  runRanks(
      3,
      [&](Transport& t, int rank) {
        CollectiveFingerprint fp;
        fp.opType = 1;
        fp.numel = 8;
        fp.root = rank == 2 ? 2 : 0;
        OpContext op("broadcast", 7, std::chrono::seconds(20));
        {
          NeighbourCheck agreeing(t, OpContext("allreduce", 6, std::chrono::seconds(20)),
                                  CollectiveFingerprint{}, describe);
          agreeing.verify();  // all equal: nothing to say
        }
        NeighbourCheck check(t, op, fp, describe);
        try {
          check.verify();
          EXPECT_EQ(rank, 1);
        } catch (const TransportError& e) {
          ++raised;
          EXPECT_NE(rank, 1);
          const std::string what = e.what();
          EXPECT_NE(what.find("different collectives as #7"), std::string::npos) << what;
          EXPECT_NE(what.find("root2"), std::string::npos) << what;
        }
      },
      ringreduce::testing::smallSegments(), TransportKind::Loopback);
  EXPECT_EQ(raised.load(), 2);
}

// A rank that never comes: the check is the first wait of a collective
// whose own messages a rank may not need from it (a chain broadcast's root
// receives nothing), so its timeout names the ranks not seen in the
// collective, as the collective's own waits do.
TEST(NeighbourCheck, ItsTimeoutNamesTheRankNotSeenInTheCollective) {
  ringreduce::testing::StayTogether together(3);
  runRanks(3, [&together](Transport& t, int rank) {
    auto stay = together.stay();
    if (rank == 2) return;  // alive, but never joins the collective
    const OpContext op("broadcast", 4, std::chrono::milliseconds(800));
    CollectiveFingerprint fp;
    fp.opType = 1;
    NeighbourCheck check(t, op, fp, describe);
    if (rank == 1) {  // its left neighbour came: done at once, never seen waiting
      check.verify();
      return;
    }
    try {
      check.verify();
      ADD_FAILURE() << "expected a timeout";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("broadcast #4 timed out after 800 ms"), std::string::npos) << message;
      EXPECT_NE(message.find("waiting to receive the collective's check record from rank 2"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("not seen in broadcast #4: "), std::string::npos) << message;
      EXPECT_NE(message.find("2 (not seen waiting in any collective)"), std::string::npos)
          << message;
    }
  });
}

namespace {

// Receives that never complete and sends that cannot be posted (as UCX's,
// connecting to a peer whose process is gone): counts what is posted and
// what is taken back.
class UnsendableTransport : public Transport {
 public:
  UnsendableTransport() : Transport(1, 3, Config{}) {}
  int receivesPosted = 0;
  int receivesCancelled = 0;

  unsigned progress() override { return 0; }
  std::string describeEndpoint(int) override { return "none"; }

 protected:
  void* postSend(int, uint64_t, const void*, size_t, std::string* error) override {
    *error = "could not connect";
    return nullptr;
  }
  void* postRecv(uint64_t, uint64_t, void*, size_t, std::string*) override {
    ++receivesPosted;
    return &receivesPosted;
  }
  Completion poll(void*, bool) override { return Completion{}; }
  void cancel(void*) override { ++receivesCancelled; }
};

}  // namespace

// The check posts its receive, into itself, before its send: a send that
// cannot be posted must take the receive back before the error leaves the
// constructor, since no destructor will, and the left neighbour's message
// would otherwise land in a frame that is gone.
TEST(NeighbourCheck, ASendThatCannotBePostedTakesBackTheReceive) {
  UnsendableTransport transport;
  EXPECT_THROW(NeighbourCheck(transport, OpContext("allreduce", 3, std::chrono::seconds(5)),
                              CollectiveFingerprint{}, describe),
               TransportError);
  EXPECT_EQ(transport.receivesPosted, 1);
  EXPECT_EQ(transport.receivesCancelled, 1);
}

namespace {

// A collective that failed: its check is destroyed with both messages in flight.
__attribute__((noinline)) void postAndAbandon(Transport& transport,
                                              const CollectiveFingerprint& mine) {
  NeighbourCheck check(transport, OpContext("allreduce", 4, std::chrono::seconds(5)), mine,
                       describe);
}

}  // namespace

// UCX may pack an abandoned send long after the check is gone: the bytes it
// reads must still be this rank's fingerprint, not whatever frame lives
// where the check was (a peer still in its own check would then report
// "ranks called different collectives" instead of the real failure).
TEST(NeighbourCheck, AnAbandonedSendStillReadsTheFingerprintItWasGiven) {
  ringreduce::testing::InFlightTransport transport(1, 3);
  CollectiveFingerprint mine;
  mine.opType = 5;
  mine.dtype = 6;
  mine.numel = 123457;
  mine.root = 2;
  mine.reduceOp = 1;
  postAndAbandon(transport, mine);
  ringreduce::testing::overwriteTheStack();
  ASSERT_EQ(transport.sends.size(), 1u);
  EXPECT_TRUE(transport.sends[0].unchanged());
}

// A check that completed hands its buffers to the next one: no allocation
// per collective.
TEST(NeighbourCheck, ACompletedCheckLeavesItsBuffersToTheNext) {
  runRanks(
      2,
      [&](Transport& t, int) {
        NeighbourCheck::Spare spare;
        {
          NeighbourCheck first(t, OpContext("allreduce", 1, std::chrono::seconds(20)),
                               CollectiveFingerprint{}, describe, &spare);
          first.verify();
        }
        ASSERT_NE(spare, nullptr);
        const NeighbourCheck::Exchange* kept = spare.get();
        {
          NeighbourCheck second(t, OpContext("allreduce", 2, std::chrono::seconds(20)),
                                CollectiveFingerprint{}, describe, &spare);
          EXPECT_EQ(spare, nullptr);  // in use
          second.verify();
        }
        EXPECT_EQ(spare.get(), kept);
      },
      ringreduce::testing::smallSegments(), TransportKind::Loopback);
}
