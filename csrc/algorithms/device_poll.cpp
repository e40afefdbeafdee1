#include "algorithms/device_poll.h"

#include "transport/core_yield.h"

namespace ringreduce {

DevicePoller::DevicePoller(Transport& transport, const OpContext& op)
    : t_(transport), op_(op) {
  t_.spinBudget().startWait();
}

void DevicePoller::moved() {
  SpinBudget& spin = t_.spinBudget();
  spin.finishWait();  // it came while this thread polled, if it did
  spin.startWait();
}

bool DevicePoller::idlePass() {
  if (t_.progress() > 0) {
    moved();
    return false;
  }
  if (t_.aborted()) {
    throw TransportError("ringreduce: " + op_.describe() + " on rank " + std::to_string(t_.rank()) +
                         ": " + t_.abortReason());
  }
  // A collective cannot finish without every rank: any death ends it.
  t_.checkPeersAlive(-1, op_);
  const auto now = Clock::now();
  if (now >= op_.deadline) return true;
  // Oversubscribed (RINGREDUCE_SPIN_YIELD), spinning means yielding, and
  // only while yields are cheap (transport/core_yield.h).
  const bool yields = t_.config().spinYields;
  SpinBudget& spin = t_.spinBudget();
  if (yields && !yieldingPays()) {
    spin.abandon();
  } else if (spin.keepSpinning(now)) {
    if (yields) yieldCore();
    return false;
  }
  // A device segment takes microseconds; a ticket still open after the spin
  // waits behind other work on the device (the caller's, before a fence):
  // a millisecond's sleep costs little there, and the network wakes it.
  t_.sleepUntilEvent(-1, 1);
  spin.startWait();
  return false;
}

TimeoutError DevicePoller::timeout(const std::string& what) const {
  // The words of Transport::describeTimeout, which users' tooling looks for.
  return TimeoutError("ringreduce: " + op_.describe() + " timed out after " +
                      std::to_string(op_.timeout.count()) + " ms on rank " +
                      std::to_string(t_.rank()) +
                      " (operation timeout reached): still waiting for the device to " + what +
                      " (is the device stuck, or busy with other work?)");
}

}  // namespace ringreduce
