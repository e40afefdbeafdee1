// The engine's share of a small device collective's cost (issue 44):
// Engine::runOnCaller with plain fields and a non-owning launch must make no
// heap allocation on the calling thread once warm, whether the flight
// recorder is on or off, while still numbering every op and recording each
// one, with its fields, in the trace. A change that puts a string, a
// std::function or a vector back on this path fails here.
//
// Its own binary: allocation_counter.cpp replaces operator new for the
// whole process.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "allocation_counter.h"
#include "core/base/errors.h"
#include "engine/engine.h"
#include "engine_ranks.h"
#include "transport/loopback/loopback_transport.h"

using namespace ringreduce;
using ringreduce::testing::AllocationScope;
using ringreduce::testing::becomesIdle;
using ringreduce::testing::eachRank;
using ringreduce::testing::loopbackEngine;

namespace {

constexpr int kWarmUp = 3;
constexpr int kOps = 50;

std::unique_ptr<Engine> engineFor(const std::shared_ptr<LoopbackFabric>& fabric, int rank,
                                  size_t traceEntries) {
  Config config;
  config.traceBufferSize = traceEntries;
  return loopbackEngine(fabric, rank, config);
}

// An allreduce of 1000 float32 on device `rank`, as the backend describes one.
OpFields allreduceFields(int rank) {
  OpFields fields;
  fields.dtype = DataType::Float32;
  fields.count = 1000;
  fields.reduceOp = static_cast<int>(ReduceOp::Sum);
  fields.device = rank;
  return fields;
}

CollectiveFingerprint allreduceFingerprint() {
  CollectiveFingerprint fp;
  fp.opType = 1;
  fp.dtype = 6;
  fp.numel = 1000;
  fp.reduceOp = 0;
  return fp;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Per rank of two (threads over the loopback transport): kWarmUp on-caller
// allreduces, then kOps counted ones.
struct RankRun {
  uint64_t allocations = 0;
  std::array<uint64_t, kOps> seqs{};
  std::array<uint64_t, kOps> launchedSeqs{};
  std::array<uint32_t, kOps> launchedWords{};
  std::array<uint8_t, kOps> launchedBytes{};
  std::string json;
};

RankRun runOnCallerOps(const std::shared_ptr<LoopbackFabric>& fabric, int rank,
                       size_t traceEntries) {
  RankRun run;
  auto engine = engineFor(fabric, rank, traceEntries);
  EXPECT_TRUE(becomesIdle(*engine));
  const OpFields fields = allreduceFields(rank);
  const CollectiveFingerprint fp = allreduceFingerprint();
  int i = 0;
  // What a launch sees, kept in place: the launch is the backend's, not
  // the engine's, so it must not allocate here either.
  auto launch = [&](const OpContext& op) {
    if (i < 0) return;  // a warm-up op
    run.launchedSeqs[i] = op.seq;
    run.launchedWords[i] = op.fingerprintWord;
    run.launchedBytes[i] = op.fingerprint;
  };
  for (i = -kWarmUp; i < 0;) {
    engine->runOnCaller("allreduce", std::chrono::seconds(20), fp, fields, launch);
    ++i;
  }
  {
    AllocationScope scope;
    for (i = 0; i < kOps; ++i) {
      run.seqs[i] = engine->runOnCaller("allreduce", std::chrono::seconds(20), fp, fields, launch);
    }
    run.allocations = scope.count();
  }
  EXPECT_EQ(engine->sequenceNumber(), static_cast<uint64_t>(kWarmUp + kOps));
  run.json = engine->traceJson("test");
  return run;
}

void expectAllocationFreeAndNumbered(size_t traceEntries) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  std::array<RankRun, 2> runs;
  eachRank(2, [&](int rank) { runs[rank] = runOnCallerOps(fabric, rank, traceEntries); });
  const uint32_t word = fingerprintWord(allreduceFingerprint());
  for (int rank = 0; rank < 2; ++rank) {
    const RankRun& run = runs[rank];
    EXPECT_EQ(run.allocations, 0u) << "rank " << rank << ": heap allocations in " << kOps
                                   << " on-caller collectives";
    for (int i = 0; i < kOps; ++i) {
      const uint64_t expected = kWarmUp + i + 1;  // one per op, every rank alike
      EXPECT_EQ(run.seqs[i], expected) << "rank " << rank << " op " << i;
      EXPECT_EQ(run.launchedSeqs[i], expected) << "rank " << rank << " op " << i;
      // The launch gets the hash itself and the tag's byte folded from it.
      EXPECT_EQ(run.launchedWords[i], word);
      EXPECT_EQ(run.launchedBytes[i],
                static_cast<uint8_t>(word ^ (word >> 8) ^ (word >> 16) ^ (word >> 24)));
    }
  }
}

TEST(EngineHotPath, OnCallerCollectivesAllocateNothingWithTheTraceOn) {
  expectAllocationFreeAndNumbered(2000);
}

TEST(EngineHotPath, OnCallerCollectivesAllocateNothingWithTheTraceOff) {
  expectAllocationFreeAndNumbered(0);
}

// Once the ring of entries has wrapped (entries reused, their strings'
// capacity kept), it still allocates nothing.
TEST(EngineHotPath, OnCallerCollectivesAllocateNothingOnceTheTraceWrapped) {
  expectAllocationFreeAndNumbered(4);
}

// One entry per on-caller op, completed, with its fields rendered as text.
TEST(EngineHotPath, TheTraceHoldsOneEntryPerDirectOpWithItsFields) {
  auto fabric = std::make_shared<LoopbackFabric>(2);
  std::array<RankRun, 2> runs;
  eachRank(2, [&](int rank) { runs[rank] = runOnCallerOps(fabric, rank, 2000); });
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& json = runs[rank].json;
    const std::string summary =
        "\"summary\": \"1000 x float32 SUM on cuda:" + std::to_string(rank) + "\"";
    EXPECT_EQ(occurrences(json, "\"op\": \"allreduce\""), size_t{kWarmUp + kOps}) << json;
    EXPECT_EQ(occurrences(json, summary), size_t{kWarmUp + kOps}) << json;
    EXPECT_EQ(occurrences(json, "\"direct\": true"), size_t{kWarmUp + kOps}) << json;
    EXPECT_EQ(occurrences(json, "\"state\": \"completed\""), size_t{kWarmUp + kOps}) << json;
    // The same on both ranks, whichever device each is on: what the trace
    // reader compares.
    const std::string fingerprint =
        "\"fingerprint\": " + std::to_string(fingerprintWord(allreduceFingerprint())) + ",";
    EXPECT_EQ(occurrences(json, fingerprint), size_t{kWarmUp + kOps}) << json;
    for (uint64_t seq = 1; seq <= kWarmUp + kOps; ++seq) {
      EXPECT_EQ(occurrences(json, "\"seq\": " + std::to_string(seq) + ","), 1u) << seq;
    }
  }
}

