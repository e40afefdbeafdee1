// The timeline (core/observe/timeline.h, core/observe/phase_recorder.h): phases nest and are
// capped, the writer keeps its file complete JSON after every write, rows
// keep overlapping operations apart, and the ring marks its waits and
// reductions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "algorithms/ring_allreduce.h"
#include "core/observe/phase_recorder.h"
#include "core/observe/timeline.h"
#include "rank_threads.h"

using namespace ringreduce;
using namespace std::chrono_literals;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "ringreduce_timeline_" + name + ".json";
}

}  // namespace

TEST(PhaseRecorder, InnerScopesEndFirstInsideTheirOuterScope) {
  PhaseRecorder recorder;
  {
    PhaseScope transfer(&recorder, Phase::Transfer);
    std::this_thread::sleep_for(1ms);
    {
      PhaseScope reduce(&recorder, Phase::Reduce);
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(1ms);
  }
  { PhaseScope nothing(nullptr, Phase::WaitPeers); }  // no recorder: nothing to do
  ASSERT_EQ(recorder.spans().size(), 2u);
  const PhaseSpan& inner = recorder.spans()[0];
  const PhaseSpan& outer = recorder.spans()[1];
  EXPECT_EQ(inner.phase, Phase::Reduce);
  EXPECT_EQ(outer.phase, Phase::Transfer);
  EXPECT_LT(outer.begin, inner.begin);
  EXPECT_LT(inner.end, outer.end);
  EXPECT_EQ(recorder.total(Phase::Reduce), inner.end - inner.begin);
  EXPECT_EQ(recorder.total(Phase::WaitPeers), Clock::duration::zero());
}

TEST(PhaseRecorder, KeepsTooShortAndTooManySpansInTheTotalsOnly) {
  PhaseRecorder recorder;
  const Clock::time_point t0 = Clock::now();
  recorder.add(Phase::CopyOut, t0, t0 + 100ns);  // shorter than kMinSpan
  recorder.add(Phase::Transfer, t0 + 1us, t0 + 1100ns);  // short, but always drawn
  for (size_t i = 0; i < PhaseRecorder::kMaxSpans + 5; ++i) {
    recorder.add(Phase::WaitPeers, t0 + i * 10us, t0 + i * 10us + 2us);
  }
  recorder.add(Phase::Transfer, t0, t0 + 1s);  // a phase passed once is always kept
  EXPECT_EQ(recorder.spans().size(), PhaseRecorder::kMaxSpans + 2);
  EXPECT_EQ(recorder.spans().back().phase, Phase::Transfer);
  EXPECT_EQ(recorder.dropped(), 5u);
  EXPECT_EQ(recorder.total(Phase::WaitPeers), (PhaseRecorder::kMaxSpans + 5) * 2us);
  EXPECT_EQ(recorder.total(Phase::CopyOut), 100ns);
}

TEST(PhaseRecorder, ASpanRightAfterOneOfItsKindContinuesIt) {
  PhaseRecorder recorder;
  const Clock::time_point t0 = Clock::now();
  recorder.add(Phase::WaitPeers, t0, t0 + 5us);
  recorder.add(Phase::WaitPeers, t0 + 5500ns, t0 + 9us);  // 0.5 us later: the same wait
  recorder.add(Phase::Reduce, t0 + 9us, t0 + 12us);
  recorder.add(Phase::WaitPeers, t0 + 12us, t0 + 20us);   // after a reduction: a new one
  ASSERT_EQ(recorder.spans().size(), 3u);
  EXPECT_EQ(recorder.spans()[0].end, t0 + 9us);
  EXPECT_EQ(recorder.spans()[2].begin, t0 + 12us);
  EXPECT_EQ(recorder.total(Phase::WaitPeers), 5us + 3500ns + 8us);  // the gap is not counted
}

TEST(Timeline, FileIsCompleteJsonAfterEveryWriteAndRowsNeverOverlap) {
  const std::string path = tempPath("writer");
  {
    Timeline timeline(path, 3);
    EXPECT_EQ(readFile(path),
              "[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":3,\"tid\":0,"
              "\"args\":{\"name\":\"rank 3\"}}\n]\n");
    // The second is queued while the first runs: a row of its own.
    TimelineOp first, second;
    first.name = second.name = "allreduce";
    first.group = second.group = "0";
    first.seq = 1;
    second.seq = 2;
    first.dtype = "Float";
    first.bytes = 4096;
    first.row = timeline.takeRow("0");
    second.row = timeline.takeRow("0");
    EXPECT_NE(first.row, second.row);
    first.queued = Clock::now();
    second.queued = first.queued + 5us;
    first.phases.add(Phase::Queued, first.queued, first.queued + 2us);
    first.phases.add(Phase::WaitPeers, first.queued + 3us, first.queued + 4500ns);
    first.phases.add(Phase::Transfer, first.queued + 2us, first.queued + 9us);
    timeline.record(first, first.queued + 10us);
    // The first row is free again; another group gets rows of its own.
    EXPECT_EQ(timeline.takeRow("0"), first.row);
    const int other = timeline.takeRow("1");
    EXPECT_NE(other, first.row);
    EXPECT_NE(other, second.row);
    timeline.record(second, second.queued + 20us, "peer \"1\" died");
    timeline.flush();
    const std::string text = readFile(path);
    EXPECT_EQ(count(text, "\"ph\":\"X\""), 5u) << text;  // two ops, three phases
    EXPECT_NE(text.find("\"args\":{\"name\":\"allreduce\",\"seq\":1,\"bytes\":4096,"
                        "\"dtype\":\"Float\",\"group\":\"0\",\"phase_us\":{\"queued\":2.000,"
                        "\"transfer\":7.000,\"waiting for peers\":1.500}}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\"name\":\"waiting for peers\",\"pid\":3,\"tid\":" +
                        std::to_string(first.row)),
              std::string::npos);
    EXPECT_NE(text.find("\"dur\":10.000"), std::string::npos);
    EXPECT_NE(text.find("\"error\":\"peer \\\"1\\\" died\""), std::string::npos);
    EXPECT_NE(text.find("\"name\":\"thread_name\",\"pid\":3,\"tid\":" +
                        std::to_string(second.row) + ",\"args\":{\"name\":\"group 0 (2)\"}"),
              std::string::npos);
    EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
    EXPECT_EQ(count(text, "]"), 1u);
    EXPECT_EQ(count(text, "thread_name"), 3u);  // group 0 twice, group 1 once
  }
  // Destroyed: what was left is written, still one array.
  const std::string text = readFile(path);
  EXPECT_EQ(text.substr(text.size() - 3), "\n]\n");
  EXPECT_EQ(count(text, "]"), 1u);
  std::remove(path.c_str());
}

TEST(Timeline, OneTimelinePerProcessAndPathWithTheRankInIt) {
  const std::string base = tempPath("rank{rank}");
  auto a = Timeline::forProcess(base, 7);
  auto b = Timeline::forProcess(base, 7);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->path(), tempPath("rank7"));
  EXPECT_THROW(Timeline::forProcess("/nonexistent-dir/x{rank}.json", 0), Error);
}

