// Dissemination barrier over the transport (barrier.h)
#include "algorithms/barrier.h"

#include "transport/tag.h"

namespace ringreduce {

void disseminationBarrier(const Comm& comm, const OpContext& op) {
  Transport& transport = comm.transport;
  const int n = transport.size();
  const int rank = transport.rank();
  char unused = 0;
  uint32_t round = 0;
  // In round i a rank signals rank + 2^i and hears from rank - 2^i; after the
  // last round every rank has (transitively) heard from all others.
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const int to = (rank + distance) % n;
    const int from = (rank - distance % n + n) % n;
    Request recv = transport.irecv(from, makeTag(from, op.seq, round), &unused, 0, op);
    Request send = transport.isend(to, makeTag(rank, op.seq, round), &unused, 0, op);
    transport.wait(recv, op);
    transport.wait(send, op);
  }
}

}  // namespace ringreduce
