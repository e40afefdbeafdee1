// Engine::runOnCaller (a collective run on the caller's thread, past the
// queue: the device-flags path's launches) and Engine::closingExchange (the
// device paths' cross-rank close at shutdown), on the loopback transport.
// What must hold: an on-caller collective runs only when nothing is queued,
// held or running and the group is usable; it takes the next
// sequence number, as a queued one would, so ranks that ran it different
// ways still agree; in a coalescing block only what comes before anything
// asynchronous runs so; a launch error other than bad arguments leaves the
// group unusable; the closing exchange reaches every rank after the
// executors stopped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/record_allgather.h"
#include "core/base/errors.h"
#include "engine/engine.h"
#include "engine/executor.h"
#include "engine_ranks.h"
#include "transport/loopback/loopback_transport.h"
#include "transport/tag.h"

using namespace ringreduce;
using ringreduce::testing::becomesIdle;
using ringreduce::testing::eachRank;
using ringreduce::testing::loopbackEngine;

namespace {

class RecordingCallbacks : public OperationCallbacks {
 public:
  void succeeded(int) override {
    finished_ = true;
    done_.set_value("");
  }
  void failed(std::exception_ptr error) override {
    finished_ = true;
    error_ = error;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      done_.set_value(e.what());
    }
  }
  std::exception_ptr error() const override { return error_; }
  void heldInBlock(bool held) override { held_ = held; }
  bool held() const { return held_; }
  bool finished() const { return finished_; }
  // "" on success, else the error's text.
  std::string outcome() { return done_.get_future().get(); }

 private:
  std::promise<std::string> done_;
  std::exception_ptr error_;
  std::atomic<bool> held_{false};
  std::atomic<bool> finished_{false};
};

std::unique_ptr<Engine> engineFor(const std::shared_ptr<LoopbackFabric>& fabric, int rank,
                                  bool checkCollectives = false) {
  return loopbackEngine(fabric, rank, Config{}, checkCollectives);
}

// Queues a collective whose body runs `body`; returns its callbacks.
// `neighbourCheck` false: as the backend queues a collective that a peer
// may run directly (one checked on the device).
// `runner` Runner::Caller: one whose caller waits for it at once.
// `seqCount`: the numbers it reserves (a CUDA collective reserves two: its
// device path's and its host fallback's).
std::shared_ptr<RecordingCallbacks> queue(Engine& engine, Operation::Body body,
                                          bool neighbourCheck = true,
                                          Runner runner = Runner::Worker,
                                          uint64_t seqCount = 1) {
  auto callbacks = std::make_shared<RecordingCallbacks>();
  engine.submitCollective("queued", std::chrono::seconds(20), runner,
                          CollectiveFingerprint{}, seqCount, "", std::move(body),
                          [&](uint64_t) { return callbacks; }, neighbourCheck);
  return callbacks;
}

// Rank 0 runs collective 2 on its thread, rank 1 queues it (without the
// neighbour check, which rank 0 sends none for), each reserving `seqCount`
// numbers: both number it 2, and the queued collective after it meets its
// peer's at 2 + seqCount.
void onCallerBesideQueued(uint64_t seqCount) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  eachRank(2, [&](int rank) {
    auto engine = engineFor(fabric, rank);
    auto exchangeBody = [&](uint64_t expectedSeq) {
      return [&engine, rank, expectedSeq](const OpContext& op) {
        EXPECT_EQ(op.seq, expectedSeq);
        int mine = rank, all[2] = {-1, -1};
        exchangeRecords(engine->comm(), op, 0, &mine, all, sizeof(int));
        EXPECT_EQ(all[0] + all[1], 1);
      };
    };
    EXPECT_EQ(queue(*engine, exchangeBody(1))->outcome(), "");
    if (rank == 0) {
      ASSERT_TRUE(becomesIdle(*engine));
      uint64_t seen = 0;
      const uint64_t seq = engine->runOnCaller(
          "direct", std::chrono::seconds(20), {}, OpFields{},
          [&](const OpContext& op) { seen = op.seq; }, false, nullptr, seqCount);
      EXPECT_EQ(seq, 2u);
      EXPECT_EQ(seen, 2u);
    } else {
      EXPECT_EQ(queue(
                    *engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 2u); }, false,
                    Runner::Worker, seqCount)
                    ->outcome(),
                "");
    }
    EXPECT_EQ(engine->sequenceNumber(), 1 + seqCount);
    EXPECT_EQ(queue(*engine, exchangeBody(2 + seqCount))->outcome(), "");
  });
}

