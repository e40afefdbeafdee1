// The thread of a watchdog (signal/signal_watchdog.h, nccl/nccl_watchdog.h):
// makes the group's device current, and no other, so that it never creates
// a context on a device its rank does not use; then runs `look` every
// `period`, sleeping in between (a few wake-ups a second, no spinning core),
// until destroyed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace ringreduce::cuda {

class WatchThread {
 public:
  WatchThread(int device, std::chrono::milliseconds period, std::function<void()> look);
  ~WatchThread();  // joins the thread
  WatchThread(const WatchThread&) = delete;
  WatchThread& operator=(const WatchThread&) = delete;

 private:
  void run();

  const int device_;
  const std::chrono::milliseconds period_;
  const std::function<void()> look_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace ringreduce::cuda
