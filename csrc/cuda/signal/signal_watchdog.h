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
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "cuda/signal/signal_group.h"

namespace ringreduce::cuda {

class SignalWatchdog {
 public:
  SignalWatchdog(SignalGroup& group, std::function<void(const std::string&)> onFailure,
                 std::function<bool()> shouldStop,
                 std::chrono::milliseconds period = std::chrono::milliseconds(10));
  ~SignalWatchdog();  // joins the thread
  SignalWatchdog(const SignalWatchdog&) = delete;
  SignalWatchdog& operator=(const SignalWatchdog&) = delete;

  // One look, on the caller's thread (the thread runs it every period).
  void check();

 private:
  void run();

  SignalGroup& group_;
  const std::function<void(const std::string&)> onFailure_;
  const std::function<bool()> shouldStop_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool quit_ = false;
  bool reported_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace ringreduce::cuda