TEST(EngineOnCaller, AnOnCallerCollectiveIsNumberedAsAQueuedOne) { onCallerBesideQueued(1); }

// A collective that reserves two numbers (a CUDA one: its device path's and
// its host fallback's), as the device-flags path runs it on one rank's
// thread while a peer whose worker had not quite finished the previous one
// queues it. (Run on the caller it took one number, so the ranks' next host
// exchanges waited for tags their peers never sent: the H200's hang.)
TEST(EngineOnCaller, AnOnCallerCollectiveReservesTheNumbersItsQueuedFormWould) {
  onCallerBesideQueued(2);
}

// Nothing runs past a collective that is queued or running.
TEST(EngineOnCaller, NothingRunsPastQueuedWork) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> running{false};
  auto blocked = queue(*engine, [&](const OpContext&) {
    running = true;
    // Bounded: a test that fails before releasing it must still end.
    if (released.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      ADD_FAILURE() << "the queued collective was never released";
    }
  });
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (!running && Clock::now() < limit) std::this_thread::yield();
  if (!running) release.set_value();  // let the engine's teardown end at once
  ASSERT_TRUE(running) << "the queued collective did not start within 10 s";
  EXPECT_FALSE(engine->canRunOnCaller());
  bool ran = false;
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                [&](const OpContext&) { ran = true; }),
            0u);
  EXPECT_FALSE(ran);
  release.set_value();
  EXPECT_EQ(blocked->outcome(), "");
  engine->waitForQueued();
  EXPECT_TRUE(becomesIdle(*engine));
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                [&](const OpContext&) { ran = true; }),
            2u);
  EXPECT_TRUE(ran);
}

// An on-caller collective's duration starts at runOnCaller's one clock read
// (backend/work_timing.h reads OpContext::started(), no clock of its own):
// its deadline must be counted from the moment the op began.
TEST(EngineOnCaller, TheLaunchKnowsWhenTheOpStartedWithoutAClockRead) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  Clock::time_point started{};
  Clock::time_point launched{};
  const Clock::time_point before = Clock::now();
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(7), {}, OpFields{},
                                [&](const OpContext& op) {
                                started = op.started();
                                launched = Clock::now();
                                EXPECT_EQ(op.deadline - op.timeout, started);
                              }),
            1u);
  EXPECT_LE(before, started);
  EXPECT_LE(started, launched);
}

TEST(EngineOnCaller, NotUnderTheFullCollectiveCheck) {
  auto checked = engineFor(std::make_shared<LoopbackFabric>(1), 0, true);
  EXPECT_FALSE(checked->canRunOnCaller());
  EXPECT_EQ(checked->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                 [](const OpContext&) {}),
            0u);
}

