#include "algorithms/collective_check.h"

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

}  // namespace ringreduce
