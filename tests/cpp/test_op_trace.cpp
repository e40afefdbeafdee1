#include <gtest/gtest.h>

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