// In a coalescing block a collective its caller waits for runs as outside
// the block (on the caller's thread, or queued and not held) until the
// block issues an asynchronous one; nothing runs past what is held; a
// waited-for one after that is refused (its wait could end only with the
// block) and ends the block, what it held running; the block's own end
// then finds nothing left, and a second end raises.
TEST(EngineOnCaller, InACoalescingBlockWaitedForCallsRunAsOutsideItUntilAnAsynchronousOne) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  engine->startCoalescing();
  EXPECT_TRUE(engine->coalescing());
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                [](const OpContext&) {}),
            1u);
  auto waited = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 2u); }, true,
                      Runner::Caller);
  EXPECT_EQ(waited->outcome(), "");  // not held: it ran before the block's end
  auto held = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 3u); });
  EXPECT_TRUE(held->held());  // its Work's wait() refuses meanwhile (work_ring.h)
  EXPECT_FALSE(waited->held());
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                [](const OpContext&) { ADD_FAILURE() << "ran past the held"; }),
            0u);
  EXPECT_THROW(queue(*engine, [](const OpContext&) { ADD_FAILURE() << "refused, yet ran"; },
                     true, Runner::Caller),
               InvalidArgument);
  EXPECT_FALSE(engine->coalescing());
  EXPECT_FALSE(held->held());
  EXPECT_EQ(held->outcome(), "");
  EXPECT_EQ(engine->sequenceNumber(), 3u);  // the refused one took no number
  auto whole = std::make_shared<RecordingCallbacks>();
  EXPECT_FALSE(engine->endCoalescing([&](const auto& parts) {
    EXPECT_TRUE(parts.empty());
    return whole;
  }));
  EXPECT_EQ(whole->outcome(), "");
  EXPECT_THROW(engine->endCoalescing([](const auto&) {
                 return std::make_shared<RecordingCallbacks>();
               }),
               Error);
}

// torch waits on the block's Work, not on the coalesced call's own (the
// device coalescing manager): a block whose waited-for call was queued
// without being held completes behind it and fails with it; one whose call
// ran on the caller's thread is complete at its end, with no Work to make.
TEST(EngineOnCaller, ABlocksWorkCompletesBehindAndFailsWithWhatItQueuedUnheld) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  engine->startCoalescing();
  auto failing = queue(*engine, [](const OpContext&) { throw InvalidArgument("bad tensor"); },
                       true, Runner::Caller);
  auto whole = std::make_shared<RecordingCallbacks>();
  EXPECT_FALSE(engine->endCoalescing([&](const auto&) { return whole; }));
  EXPECT_NE(whole->outcome().find("bad tensor"), std::string::npos);
  EXPECT_NE(failing->outcome().find("bad tensor"), std::string::npos);

  ASSERT_TRUE(becomesIdle(*engine));
  engine->startCoalescing();
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                [](const OpContext&) {}),
            2u);
  // Complete at its end: no Work to complete across threads.
  EXPECT_TRUE(engine->endCoalescing([](const auto&) -> std::shared_ptr<OperationCallbacks> {
    ADD_FAILURE() << "a block that ran on the caller's thread made a whole to complete";
    return std::make_shared<RecordingCallbacks>();
  }));
}
// torch's coalescing manager ends a device block only after the block's one
// coalesced call returns: where that call raised, the backend ends the block
// itself (endOpenBlock). What it held runs; later operations are not
// held and a later block opens; without an open block it does nothing.
TEST(EngineOnCaller, ABlockEndedAfterARaiseRunsWhatItHeldAndLetsTheNextOneOpen) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  engine->endOpenBlock("a test");  // no block: nothing
  EXPECT_FALSE(engine->coalescing());
  engine->startCoalescing();
  auto held = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 1u); });
  EXPECT_TRUE(held->held());
  engine->endOpenBlock("a test");
  EXPECT_FALSE(engine->coalescing());
  EXPECT_FALSE(held->held());
  auto after = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 2u); });
  EXPECT_FALSE(after->held());
  ASSERT_TRUE(becomesIdle(*engine));
  EXPECT_EQ(held->outcome(), "");
  EXPECT_EQ(after->outcome(), "");
  engine->startCoalescing();  // not refused as nested
  EXPECT_TRUE(engine->coalescing());
  EXPECT_TRUE(engine->endCoalescing([](const auto&) -> std::shared_ptr<OperationCallbacks> {
    ADD_FAILURE() << "an empty block made a whole to complete";
    return std::make_shared<RecordingCallbacks>();
  }));
}

