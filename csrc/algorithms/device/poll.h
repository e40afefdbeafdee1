// Waiting for device work and the network at once. While a ticket is
// outstanding the host polls both, spinning for as long as the transport's
// spin budget says (core/base/spin_budget.h); then it sleeps on the
// transport's event fd together with the steps' wake fd, which the device
// itself makes readable once it has passed the ticket (DeviceSteps::wakeFd):
// woken by whichever comes first, the network or the device, never by a
// fixed slice. Every idle pass checks what a transport wait checks:
// abort(), the peers' liveness, the op's deadline, with the same errors.
#pragma once

#include <string>

#include "algorithms/device/ring.h"
#include "core/base/errors.h"
#include "transport/transport.h"

namespace ringreduce {

class DevicePoller {
 public:
  DevicePoller(Transport& transport, const OpContext& op);

  // The clock of the spin: a loop reads its pass's start here.
  Clock::time_point now() const { return t_.spinBudget().now(); }
  // After a pass that brought something new (the event this wait spun
  // for): spin again before sleeping. `passStart`: the loop's read before
  // the pass looked, when the pass did work after it (SpinBudget::moved).
  void moved();
  void moved(Clock::time_point passStart);
  // After a pass that brought nothing, while `ticket` is the oldest work
  // the schedule waits for: progresses the transport, throws
  // TransportError (abort, a dead peer, a peer that gave up) or, at the
  // deadline, TimeoutError saying that the device has not finished `what`
  // (called only then, so that building it costs nothing meanwhile).
  template <typename What>
  void idle(DeviceSteps& steps, DeviceSteps::Ticket ticket, const What& what) {
    if (idlePass(steps, ticket)) throw timeout(what());
  }
  // Polls `ticket` (and the transport) until the device has finished it.
  template <typename What>
  void waitFor(DeviceSteps& steps, DeviceSteps::Ticket ticket, const What& what) {
    while (!steps.done(ticket)) idle(steps, ticket, what);
    moved();
  }

 private:
  // One idle pass; true when the deadline has passed.
  bool idlePass(DeviceSteps& steps, DeviceSteps::Ticket ticket);
  TimeoutError timeout(const std::string& what) const;

  Transport& t_;
  const OpContext& op_;
};

}  // namespace ringreduce
