// Watches the group's NCCL communicator from a thread of its own (a
// WatchThread: no spinning, the group's device only), as SignalWatchdog
// watches the device-flags path. Every `period` it asks NCCL for its
// asynchronous error; on the first one it aborts the communicator (NCCL's
// kernels let go of the streams they hold, so the caller's stream does not
// wait on a dead peer forever) and calls `onFailure(reason)` once, the
// reason naming NCCL's error, the collective and this rank. Whenever
// `shouldStop()` says the host has given up on the group (an abort, a dead
// peer, a failure found elsewhere) it aborts the communicator too.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "cuda/nccl/nccl_communicator.h"
#include "cuda/watch_thread.h"

namespace ringreduce::cuda {

class NcclWatchdog {
 public:
  NcclWatchdog(NcclCommunicator& nccl, std::function<void(const std::string&)> onFailure,
               std::function<bool()> shouldStop,
               std::chrono::milliseconds period = std::chrono::milliseconds(100));
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // One look, on the caller's thread (the thread runs it every period).
  void check();

 private:
  NcclCommunicator& nccl_;
  const std::function<void(const std::string&)> onFailure_;
  const std::function<bool()> shouldStop_;
  std::mutex mutex_;
  bool reported_ = false;  // guarded by mutex_
  WatchThread thread_;     // last: it looks at everything above
};

}  // namespace ringreduce::cuda