// The ring marks its reductions, and the waits for a late peer.
TEST(Timeline, RingAllreduceMarksWaitsAndReductions) {
  Config config;
  config.segmentBytes = 256 * 1024;  // reductions long enough to be drawn
  std::vector<PhaseRecorder> recorders(2);
  ringreduce::testing::runComms(
      2, ringreduce::testing::TransportKind::Loopback,
      [&](const Comm& comm, int rank) {
        std::vector<float> data(1 << 20, 1.0f);
        if (rank == 1) std::this_thread::sleep_for(20ms);  // rank 0 waits for it
        OpContext op("allreduce", 1, std::chrono::seconds(20));
        op.phases = &recorders[rank];
        ringAllreduce(comm, op, {data.data(), data.size(), DataType::Float32, ReduceOp::Sum});
        EXPECT_EQ(data[12345], 2.0f);
      },
      config);
  for (const PhaseRecorder& recorder : recorders) {
    EXPECT_GT(recorder.total(Phase::Reduce), Clock::duration::zero());
    size_t reductions = 0;
    for (const PhaseSpan& s : recorder.spans()) reductions += s.phase == Phase::Reduce;
    EXPECT_GT(reductions, 0u);
  }
  EXPECT_GT(recorders[0].total(Phase::WaitPeers), Clock::duration::zero());
}
