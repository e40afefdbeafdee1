// One rank's trace of a device ring, in the order things happened on the
// rank's thread: what its transport was asked to do (RecordingTransport)
// and what its device was given and finished (FakeDeviceSteps). The device
// ring's tests read the rules of the schedule off it.
#pragma once

#include <cstdint>
#include <vector>

namespace ringreduce::testing {

struct ScheduleEvent {
  enum class Kind { RecvPosted, RecvDone, SendPosted, Enqueued, Finished };
  Kind kind;
  const void* data = nullptr;  // transport: the message's buffer
  uint32_t tagSlot = 0;        // transport: the tag's slot (transport/tag.h)
  uint64_t ticket = 0;         // device: the work's ticket
};

using ScheduleLog = std::vector<ScheduleEvent>;

}  // namespace ringreduce::testing
