// The device ring's schedule, read off each rank's trace (schedule_log.h):
// reductions in segment order into the right places, a staging slot
// received into only once the reduction reading it is done, a segment sent
// on only once the device has written it, receives in flight while the
// device reduces, and nothing left on the device at return.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "algorithms/device/ring.h"
#include "core/plan/partition.h"
#include "fake_device_steps.h"
#include "rank_threads.h"
#include "recording_transport.h"
#include "transport/tag.h"

using namespace ringreduce;
using ringreduce::testing::FakeDeviceSteps;
using ringreduce::testing::kindName;
using ringreduce::testing::RecordingTransport;
using ringreduce::testing::runRanks;
using ringreduce::testing::ScheduleEvent;
using ringreduce::testing::ScheduleLog;
using ringreduce::testing::smallSegments;
using ringreduce::testing::TransportKind;

namespace {

class DeviceRingSchedule : public ::testing::TestWithParam<TransportKind> {};

std::string transportName(const ::testing::TestParamInfo<TransportKind>& info) {
  return kindName(info.param);
}

// What one rank's float32 AVG run should have done, and the checks.
struct Expected {
  int n, rank;
  size_t count;
  bool allreduce;  // else reduce-scatter with an output
  const float* data;
  const float* output;
  int slots;
  size_t slotBytes;
  SegmentPlan plan;
  size_t window;

  Expected(int n_, int rank_, size_t count_, bool allreduce_, const float* data_,
           const float* output_, const FakeDeviceSteps::Options& device)
      : n(n_), rank(rank_), count(count_), allreduce(allreduce_), data(data_), output(output_),
        slots(device.slots), slotBytes(device.slotBytes) {
    // The host ring's plan, with the device ring's segments.
    const size_t segmentBytes = deviceSegmentBytes(
        smallSegments().segmentBytes, chunkOf(count, n, 0).count * sizeof(float), slotBytes);
    plan = planSegments(chunkOf(count, n, 0).count, sizeof(float), segmentBytes,
                        (kMaxSlot + 1) / (2 * static_cast<size_t>(n - 1)));
    window = std::min<size_t>(slots, items());
  }
  size_t items() const { return static_cast<size_t>(n - 1) * plan.segments; }
  size_t reductions() const {  // the items whose segment is not empty
    size_t nonEmpty = 0;
    for (size_t i = 0; i < items(); ++i) nonEmpty += reduced(i).count > 0 ? 1 : 0;
    return nonEmpty;
  }
  int shift() const { return allreduce ? 0 : -1; }
  Range segment(int chunk, size_t k) const {
    return segmentOf(chunkOf(count, n, ((chunk % n) + n) % n), plan.elemsPerSegment, k);
  }
  // Reduce-scatter item i = step * segments + k reduces this segment.
  Range reduced(size_t i) const {
    return segment(rank - static_cast<int>(i / plan.segments) - 1 + shift(), i % plan.segments);
  }
};

// Checks the reductions in order and returns each item's ticket (0: an
// empty segment, nothing enqueued).
std::vector<uint64_t> checkReductions(const Expected& e, const FakeDeviceSteps& device) {
  std::vector<uint64_t> tickets(e.items(), 0);
  size_t record = 0;
  for (size_t i = 0; i < e.items(); ++i) {
    const Range seg = e.reduced(i);
    if (seg.count == 0) continue;
    const bool last = i / e.plan.segments == static_cast<size_t>(e.n - 2);
    EXPECT_LT(record, device.reduces().size());
    if (record >= device.reduces().size()) break;
    const auto& r = device.reduces()[record++];
    tickets[i] = r.ticket;
    EXPECT_EQ(r.dst, e.data + seg.offset) << "item " << i;
    EXPECT_EQ(r.count, seg.count) << "item " << i;
    EXPECT_EQ(r.slot, static_cast<int>(i % e.window)) << "item " << i;
    EXPECT_EQ(r.avgDivisor, last ? e.n : 0) << "item " << i;
    const float* alsoTo = last && !e.allreduce
                              ? e.output + (seg.offset - chunkOf(e.count, e.n, e.rank).offset)
                              : nullptr;
    EXPECT_EQ(r.alsoTo, alsoTo) << "item " << i;
    EXPECT_TRUE(r.finished) << "item " << i;
    EXPECT_TRUE(r.slotIntact) << "item " << i << ": its slot was received into too early";
  }
  EXPECT_EQ(record, device.reduces().size());
  return tickets;
}

// Walks the trace: slot reuse, overlap, and what each send waited for.
void checkTrace(const Expected& e, const FakeDeviceSteps& device, const ScheduleLog& log,
                const std::vector<uint64_t>& tickets, bool expectOverlap) {
  std::map<uint64_t, int> slotOfTicket;
  for (const auto& r : device.reduces()) slotOfTicket[r.ticket] = r.slot;
  std::vector<int> reading(static_cast<size_t>(e.slots), 0);  // pending reductions per slot
  int pending = 0;
  size_t slotRecvsBeforeFirstSend = 0;
  bool sent = false, overlapped = false;
  std::set<uint64_t> finished;
  std::set<uint32_t> arrived;  // tag slots of the receives done
  size_t sends = 0;
  const size_t s = e.plan.segments;
  for (const ScheduleEvent& ev : log) {
    switch (ev.kind) {
      case ScheduleEvent::Kind::Enqueued:
        if (slotOfTicket.count(ev.ticket)) ++reading[slotOfTicket[ev.ticket]], ++pending;
        break;
      case ScheduleEvent::Kind::Finished:
        finished.insert(ev.ticket);
        if (slotOfTicket.count(ev.ticket)) --reading[slotOfTicket[ev.ticket]], --pending;
        break;
      case ScheduleEvent::Kind::RecvDone:
        arrived.insert(ev.tagSlot);
        break;
      case ScheduleEvent::Kind::RecvPosted: {
        const int slot = device.slotIndexOf(ev.data);
        if (slot < 0) break;  // an allgather receive, straight into place
        EXPECT_EQ(reading[slot], 0) << "slot " << slot << " received into while being reduced";
        if (!sent) ++slotRecvsBeforeFirstSend;
        overlapped = overlapped || pending > 0;
        break;
      }
      case ScheduleEvent::Kind::SendPosted: {
        ++sends;
        sent = true;
        const int step = static_cast<int>(ev.tagSlot / s);
        const size_t k = ev.tagSlot % s;
        if (step == 0) {  // the caller's data, once the fence says it is there
          EXPECT_TRUE(finished.count(device.fences().at(0))) << "sent before the fence";
          EXPECT_EQ(ev.data, e.data + e.segment(e.rank + e.shift(), k).offset);
        } else if (step < e.n) {  // reduced on the device: once its ticket is done
          const size_t item = static_cast<size_t>(step - 1) * s + k;
          EXPECT_EQ(ev.data, e.data + e.reduced(item).offset) << "step " << step;
          if (tickets[item] != 0) {
            EXPECT_TRUE(finished.count(tickets[item])) << "item " << item << " sent too early";
          }
        } else {  // allgather: forwarded once received
          const int t = step - e.n;
          EXPECT_TRUE(arrived.count(static_cast<uint32_t>((e.n - 1 + t) * s + k)));
          EXPECT_EQ(ev.data, e.data + e.segment(e.rank - t, k).offset);
        }
        break;
      }
    }
  }
  EXPECT_EQ(slotRecvsBeforeFirstSend, e.window) << "the window was not posted up front";
  if (expectOverlap) {
    EXPECT_TRUE(overlapped) << "no receive was posted while a reduction was pending";
  }
  EXPECT_EQ(sends, e.allreduce ? 2 * e.items() : e.items());
  EXPECT_EQ(device.unfinished(), 0u);
}

// `expectOverlap`: every chunk has two segments or more, and the device
// holds each reduction until the next one is enqueued (overlapReduces), so
// a receive must complete, and the next go in flight, while one is pending.
// Returns the segments per chunk that the ring was checked against.
size_t runAndCheck(TransportKind kind, int n, size_t count, bool allreduce, bool expectOverlap,
                   size_t slotBytes = 256) {
  std::atomic<size_t> segments{0};
  runRanks(
      n,
      [&](Transport& inner, int rank) {
        ScheduleLog log;
        RecordingTransport t(inner, &log, nullptr);
        Workspace workspace;
        const Config config = smallSegments();
        const Comm c{t, config, workspace};
        FakeDeviceSteps::Options options;
        options.minPolls = 2;
        options.maxPolls = 6;
        options.seed = 5u + static_cast<uint32_t>(rank);
        options.slotBytes = slotBytes;
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + i) % 7);
        std::vector<float> output(chunkOf(count, n, rank).count);
        const Expected e(n, rank, count, allreduce, data.data(), output.data(), options);
        if (expectOverlap) options.overlapReduces = e.reductions();
        FakeDeviceSteps device(options, &log);
        const DeviceRingArgs args{data.data(), count, DataType::Float32, ReduceOp::Avg,
                                  allreduce ? nullptr : output.data()};
        const OpContext op("collective", 1, std::chrono::seconds(20));
        if (allreduce) {
          deviceRingAllreduce(c, op, args, device);
        } else {
          deviceRingReduceScatter(c, op, args, device);
        }
        checkTrace(e, device, log, checkReductions(e, device), expectOverlap);
        segments = e.plan.segments;
      },
      smallSegments(), kind);
  return segments;
}

}  // namespace

