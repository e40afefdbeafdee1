// A watchdog over something of ours that runs on the device (the
// device-flags group, NCCL's communicator), from a thread of its own: the
// thread makes the group's device current, and no other, so that it never
// creates a context on a device its rank does not use; then every `period`
// (sleeping in between: a few wake-ups a second, no spinning core) it asks
// the target for a failure. On the first one it stops the target (its
// kernels let go of the streams) and calls `onFailure(reason)` once (the
// backend fails the group, and every later collective, with that reason);
// whenever `shouldStop()` says the host has given up on the group (an
// abort, a dead peer, a failure found elsewhere) it stops the target too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ringreduce::cuda {

class Watchdog {
 public:
  struct Target {
    std::function<std::string()> failure;          // empty while all is well
    std::function<void(const std::string&)> stop;  // why it must stop
  };
  Watchdog(int device, Target target, std::function<void(const std::string&)> onFailure,
           std::function<bool()> shouldStop, std::chrono::milliseconds period);
  ~Watchdog();  // joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // One look, on the caller's thread (the thread runs it every period).
  void check();

 private:
  void run();

  const int device_;
  const Target target_;
  const std::function<void(const std::string&)> onFailure_;
  const std::function<bool()> shouldStop_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool quit_ = false;
  bool reported_ = false;  // guarded by mutex_
  std::thread thread_;     // last: it looks at everything above
};

}  // namespace ringreduce::cuda
