#include "algorithms/ring_reduce.h"

#include "algorithms/direct_exchange.h"
#include "algorithms/ring_reduction.h"
#include "core/partition.h"
#include "transport/tag.h"

namespace ringreduce {

void ringReduce(UcxTransport& transport, const OpContext& op, void* data, size_t count,
                DataType type, ReduceOp reduceOp, int root, const Config& config,
                Workspace& workspace) {
  const int n = transport.size();
  ringReduceScatter(transport, op, data, count, type, reduceOp, config, workspace);
  if (n == 1 || count == 0) return;
  const size_t esize = elementSize(type);
  BlockLayout layout;
  for (int r = 0; r < n; ++r) {
    const Range chunk = chunkOf(count, n, r);
    layout.offsets.push_back(chunk.offset * esize);
    layout.bytes.push_back(chunk.count * esize);
  }
  char* base = static_cast<char*>(data);
  const int rank = transport.rank();
  // The reduce-scatter uses slots below (n-1) * segments <= kMaxSlot / 2, so
  // the last slot is free for the gather.
  gatherToRoot(transport, op, base + layout.offsets[rank], layout.bytes[rank], base, layout, root,
               kMaxSlot);
}

}  // namespace ringreduce
