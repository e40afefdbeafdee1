// The full-collective check (RINGREDUCE_CHECK_COLLECTIVES=1 or
// TORCH_DISTRIBUTED_DEBUG=DETAIL): before each collective the ranks allgather
// a fingerprint of what they are about to do, and if any differs every rank
// raises the same error naming the ranks and what differs, instead of a hang
// or silently wrong data. It costs one small allgather per collective.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

struct CollectiveFingerprint {
  int32_t opType = -1;
  int32_t dtype = -1;
  int64_t numel = -1;
  int64_t root = -1;
  int32_t reduceOp = -1;
  int32_t reserved = 0;

  bool operator==(const CollectiveFingerprint& o) const {
    return opType == o.opType && dtype == o.dtype && numel == o.numel && root == o.root &&
           reduceOp == o.reduceOp;
  }
};

// The fingerprint as one 32-bit word (FNV-1a of its fields): what a device
// collective carries in its flags, so that a rank running a different
// collective is seen by its peers on the device (cuda/signal/).
uint32_t fingerprintWord(const CollectiveFingerprint& fp);

// Throws InvalidArgument on every rank when fingerprints differ; `describe`
// renders one fingerprint for the message.
void verifySameCollective(const Comm& comm, const OpContext& op,
                          const CollectiveFingerprint& mine,
                          const std::function<std::string(const CollectiveFingerprint&)>& describe);

}  // namespace ringreduce
