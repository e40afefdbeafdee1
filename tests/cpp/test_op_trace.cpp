// The flight recorder: kept entries, on-caller entries, concurrent writers (engine/op_trace.h)
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "engine/op_trace.h"

using namespace ringreduce;

// The ring keeps the newest entries; a state change for an entry that was
// overwritten is ignored, not written into its successor.
TEST(OpTrace, KeepsTheLastEntriesAndIgnoresOverwrittenOnes) {
  OpTrace trace(3);
  std::vector<uint64_t> ids;
  for (uint64_t seq = 1; seq <= 5; ++seq) ids.push_back(trace.queued(seq, false, "allreduce", "x"));
  trace.completed(ids[0]);  // overwritten by the fourth
  trace.started(ids[4]);
  trace.failed(ids[3], "peer \"1\" is gone\n");
  const auto entries = trace.snapshot();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].seq, 3u);
  EXPECT_EQ(entries[0].state, TraceEntry::State::Queued);
  EXPECT_EQ(entries[1].state, TraceEntry::State::Failed);
  EXPECT_EQ(entries[2].state, TraceEntry::State::Started);
  const std::string json = trace.toJson(0, 2, "g", "because");
  EXPECT_NE(json.find("peer \\\"1\\\" is gone\\n"), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\": \"failed\""), std::string::npos);
}

TEST(OpTrace, SizeZeroRecordsNothing) {
  OpTrace trace(0);
  EXPECT_FALSE(trace.enabled());
  EXPECT_EQ(trace.queued(1, false, "barrier", ""), 0u);
  trace.completed(0);
  EXPECT_TRUE(trace.snapshot().empty());
}

// An on-caller op's entry: written once, completed or failed, its fields kept
// as they are and rendered as text only when read (snapshot, JSON).
TEST(OpTrace, OnCallerEntriesRenderTheirFieldsWhenRead) {
  OpTrace trace(8);
  OpFields sum;
  sum.dtype = DataType::BFloat16;
  sum.count = 4096;
  sum.reduceOp = static_cast<int>(ReduceOp::Max);
  sum.device = 1;
  OpFields premul = sum;
  premul.reduceOp = OpFields::kPremulSum;
  OpFields gather;  // no reduce op, no device: neither is named
  gather.dtype = DataType::Int32;
  gather.count = 3;
  gather.root = 2;
  const Clock::time_point at = Clock::now();
  trace.onCaller(1, "allreduce", sum, 0xabcdu, at);
  trace.onCaller(2, "allreduce", premul, 0xabceu, at);
  trace.onCaller(3, "broadcast", gather, 7, at, "launch failed");
  trace.onCaller(4, "allreduce", std::string("2 x Float SUM on cuda:0"), 9, at);
  trace.queued(5, false, "barrier", "queued text", 11);
  trace.queued(6, false, "allreduce", "published text", 12, /*publishedAhead=*/true);
  const auto entries = trace.snapshot();
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(entries[0].summary, "4096 x bfloat16 MAX on cuda:1");
  EXPECT_EQ(entries[1].summary, "4096 x bfloat16 PREMUL_SUM on cuda:1");
  EXPECT_EQ(entries[2].summary, "3 x int32 from root 2");
  EXPECT_EQ(entries[3].summary, "2 x Float SUM on cuda:0");
  EXPECT_EQ(entries[4].summary, "queued text");
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(entries[i].onCaller) << i;
    EXPECT_EQ(entries[i].queued, at) << i;
    EXPECT_EQ(entries[i].started, at) << i;
    EXPECT_EQ(entries[i].finished, at) << i;
  }
  EXPECT_FALSE(entries[4].onCaller);
  EXPECT_FALSE(entries[4].publishedAhead);
  EXPECT_TRUE(entries[5].publishedAhead);
  EXPECT_EQ(entries[0].state, TraceEntry::State::Completed);
  EXPECT_EQ(entries[2].state, TraceEntry::State::Failed);
  EXPECT_EQ(entries[2].error, "launch failed");
  EXPECT_EQ(entries[0].fingerprint, 0xabcdu);
  const std::string json = trace.toJson(0, 2, "g", "why");
  EXPECT_NE(json.find("\"direct\": true, \"published_ahead\": false, \"op\": \"allreduce\", "
                      "\"summary\": \"4096 x bfloat16 MAX "
                      "on cuda:1\", \"fingerprint\": 43981, \"state\": \"completed\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"summary\": \"3 x int32 from root 2\", \"fingerprint\": 7, \"state\": "
                      "\"failed\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"direct\": false, \"published_ahead\": false, \"op\": \"barrier\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"direct\": false, \"published_ahead\": true, \"op\": \"allreduce\""),
            std::string::npos)
      << json;
}

