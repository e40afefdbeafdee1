// The fake device's half of cuda/current_device.h: each thread's current
// device and each device's primary context, kept per fake process, so that
// ranks run as threads of one test still model processes of their own (a
// context is per process, as on a real machine). A thread belongs to the
// process it names with fakeProcess(); threads it starts (our watchdogs)
// belong to none, which only matters to hasPrimaryContext, and our threads
// never ask it.
#pragma once

#include <map>
#include <set>

namespace ringreduce::testing {

// A fresh machine of `devices` GPUs: no context anywhere, no thread with a
// current device (what threads set before is forgotten).
void resetFakeDevices(int devices);
// Names the calling thread's fake process (a rank's).
void fakeProcess(int id);
// The devices with a primary context in process `id`.
std::set<int> fakeContexts(int id);
// Every device each thread has made current since the reset, by thread (in
// the order threads first did): a thread of a rank should touch one device.
std::map<int, std::set<int>> fakeDevicesByThread();
// The calling thread's current device as the fake's own code reads it (not
// counted as a call: a launch uses the current device without asking).
int fakeCurrentDevice();

}  // namespace ringreduce::testing
