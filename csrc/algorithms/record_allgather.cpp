// Every rank's small record to every rank in one hop (record_allgather.h)
#include "algorithms/record_allgather.h"

#include <cstring>
#include <vector>

#include "core/base/errors.h"
#include "transport/tag.h"

namespace ringreduce {

void exchangeRecords(const Comm& comm, const OpContext& op, uint32_t round,
                     const void* mine, void* all, size_t bytes, std::vector<bool>* arrived) {
  Transport& transport = comm.transport;
  if (round > kMaxSlot) throw Error("ringreduce: " + op.describe() + ": too many exchange rounds");
  const int n = transport.size();
  const int rank = transport.rank();
  char* out = static_cast<char*>(all);
  if (out + static_cast<size_t>(rank) * bytes != mine) {
    std::memmove(out + static_cast<size_t>(rank) * bytes, mine, bytes);
  }
  std::vector<Request> requests;
  requests.reserve(2 * static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    requests.push_back(transport.irecv(q, makeTag(q, op.seq, round),
                                       out + static_cast<size_t>(q) * bytes, bytes, op));
  }
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    requests.push_back(transport.isend(q, makeTag(rank, op.seq, round), mine, bytes, op));
  }
  // The receives come first in `requests`, in rank order without mine.
  const auto noteArrivals = [&] {
    if (arrived == nullptr) return;
    arrived->assign(static_cast<size_t>(n), false);
    for (int q = 0, i = 0; q < n; ++q) {
      if (q == rank) continue;
      Request& receive = requests[static_cast<size_t>(i++)];
      try {
        transport.test(receive, op);  // a record that came behind the failed wait
      } catch (const std::exception&) {
        // It came, but wrong: the peer entered something all the same.
      }
      (*arrived)[static_cast<size_t>(q)] = receive.done;
    }
  };
  try {
    transport.waitAll(requests, op);
  } catch (const std::exception&) {
    noteArrivals();
    throw;
  }
  noteArrivals();
}

}  // namespace ringreduce
