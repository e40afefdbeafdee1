// The full-collective check: every rank's fingerprint compared before the op (collective_check.h)
#include "algorithms/checks/collective_check.h"

#include <vector>

#include "algorithms/ring_allgather.h"
#include "core/base/errors.h"

namespace ringreduce {

void verifySameCollective(const Comm& comm, const OpContext& op,
                          const CollectiveFingerprint& mine,
                          const std::function<std::string(const CollectiveFingerprint&)>& describe) {
  const int n = comm.size();
  std::vector<CollectiveFingerprint> all(static_cast<size_t>(n));
  ringAllgather(comm, op, {&mine, all.data(), sizeof(CollectiveFingerprint)});
  std::string differences;
  for (int r = 1; r < n; ++r) {
    if (all[r] == all[0]) continue;
    differences += "; rank " + std::to_string(r) + " calls " + describe(all[r]);
  }
  if (differences.empty()) return;
  throw InvalidArgument("ringreduce: mismatched collectives at #" + std::to_string(op.seq) +
                        " (seen on rank " + std::to_string(comm.rank()) + "): rank 0 calls " +
                        describe(all[0]) + differences);
}

uint32_t fingerprintWord(const CollectiveFingerprint& fp) {
  const int64_t fields[] = {fp.opType, fp.dtype, fp.numel, fp.root, fp.reduceOp};
  uint32_t hash = 2166136261u;
  for (int64_t field : fields) {
    for (int i = 0; i < 8; ++i) {
      hash ^= static_cast<uint8_t>(static_cast<uint64_t>(field) >> (8 * i));
      hash *= 16777619u;
    }
  }
  return hash;
}

}  // namespace ringreduce
