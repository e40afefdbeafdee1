// Watches the group's NCCL communicator (a Watchdog, cuda/watchdog.h), as
// SignalWatchdog watches the device-flags path: every `period` it asks
// NCCL for its asynchronous error (the reason names NCCL's error, the
// collective and this rank); stopping it aborts the communicator, so NCCL's
// kernels let go of the streams they hold and the caller's stream does not
// wait on a dead peer forever.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "cuda/nccl/nccl_communicator.h"
#include "cuda/watchdog.h"

namespace ringreduce::cuda {

class NcclWatchdog : public Watchdog {
 public:
  NcclWatchdog(NcclCommunicator& nccl, std::function<void(const std::string&)> onFailure,
               std::function<bool()> shouldStop,
               std::chrono::milliseconds period = std::chrono::milliseconds(100))
      : Watchdog(nccl.device(),
                 Target{[&nccl] { return nccl.asyncError(); },
                        [&nccl](const std::string& why) { nccl.abort(why); }},
                 std::move(onFailure), std::move(shouldStop), period) {}
};

}  // namespace ringreduce::cuda