TEST_P(DeviceRingSchedule, AllreduceFollowsTheRingRules) {
  for (int n : {2, 3, 4}) runAndCheck(GetParam(), n, 1001, true, true);
}

TEST_P(DeviceRingSchedule, ReduceScatterFollowsTheRingRules) {
  for (int n : {2, 3, 4}) runAndCheck(GetParam(), n, 1001, false, true);
}

// Fewer elements than ranks: some chunks are empty, nothing is enqueued
// for them, yet the ring's (empty) messages all flow.
TEST_P(DeviceRingSchedule, EmptySegmentsAreSentButNotReduced) {
  runAndCheck(GetParam(), 5, 3, true, false);
  runAndCheck(GetParam(), 5, 3, false, false);
}

// With room in the slots, a larger message travels in larger segments (a
// quarter of a chunk, from the host ring's 1 KiB here up to a 16 KiB slot),
// and the schedule keeps every rule with them: the ring's reductions are
// checked segment by segment against that plan.
TEST_P(DeviceRingSchedule, SegmentsGrowWithTheMessageUpToASlot) {
  const size_t slot = 16 << 10;
  // (Two items fit the three slots at once: nothing to overlap.)
  EXPECT_EQ(runAndCheck(GetParam(), 2, 1001, true, false, slot), 2u);        // 1 KiB segments
  EXPECT_EQ(runAndCheck(GetParam(), 2, 8192, true, true, slot), 4u);         // 4 KiB: a quarter
  EXPECT_EQ(runAndCheck(GetParam(), 2, 65536, true, true, slot), 8u);        // 16 KiB: a slot
  EXPECT_EQ(runAndCheck(GetParam(), 3, 3 * 8192, false, true, slot), 4u);    // reduce-scatter
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceRingSchedule,
                         ::testing::Values(TransportKind::Ucx, TransportKind::Loopback),
                         transportName);