// A launch that throws: the trace records the failure with its reason, the
// error reaches the caller, and the op kept its sequence number. Bad
// arguments leave the group usable, anything else does not.
TEST(EngineHotPath, AFailedLaunchIsRecordedAndRethrown) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0, 2000);
  ASSERT_TRUE(becomesIdle(*engine));
  OpFields fields;
  fields.dtype = DataType::Int64;
  fields.count = 8;
  fields.root = 1;
  fields.device = 0;
  EXPECT_THROW(engine->runOnCaller("broadcast", std::chrono::seconds(1), {}, fields,
                                   [](const OpContext&) { throw InvalidArgument("bad dtype"); }),
               InvalidArgument);
  EXPECT_TRUE(engine->canRunOnCaller());
  EXPECT_EQ(engine->sequenceNumber(), 1u);
  EXPECT_THROW(engine->runOnCaller("broadcast", std::chrono::seconds(1), {}, fields,
                                   [](const OpContext&) { throw Error("kernel launch failed"); }),
               Error);
  EXPECT_TRUE(engine->givenUp());
  EXPECT_EQ(engine->sequenceNumber(), 2u);
  const std::string json = engine->traceJson("test");
  EXPECT_EQ(occurrences(json, "\"state\": \"failed\""), 2u) << json;
  EXPECT_EQ(occurrences(json, "\"summary\": \"8 x int64 from root 1 on cuda:0\""), 2u) << json;
  EXPECT_NE(json.find("\"error\": \"bad dtype\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"error\": \"kernel launch failed\""), std::string::npos) << json;
}

// The launch sees the fingerprint's word, and the trace renders the fields
// as the summary a queued op's would be.
TEST(EngineHotPath, TheTraceReadsTheFieldsAsItsSummary) {
  auto fabric = std::make_shared<LoopbackFabric>(1);
  auto engine = engineFor(fabric, 0, 2000);
  ASSERT_TRUE(becomesIdle(*engine));
  uint32_t seenWord = 0;
  OpFields fields;
  fields.dtype = DataType::Float32;
  fields.count = 4;
  fields.reduceOp = static_cast<int>(ReduceOp::Sum);
  fields.device = 0;
  EXPECT_EQ(engine->runOnCaller("allreduce", std::chrono::seconds(1), allreduceFingerprint(),
                                fields, [&](const OpContext& op) { seenWord = op.fingerprintWord; }),
            1u);
  EXPECT_EQ(seenWord, fingerprintWord(allreduceFingerprint()));
  const std::string json = engine->traceJson("test");
  EXPECT_NE(json.find("\"summary\": \"4 x float32 SUM on cuda:0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"direct\": true"), std::string::npos) << json;
}

}  // namespace
