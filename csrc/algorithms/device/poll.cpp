// Waiting for device work and the network at once (poll.h)
#include "algorithms/device/poll.h"

#include <algorithm>

#include "core/base/core_yield.h"

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

void DevicePoller::moved(Clock::time_point passStart) {
  t_.spinBudget().moved(passStart);  // what the pass did after its start is work
  moved();
}

bool DevicePoller::idlePass(DeviceSteps& steps, DeviceSteps::Ticket ticket) {
  SpinBudget& spin = t_.spinBudget();
  const auto now = spin.now();  // the pass's one read, before it looks
  if (t_.progress() > 0) {
    moved(now);
    return false;
  }
  if (t_.aborted()) {
    throw TransportError("ringreduce: " + op_.describe() + " on rank " + std::to_string(t_.rank()) +
                         ": " + t_.abortReason());
  }
  // A collective cannot finish without every rank: any death ends it.
  t_.checkPeersAlive(-1, op_);
  if (now >= op_.deadline) return true;
  // Oversubscribed (RINGREDUCE_SPIN_YIELD), spinning means yielding, and
  // only while yields are cheap (core/base/core_yield.h).
  const bool yields = t_.config().spinYields;
  if (yields && !yieldingPays()) {
    spin.abandon();
  } else if (spin.keepSpinning(now)) {
    if (yields) yieldCore();
    return false;
  }
  // The spin is over: sleep until the device passes the ticket (it makes
  // the wake fd readable), the network has news, or 100 ms pass (to notice
  // abort()), within the deadline. Asked for only now, so a spin that
  // finds the ticket done costs the device nothing.
  const int wake = steps.wakeFd(ticket);
  if (!steps.done(ticket)) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(op_.deadline - now).count() + 1;
    t_.sleepUntilEvent(wake, static_cast<int>(std::min<long long>(remaining, 100)));
  }
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