// A block still open at the next startCoalescing is one torch's manager
// left (it raised before its end): it ends there, what it held running
// before anything of the new block, and the new block holds as any does.
TEST(EngineOnCaller, AStartOnABlockLeftOpenEndsItAndOpensTheNext) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  engine->startCoalescing();
  auto left = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 1u); });
  EXPECT_TRUE(left->held());
  engine->startCoalescing();
  EXPECT_TRUE(engine->coalescing());
  EXPECT_FALSE(left->held());
  auto next = queue(*engine, [](const OpContext& op) { EXPECT_EQ(op.seq, 2u); });
  EXPECT_TRUE(next->held());
  EXPECT_FALSE(engine->endCoalescing([](const auto& parts) -> std::shared_ptr<OperationCallbacks> {
    EXPECT_EQ(parts.size(), 1u);  // the new block's own, not the one left open
    return std::make_shared<RecordingCallbacks>();
  }));
  ASSERT_TRUE(becomesIdle(*engine));
  EXPECT_EQ(left->outcome(), "");
  EXPECT_EQ(next->outcome(), "");
}

// A group shut down with a block open runs nothing more: the block's end
// from a later call (a coalesced call refused as shut down) or a later
// block leaves what it held held, and does not touch the stopped queue.
TEST(EngineOnCaller, ABlockOpenAtShutdownIsLeftAsItIs) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  engine->startCoalescing();
  auto held = queue(*engine, [](const OpContext&) { ADD_FAILURE() << "ran after shutdown"; });
  EXPECT_TRUE(engine->shutdown());
  engine->endOpenBlock("a test");
  engine->startCoalescing();
  EXPECT_TRUE(held->held());
}

// Bad arguments leave the group usable; anything else (a failed launch)
// leaves it out of step with its peers, so it refuses what follows.
TEST(EngineOnCaller, ALaunchErrorMakesTheGroupUnusableButBadArgumentsDoNot) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0);
  EXPECT_THROW(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                   [](const OpContext&) { throw InvalidArgument("bad dtype"); }),
               InvalidArgument);
  EXPECT_TRUE(engine->canRunOnCaller());
  EXPECT_FALSE(engine->givenUp());
  EXPECT_THROW(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{},
                                   [](const OpContext&) { throw Error("kernel launch failed"); }),
               Error);
  EXPECT_TRUE(engine->givenUp());
  EXPECT_FALSE(engine->canRunOnCaller());
  EXPECT_EQ(engine->runOnCaller("direct", std::chrono::seconds(1), {}, OpFields{}, [](const OpContext&) {}),
            0u);
  const std::string refused = queue(*engine, [](const OpContext&) {})->outcome();
  EXPECT_NE(refused.find("kernel launch failed"), std::string::npos) << refused;
}

// The device paths' close: every rank, after its executor stopped, meets
// the others through the transport before the transport goes.
TEST(EngineOnCaller, TheClosingExchangeMeetsEveryRankAfterTheExecutorsStopped) {
  auto fabric = std::make_shared<LoopbackFabric>(3);
  eachRank(3, [&](int rank) {
    auto engine = engineFor(fabric, rank);
    EXPECT_EQ(queue(*engine, [](const OpContext&) {})->outcome(), "");
    int all[3] = {-1, -1, -1};
    engine->shutdown([&] {
      RecordExchange exchange = engine->closingExchange(std::chrono::seconds(20));
      const int mine = 10 + rank;
      exchange(&mine, all, sizeof(int));
    });
    EXPECT_EQ(all[0], 10);
    EXPECT_EQ(all[1], 11);
    EXPECT_EQ(all[2], 12);
  });
}

// An engine over the loopback transport, idle, and that transport, for
// tests that post messages themselves; null if it never became idle.
// `minuteGrace`: a worker that would not start a queued post on its own.
std::unique_ptr<Engine> idleEngineWithTransport(const std::shared_ptr<LoopbackFabric>& fabric,
                                                int rank, bool minuteGrace,
                                                Transport*& transport) {
  Config config;
  if (minuteGrace) config.callerGraceMicroseconds = 60 * 1000 * 1000;
  auto owned = std::make_unique<LoopbackTransport>(fabric, rank, config);
  transport = owned.get();
  auto engine = std::make_unique<Engine>(
      std::move(owned), config, "test", false,
      [](const CollectiveFingerprint&) { return std::string("op"); });
  return becomesIdle(*engine) ? std::move(engine) : nullptr;
}

