// gloo's monitored barrier: rank 0 waits for every other rank in time (monitored_barrier.h)
#include "algorithms/monitored_barrier.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {
constexpr uint32_t kArriveSlot = 0;
constexpr uint32_t kReleaseSlot = 1;
}  // namespace

void monitoredBarrier(const Comm& comm, const OpContext& op, bool waitAllRanks) {
  Transport& transport = comm.transport;
  const int n = transport.size();
  const int rank = transport.rank();
  char unused = 0;
  if (rank != 0) {
    // Wait a little longer than rank 0 does, so that rank 0, which knows who
    // is missing, is the one to time out and tell everyone.
    OpContext patient = op;
    const auto grace = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1000),
                                                           op.timeout / 10);
    patient.deadline += grace;
    Request arrive = transport.isend(0, makeTag(rank, op.seq, kArriveSlot), &unused, 0, patient);
    Request release = transport.irecv(0, makeTag(0, op.seq, kReleaseSlot), &unused, 0, patient);
    transport.wait(arrive, patient);
    if (!transport.waitUntilDeadline(release, patient)) {
      throw TimeoutError("ringreduce: " + op.describe() + " on rank " +
                         std::to_string(rank) + ": rank 0 did not release it within " +
                         std::to_string(op.timeout.count()) +
                         " ms (rank 0 reports the ranks that did not arrive)");
    }
    return;
  }
  std::vector<Request> arrivals;
  for (int peer = 1; peer < n; ++peer) {
    arrivals.push_back(transport.irecv(peer, makeTag(peer, op.seq, kArriveSlot), &unused, 0, op));
  }
  std::vector<int> missing;
  for (int peer = 1; peer < n; ++peer) {
    if (transport.waitUntilDeadline(arrivals[peer - 1], op)) continue;
    missing.push_back(peer);
    if (!waitAllRanks) break;
  }
  if (!missing.empty()) {
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw TimeoutError("ringreduce: " + op.describe() + " on rank 0: rank(s) " +
                       ranks + " did not reach the barrier within " +
                       std::to_string(op.timeout.count()) + " ms" +
                       (waitAllRanks ? "" : " (wait_all_ranks=True lists every missing rank)"));
  }
  std::vector<Request> releases;
  for (int peer = 1; peer < n; ++peer) {
    releases.push_back(transport.isend(peer, makeTag(0, op.seq, kReleaseSlot), &unused, 0, op));
  }
  transport.waitAll(releases, op);
}

}  // namespace ringreduce
