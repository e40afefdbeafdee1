// Watches a device-flags group from a thread of its own: every `period` it
// reads the kernels' reports in pinned host memory (SignalGroup::failure);
// on the first failure it stops the group's device waits and calls
// `onFailure(reason)` once (the backend fails the group, and every later
// collective, with that reason); whenever `shouldStop()` says the host has
// given up (an abort, a dead peer) it stops the device waits, so no kernel
// outlives the group's failure. It sleeps between looks: a few wake-ups a
// second, no spinning core.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "cuda/signal/signal_group.h"
#include "cuda/watch_thread.h"

namespace ringreduce::cuda {

class SignalWatchdog {
 public:
  SignalWatchdog(SignalGroup& group, std::function<void(const std::string&)> onFailure,
                 std::function<bool()> shouldStop,
                 std::chrono::milliseconds period = std::chrono::milliseconds(10));
  ~SignalWatchdog() = default;  // joins the thread
  SignalWatchdog(const SignalWatchdog&) = delete;
  SignalWatchdog& operator=(const SignalWatchdog&) = delete;

  // One look, on the caller's thread (the thread runs it every period).
  void check();

 private:
  SignalGroup& group_;
  const std::function<void(const std::string&)> onFailure_;
  const std::function<bool()> shouldStop_;
  std::mutex mutex_;
  bool reported_ = false;  // guarded by mutex_
  WatchThread thread_;     // last: it looks at everything above
};

}  // namespace ringreduce::cuda
