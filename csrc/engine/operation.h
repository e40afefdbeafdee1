// One queued operation of a group, as the engine runs it: a collective (a
// body that runs the algorithms) or a send/recv (a post that starts it), and
// the callbacks through which its outcome reaches whoever issued it.
//
// The engine knows nothing of torch: the backend implements the callbacks
// with its c10d::Work, and with CUDA streams and host staging for CUDA
// tensors (the transfers then run with the group's internal stream current,
// between copies of the data to and from the host).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

#include "algorithms/checks/collective_check.h"
#include "core/base/op_context.h"
#include "core/observe/timeline.h"
#include "engine/runner.h"
#include "transport/transport.h"

namespace ringreduce {

class OperationCallbacks {
 public:
  virtual ~OperationCallbacks() = default;
  // The operation begins to run (its Work's start time).
  virtual void started() {}
  // Under the engine's lock: a coalescing block holds it until the block
  // ends (true), or the block ended and it is queued (false). A wait for
  // it meanwhile could never end.
  virtual void heldInBlock(bool held) {}
  // Executor thread. Around the transfers: what must stay alive while they
  // run (a CUDA tensor's internal stream made current), or null.
  virtual std::shared_ptr<void> enterDevice() { return nullptr; }
  // Before the transfers: staged inputs reach the host (bounded by op's deadline).
  virtual void stageIn(const OpContext& op) {}
  // After the transfers succeeded: staged outputs go back to the device.
  virtual void stageOut() {}
  // Exactly one of these, once. sourceRank: for a receive, who sent it.
  virtual void succeeded(int sourceRank) = 0;
  virtual void failed(std::exception_ptr error) = 0;
  // The error it failed with, or null.
  virtual std::exception_ptr error() const = 0;
  // A wrapper's wrapped callbacks (the engine's trace wraps the backend's);
  // null for the backend's own.
  virtual std::shared_ptr<OperationCallbacks> wrapped() const { return nullptr; }
};

// A posted send or recv, and what to do once it completes (copy a staged
// receive back into the caller's tensor).
struct PostedMessage {
  Request request;
  std::function<void()> finish;
};

struct Operation {
  using Body = std::function<void(const OpContext&)>;
  using Post = std::function<PostedMessage(const OpContext&)>;

  std::shared_ptr<OperationCallbacks> callbacks;
  const char* name = "collective";
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{0};
  // Who is expected to run it (executor.h).
  Runner runner = Runner::CallerOrWorker;
  Body body;  // a collective
  Post post;  // a send or recv
  // Consecutive sequence numbers it uses (OpContext::part): an operation
  // may run several collectives.
  uint64_t seqCount = 1;
  // Whether the engine posts the neighbour check around the body. Off for
  // collectives whose ranks meet on the device with the fingerprint in the
  // flags (cuda/signal/): one rank may run such a collective directly
  // (Engine::runOnCaller, no host message) while its peer queues it.
  bool neighbourCheck = true;
  uint8_t fingerprint = 0;          // the 8 bits in every tag
  uint32_t fingerprintWord = 0;     // the hash they fold (OpContext::fingerprintWord)
  CollectiveFingerprint identity;   // the whole, for the neighbour check
  // Its timeline event while RINGREDUCE_TIMELINE is set, else null.
  std::shared_ptr<TimelineOp> timeline;

  // The deadline starts when the operation starts, not when it was queued.
  OpContext context() const {
    OpContext op(name, seq, timeout);
    op.pointToPoint = static_cast<bool>(post);
    op.fingerprint = fingerprint;
    op.fingerprintWord = fingerprintWord;
    return op;
  }
};

}  // namespace ringreduce
