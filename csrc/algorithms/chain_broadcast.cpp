// Pipelined chain broadcast: segments passed down a chain from the root (chain_broadcast.h)
#include "algorithms/chain_broadcast.h"

#include <vector>

#include "core/plan/partition.h"
#include "transport/tag.h"

namespace ringreduce {

void chainBroadcast(const Comm& comm, const OpContext& op, const BroadcastArgs& args) {
  Transport& transport = comm.transport;
  const size_t bytes = args.bytes;
  const int root = args.root;
  const int n = transport.size();
  if (n == 1 || bytes == 0) return;
  const int rank = transport.rank();
  // Position along the chain that starts at the root.
  const int position = (rank - root + n) % n;
  const int previous = (rank - 1 + n) % n;
  const int next = (rank + 1) % n;
  const bool receives = position != 0;
  const bool forwards = position != n - 1;
  // On one host the next rank's rendezvous reads this rank's tensor with
  // cma, which pins every page it reads: one of 4 MiB or more that comes
  // back goes onto 2 MiB pages (core/base/huge_pages.h), as the channel's
  // large broadcast does the root's.
  if (forwards) noteCallerBuffer(comm, args.data, bytes);

  // Segments pay where a rank forwards what it received while the next
  // arrives. A chain of two has nobody to forward to: one message, one
  // rendezvous (on one host, the receiver's single read of the root's
  // memory), where segments cost a handshake and a wait each (16 MiB in
  // 256 KiB segments took 1.16-1.19x Open MPI's Bcast).
  const size_t segmentBytes = n == 2 ? bytes : comm.config.segmentBytes;
  const SegmentPlan plan = planSegments(bytes, 1, segmentBytes, kMaxSlot + 1);
  const Range whole{0, bytes};
  char* base = static_cast<char*>(args.data);

  std::vector<Request> recvs;
  if (receives) {
    for (size_t k = 0; k < plan.segments; ++k) {
      const Range seg = segmentOf(whole, plan.elemsPerSegment, k);
      recvs.push_back(transport.irecv(previous, makeTag(previous, op.seq, static_cast<uint32_t>(k)),
                                      base + seg.offset, seg.count, op));
    }
  }
  std::vector<Request> sends;
  for (size_t k = 0; k < plan.segments; ++k) {
    if (receives) transport.wait(recvs[k], op);
    if (forwards) {
      const Range seg = segmentOf(whole, plan.elemsPerSegment, k);
      sends.push_back(transport.isend(next, makeTag(rank, op.seq, static_cast<uint32_t>(k)),
                                      base + seg.offset, seg.count, op));
    }
  }
  transport.waitAll(sends, op);
}

}  // namespace ringreduce
