// Watches a device-flags group (a Watchdog, cuda/watchdog.h): every
// `period` it reads the kernels' reports in pinned host memory
// (SignalGroup::failure); stopping the group stops its device waits, so no
// kernel outlives the group's failure.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "cuda/signal/signal_group.h"
#include "cuda/watchdog.h"

namespace ringreduce::cuda {

class SignalWatchdog : public Watchdog {
 public:
  SignalWatchdog(SignalGroup& group, std::function<void(const std::string&)> onFailure,
                 std::function<bool()> shouldStop,
                 std::chrono::milliseconds period = std::chrono::milliseconds(10))
      : Watchdog(group.device(),
                 Target{[&group] { return group.failure(); },
                        [&group](const std::string&) { group.stop(); }},
                 std::move(onFailure), std::move(shouldStop), period) {}
};

}  // namespace ringreduce::cuda