// A send's or receive's entry keeps its fields (Engine::submitPointToPoint:
// no string per message) and names the peer and the tag when read.
TEST(OpTrace, SendAndReceiveEntriesNameThePeerAndTheTagWhenRead) {
  OpTrace trace(8);
  OpFields send;
  send.dtype = DataType::Float32;
  send.count = 16;
  send.direction = OpFields::Direction::To;
  send.peer = 1;
  send.tag = 7;
  OpFields recv = send;
  recv.direction = OpFields::Direction::From;
  recv.peer = 0;
  OpFields anySource = recv;
  anySource.peer = -1;
  OpFields bytes = send;  // a dtype the reductions do not know, by torch's name
  bytes.dtypeName = "Float8_e4m3fn";
  const uint64_t sent = trace.queued(1, true, "send", send);
  trace.queued(2, true, "recv", recv);
  trace.queued(3, true, "recv_anysource", anySource);
  trace.queued(4, true, "send", bytes);
  trace.completed(sent);
  const auto entries = trace.snapshot();
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].summary, "16 x float32 to rank 1, tag 7");
  EXPECT_EQ(entries[1].summary, "16 x float32 from rank 0, tag 7");
  EXPECT_EQ(entries[2].summary, "16 x float32 from any rank, tag 7");
  EXPECT_EQ(entries[3].summary, "16 x Float8_e4m3fn to rank 1, tag 7");
  EXPECT_EQ(entries[0].state, TraceEntry::State::Completed);
  EXPECT_EQ(entries[1].state, TraceEntry::State::Queued);
  for (const TraceEntry& e : entries) {
    EXPECT_TRUE(e.pointToPoint);
    EXPECT_FALSE(e.onCaller);
  }
  EXPECT_NE(trace.toJson(0, 2, "0", "test").find("\"16 x float32 from any rank, tag 7\""),
            std::string::npos);
}

// Writers on several threads (the on-caller ops, the executor's state
// changes) and a reader at once: each slot is written whole, and a dump
// sees only whole entries.
TEST(OpTrace, ConcurrentWritersAndReadersSeeWholeEntries) {
  OpTrace trace(16);
  OpFields fields;
  fields.count = 5;
  std::atomic<bool> stop{false};
  std::thread executor([&] {
    for (uint64_t seq = 1; seq <= 2000; ++seq) {
      const uint64_t id = trace.queued(seq, true, "send", "5 x uint8 to rank 1");
      trace.started(id);
      trace.completed(id);
    }
  });
  std::thread caller([&] {
    for (uint64_t seq = 1; seq <= 2000; ++seq) {
      trace.onCaller(seq, "allreduce", fields, 1, Clock::now());
    }
  });
  std::thread reader([&] {
    while (!stop) {
      for (const TraceEntry& e : trace.snapshot()) {
        const bool direct = std::string(e.name) == "allreduce";
        EXPECT_EQ(e.onCaller, direct);
        EXPECT_EQ(e.summary, direct ? "5 x uint8" : "5 x uint8 to rank 1");
      }
    }
  });
  executor.join();
  caller.join();
  stop = true;
  reader.join();
  EXPECT_EQ(trace.snapshot().size(), 16u);
}
