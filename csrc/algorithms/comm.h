// What every algorithm runs on: the group's transport, its settings and its
// reusable scratch memory. Algorithms take a Comm, the op being run (name,
// sequence number, deadline) and one argument struct of their own.
#pragma once

#include "algorithms/workspace.h"
#include "core/config/config.h"
#include "transport/transport.h"

namespace ringreduce {

class AllreduceSelector;
class AllreduceTuner;
class HostChannel;

struct Comm {
  Transport& transport;
  const Config& config;
  Workspace& workspace;
  // Chooses the allreduce algorithm (algorithms/allreduce.h); null: no
  // knowledge of the nodes, as in a subgroup of a two-level allreduce.
  AllreduceSelector* selector = nullptr;
  // RINGREDUCE_AUTOTUNE: picks the settings of each host allreduce
  // (algorithms/tuning/autotune.h); null: the config as it is.
  AllreduceTuner* tuner = nullptr;
  // The group's shared-memory channel between its ranks on one host
  // (transport/host/host_channel.h); null where the group spans hosts or
  // could not set one up.
  HostChannel* channel = nullptr;
  // The waiting thread's spin budget where it is not the transport's: a
  // caller running a collective past the queue (Engine::runOnCaller) does not
  // drive the transport, so it waits with its own (HostChannel::callerSpin).
  SpinBudget* waitBudget = nullptr;

  // The transport where this thread drives it (a queued collective), for a
  // wait outside it that must keep it moving (HostChannel::awaitPeers);
  // null on a caller's thread past the queue, where the worker drives it.
  Transport* drivenTransport() const { return waitBudget ? nullptr : &transport; }

  // Whose spin budget a wait of this collective uses.
  SpinBudget& spinBudget() const { return waitBudget ? *waitBudget : transport.spinBudget(); }

  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
};

// A collective is about to move the caller's [data, data + bytes): a large
// buffer that comes back goes on huge pages (core/base/huge_pages.h).
inline void noteCallerBuffer(const Comm& comm, const void* data, size_t bytes) {
  if (comm.config.hugePages) comm.workspace.callerBuffers().noteCallerBuffer(data, bytes);
}

}  // namespace ringreduce
