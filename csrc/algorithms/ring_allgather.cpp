// Pipelined ring allgather of equal-sized byte blocks (ring_allgather.h)
#include "algorithms/ring_allgather.h"

#include <cstring>
#include <vector>

#include "core/plan/chunk_layout.h"
#include "core/plan/partition.h"
#include "transport/tag.h"

namespace ringreduce {

void ringAllgather(const Comm& comm, const OpContext& op, const AllgatherArgs& args) {
  const size_t blockBytes = args.blockBytes;
  const int n = comm.size();
  char* out = static_cast<char*>(args.output);
  char* mine = out + static_cast<size_t>(comm.rank()) * blockBytes;
  // Payload-free (the simulator): no buffers, sizes only.
  if (args.input != mine && blockBytes > 0 && !comm.config.payloadFree) {
    std::memmove(mine, args.input, blockBytes);
  }
  if (n == 1 || blockBytes == 0) return;
  ringAllgatherInPlace(comm, op, out, ChunkLayout::ofSizes(std::vector<size_t>(n, blockBytes)));
}

void ringAllgatherInPlace(const Comm& comm, const OpContext& op, void* data,
                          const ChunkLayout& chunks) {
  ringAllgatherInPlace(comm, op, data, chunks, 0, kRingPhaseSlots);
}

void ringAllgatherInPlace(const Comm& comm, const OpContext& op, void* data,
                          const ChunkLayout& chunks, uint32_t firstSlot, uint32_t slots) {
  Transport& transport = comm.transport;
  const int n = transport.size();
  const int rank = transport.rank();
  if (n == 1 || chunks.total() == 0) return;
  char* out = comm.config.payloadFree ? nullptr : static_cast<char*>(data);

  const int left = (rank - 1 + n) % n;
  const int right = (rank + 1) % n;
  // Every chunk gets the largest one's number of segments (a smaller
  // chunk's last ones are short or empty), so both ends agree on the slots;
  // they stay within the slots given.
  const SegmentPlan plan = planSegments(chunks.largest(), 1, comm.config.segmentBytes, slots / (n - 1));
  auto segment = [&](int index, size_t k) {
    return segmentOf(chunks.chunk((index % n + n) % n), plan.elemsPerSegment, k);
  };
  auto at = [&](const Range& r) { return out == nullptr ? nullptr : out + r.offset; };
  auto tag = [&](int source, int step, size_t k) {
    return makeTag(source, op.seq, firstSlot + static_cast<uint32_t>(step * plan.segments + k));
  };

  // Step t forwards chunk r-t and receives chunk r-t-1, straight into place.
  std::vector<std::vector<Request>> recvs(static_cast<size_t>(n - 1));
  for (int t = 0; t < n - 1; ++t) {
    for (size_t k = 0; k < plan.segments; ++k) {
      const Range seg = segment(rank - t - 1, k);
      recvs[t].push_back(transport.irecv(left, tag(left, t, k), at(seg), seg.count, op));
    }
  }
  std::vector<Request> sends;
  for (size_t k = 0; k < plan.segments; ++k) {
    const Range seg = segment(rank, k);
    sends.push_back(transport.isend(right, tag(rank, 0, k), at(seg), seg.count, op));
  }
  for (int t = 0; t < n - 1; ++t) {
    for (size_t k = 0; k < plan.segments; ++k) {
      transport.wait(recvs[t][k], op);
      if (t + 1 < n - 1) {
        const Range seg = segment(rank - t - 1, k);
        sends.push_back(transport.isend(right, tag(rank, t + 1, k), at(seg), seg.count, op));
      }
    }
  }
  transport.waitAll(sends, op);
}

}  // namespace ringreduce