// `body` on each of two ranks, with its idle engine and transport.
void eachIdleRank(bool minuteGrace, const std::function<void(int, Engine&, Transport&)>& body) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  eachRank(2, [&](int rank) {
    Transport* transport = nullptr;
    std::unique_ptr<Engine> engine = idleEngineWithTransport(fabric, rank, minuteGrace, transport);
    ASSERT_NE(engine, nullptr);
    body(rank, *engine, *transport);
  });
}

bool helpUntilFinished(Engine& engine, RecordingCallbacks& callbacks) {
  std::shared_ptr<Executor> executor = engine.executor().lock();
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!executor->helpUntil([&] { return callbacks.finished(); }) && Clock::now() < until) {
  }
  return callbacks.finished();
}

}  // namespace

// A host send or receive that nothing queued precedes starts on the thread
// that issues it (a post never waits): no queue, no worker alarm. With a
// grace of a minute the worker would not have started it. The receive,
// still in flight if its message had not come, completes through the
// caller's next drive, as a wait's.
TEST(EngineOnCaller, ASendOrReceiveWithNothingQueuedStartsOnTheIssuingThread) {
  eachIdleRank(true, [&](int rank, Engine& engine, Transport& transport) {
    const int peer = 1 - rank;
    std::vector<float> sent(4, 1.5f), received(4, 0.0f);
    std::thread::id postedOn;
    auto callbacks = std::make_shared<RecordingCallbacks>();
    engine.submitPointToPoint(
        rank == 0 ? "send" : "recv", std::chrono::seconds(20), Runner::CallerOrWorker, OpFields{},
        [&](const OpContext& op) {
          postedOn = std::this_thread::get_id();
          PostedMessage message;
          message.request =
              rank == 0 ? transport.isend(peer, makeP2PTag(rank, 7), sent.data(), 16, op)
                        : transport.irecv(peer, makeP2PTag(peer, 7), received.data(), 16, op);
          return message;
        },
        [&](uint64_t) { return callbacks; });
    EXPECT_EQ(postedOn, std::this_thread::get_id()) << "rank " << rank;
    ASSERT_TRUE(helpUntilFinished(engine, *callbacks)) << "rank " << rank;
    EXPECT_EQ(callbacks->outcome(), "");
    if (rank == 1) {
      EXPECT_EQ(received, sent);
    }
  });
}

namespace {

// A block of one send to the peer and one receive from it, as
// batch_isend_irecv issues them: held until endCoalescing, whose combined
// callbacks it returns (null where the block completed at once). `posts`
// counts the posts made on the calling thread.
std::shared_ptr<RecordingCallbacks> exchangeInBlock(Engine& engine, Transport& transport,
                                                    int rank, std::chrono::milliseconds timeout,
                                                    std::vector<float>& sent,
                                                    std::vector<float>& received, int& posts,
                                                    bool peerSends = true) {
  const int peer = 1 - rank;
  const auto caller = std::this_thread::get_id();
  engine.startCoalescing();
  for (const bool isSend : {true, false}) {
    if (isSend && !peerSends && rank == 1) continue;
    engine.submitPointToPoint(
        isSend ? "send" : "recv", timeout, Runner::CallerOrWorker, OpFields{},
        // peer and rank by value: where the executor was not idle, the worker
        // posts after this function has returned.
        [&transport, &sent, &received, &posts, isSend, caller, peer, rank](const OpContext& op) {
          if (std::this_thread::get_id() == caller) ++posts;
          PostedMessage message;
          message.request =
              isSend ? transport.isend(peer, makeP2PTag(rank, 7), sent.data(), 16, op)
                     : transport.irecv(peer, makeP2PTag(peer, 7), received.data(), 16, op);
          return message;
        },
        [](uint64_t) { return std::make_shared<RecordingCallbacks>(); });
  }
  EXPECT_EQ(posts, 0) << "rank " << rank << ": the block holds its posts until it ends";
  auto combined = std::make_shared<RecordingCallbacks>();
  const bool completeNow =
      engine.endCoalescing([&](const std::vector<std::shared_ptr<OperationCallbacks>>&) {
        return combined;
      });
  return completeNow ? nullptr : combined;
}

}  // namespace

