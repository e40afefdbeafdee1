#include "algorithms/ring_allgather.h"

#include <cstring>
#include <vector>

#include "core/partition.h"
#include "transport/tag.h"

namespace ringreduce {

void ringAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  Transport& transport = comm.transport;
  const size_t blockBytes = args.blockBytes;
  const void* input = args.input;
  const int n = transport.size();
  const int rank = transport.rank();
  char* out = static_cast<char*>(args.output);
  char* mine = out + static_cast<size_t>(rank) * blockBytes;
  // Payload-free (the simulator): no buffers, sizes only.
  if (input != mine && blockBytes > 0 && !comm.config.payloadFree) {
    std::memmove(mine, input, blockBytes);
  }
  if (n == 1 || blockBytes == 0) return;

  const int left = (rank - 1 + n) % n;
  const int right = (rank + 1) % n;
  const SegmentPlan plan =
      planSegments(blockBytes, 1, comm.config.segmentBytes, (kMaxSlot + 1) / (n - 1));
  const Range whole{0, blockBytes};
  auto block = [&](int index) { return out + static_cast<size_t>((index % n + n) % n) * blockBytes; };
  auto tag = [&](int source, int step, size_t k) {
    return makeTag(source, op.seq, static_cast<uint32_t>(step * plan.segments + k));
  };

  // Step t forwards block r-t and receives block r-t-1, straight into place.
  std::vector<std::vector<Request>> recvs(static_cast<size_t>(n - 1));
  for (int t = 0; t < n - 1; ++t) {
    for (size_t k = 0; k < plan.segments; ++k) {
      const Range seg = segmentOf(whole, plan.elemsPerSegment, k);
      recvs[t].push_back(
          transport.irecv(left, tag(left, t, k), block(rank - t - 1) + seg.offset, seg.count, op));
    }
  }
  std::vector<Request> sends;
  for (size_t k = 0; k < plan.segments; ++k) {
    const Range seg = segmentOf(whole, plan.elemsPerSegment, k);
    sends.push_back(transport.isend(right, tag(rank, 0, k), mine + seg.offset, seg.count, op));
  }
  for (int t = 0; t < n - 1; ++t) {
    for (size_t k = 0; k < plan.segments; ++k) {
      transport.wait(recvs[t][k], op);
      if (t + 1 < n - 1) {
        const Range seg = segmentOf(whole, plan.elemsPerSegment, k);
        sends.push_back(transport.isend(right, tag(rank, t + 1, k),
                                        block(rank - t - 1) + seg.offset, seg.count, op));
      }
    }
  }
  transport.waitAll(sends, op);
}

}  // namespace ringreduce
