// Waiting for device work and the network at once. The device tells the
// transport's event fd nothing, so while a ticket is outstanding the host
// cannot sleep in a transport wait: it polls both, spinning after each event
// for as long as the transport's spin budget says (core/base/spin_budget.h),
// then sleeping a millisecond at a time (the network still wakes it at once). Every idle pass checks what a
// transport wait checks: abort(), the peers' liveness, the op's deadline,
// with the same errors.
#pragma once

#include <string>

#include "algorithms/device_ring.h"
#include "core/base/errors.h"
#include "transport/transport.h"

namespace ringreduce {

class DevicePoller {
 public:
  DevicePoller(Transport& transport, const OpContext& op);

  // After a pass that brought something new: spin again before sleeping.
  void moved();
  // After a pass that brought nothing: progresses the transport, throws
  // TransportError (abort, a dead peer, a peer that gave up) or, at the
  // deadline, TimeoutError saying that the device has not finished `what`
  // (called only then, so that building it costs nothing meanwhile).
  template <typename What>
  void idle(const What& what) {
    if (idlePass()) throw timeout(what());
  }
  // Polls `ticket` (and the transport) until the device has finished it.
  template <typename What>
  void waitFor(DeviceSteps& steps, DeviceSteps::Ticket ticket, const What& what) {
    while (!steps.done(ticket)) idle(what);
    moved();
  }

 private:
  // One idle pass; true when the deadline has passed.
  bool idlePass();
  TimeoutError timeout(const std::string& what) const;

  Transport& t_;
  const OpContext& op_;
};

}  // namespace ringreduce