// A block of sends and receives, nothing queued ahead of it: its end posts
// them on the issuing thread (with a minute's grace the worker would not
// have), and the block's whole completes once every part has. The peer's
// message may wake the worker, which then holds the drive for a moment and
// the block goes to it (as it should: the executor is not idle then), so
// of ten rounds, exact each, at least one posts on the issuing thread.
TEST(EngineOnCaller, ABlockOfSendsAndReceivesIsPostedOnTheIssuingThreadAtItsEnd) {
  eachIdleRank(true, [&](int rank, Engine& engine, Transport& transport) {
    int roundsPostedHere = 0;
    for (int round = 0; round < 10; ++round) {
      std::vector<float> sent(4, 1.5f + rank + round), received(4, 0.0f);
      int posts = 0;
      std::shared_ptr<RecordingCallbacks> combined = exchangeInBlock(
          engine, transport, rank, std::chrono::seconds(20), sent, received, posts);
      ASSERT_NE(combined, nullptr);
      EXPECT_TRUE(posts == 0 || posts == 2) << "rank " << rank << " round " << round;
      if (posts == 2) ++roundsPostedHere;
      ASSERT_TRUE(helpUntilFinished(engine, *combined)) << "rank " << rank;
      EXPECT_EQ(combined->outcome(), "");
      EXPECT_EQ(received, std::vector<float>(4, 1.5f + (1 - rank) + round)) << "rank " << rank;
    }
    EXPECT_GT(roundsPostedHere, 0) << "rank " << rank;
  });
}

// Posted on the caller, a block's receive still ends at its deadline
// (counted from its post) and with an abort from another thread; the
// block's whole fails with it. The executor may be busy for a moment as the
// block ends (its worker woken by the transport, as the test above says),
// and the block then goes to the worker, which must end it the same way:
// each case is checked wherever it was posted, and tried until it was
// posted on the caller at least once (five tries; under CI's load the
// first went to the worker once).
TEST(EngineOnCaller, ABlockPostedOnTheCallerEndsAtItsDeadlineAndWithAnAbort) {
  for (const bool abort : {false, true}) {
    bool postedOnCaller = false;
    for (int attempt = 0; attempt < 5 && !postedOnCaller; ++attempt) {
      std::promise<void> rank0Done;
      std::shared_future<void> done = rank0Done.get_future().share();
      eachIdleRank(false, [&](int rank, Engine& engine, Transport& transport) {
        if (rank == 1) {  // alive, never sending
          done.wait();
          return;
        }
        // Rank 1 leaves once rank 0 is done, however rank 0 leaves.
        struct Release {
          std::promise<void>& done;
          ~Release() { done.set_value(); }
        } release{rank0Done};
        std::vector<float> sent(4, 1.0f), received(4, 0.0f);
        int posts = 0;
        const auto timeout = abort ? std::chrono::seconds(30) : std::chrono::seconds(1);
        const auto start = Clock::now();
        std::shared_ptr<RecordingCallbacks> combined = exchangeInBlock(
            engine, transport, rank, timeout, sent, received, posts, /*peerSends=*/false);
        ASSERT_NE(combined, nullptr);
        EXPECT_TRUE(posts == 0 || posts == 2) << posts;
        postedOnCaller = posts == 2;
        std::thread aborter;
        if (abort) {
          aborter = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            engine.abort("aborted by the test");
          });
        }
        ASSERT_TRUE(helpUntilFinished(engine, *combined));
        const auto took = Clock::now() - start;
        const std::string outcome = combined->outcome();
        if (abort) {
          aborter.join();
          EXPECT_NE(outcome.find("recv p2p#2 on rank 0: aborted by the test"), std::string::npos)
              << outcome;
          EXPECT_LT(took, std::chrono::seconds(10));
        } else {
          EXPECT_NE(outcome.find("recv p2p#2 timed out after 1000 ms"), std::string::npos)
              << outcome;
        }
      });
    }
    EXPECT_TRUE(postedOnCaller) << (abort ? "abort" : "deadline")
                                << ": no try posted the block on the caller";
  }
}
