// Makes `device` current for a scope, and afterwards gives the caller's
// thread back its previous device only where that device already had a
// context (torch's MaybeSetDevice / MaybeExchangeDevice semantics). Our
// calls run on the caller's thread (torch's, in the fast path), and changing
// its current device under it would move the user's next tensor; but on a
// thread that never chose a device the runtime says 0, and restoring 0
// there would create a context (and memory) on GPU 0 for every rank.
#pragma once

#include "cuda/current_device.h"

namespace ringreduce::cuda {

class DeviceScope {
 public:
  explicit DeviceScope(int device) : previous_(currentDevice()) {
    if (previous_ != device) {
      makeCurrent(device);
      changed_ = previous_ >= 0;
    }
  }
  ~DeviceScope() {
    if (!changed_ || !hasPrimaryContext(previous_)) return;
    try {
      makeCurrent(previous_);
    } catch (...) {
      // The caller's device stays ours: harmless, and a destructor must not throw.
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const int previous_;
  bool changed_ = false;
};

}  // namespace ringreduce::cuda
