#include "algorithms/reduce_to_root.h"

#include "algorithms/direct_exchange.h"
#include "algorithms/ring_allreduce.h"
#include "core/partition.h"
#include "transport/tag.h"

namespace ringreduce {

void ringReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root) {
  const int n = comm.size();
  const size_t count = args.count;
  ringReduceScatter(comm, op, args);
  if (n == 1 || count == 0) return;
  const size_t esize = elementSize(args.type);
  BlockLayout layout;
  for (int r = 0; r < n; ++r) {
    const Range chunk = chunkOf(count, n, r);
    layout.offsets.push_back(chunk.offset * esize);
    layout.bytes.push_back(chunk.count * esize);
  }
  char* base = static_cast<char*>(args.data);
  const int rank = comm.rank();
  // The reduce-scatter uses slots below (n-1) * segments <= kMaxSlot / 2, so
  // the last slot is free for the gather.
  gatherToRoot(comm, op, {base + layout.offsets[rank], layout.bytes[rank], base, layout, root,
                         kMaxSlot});
}

}  // namespace ringreduce
