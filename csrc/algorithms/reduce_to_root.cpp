// Reduce to one root, in the reduce-scatter form the selection picks (reduce_to_root.h)
#include "algorithms/reduce_to_root.h"

#include <cstring>

#include "algorithms/direct_allreduce.h"
#include "algorithms/pairwise_exchange.h"
#include "algorithms/scatter_gather.h"
#include "core/plan/partition.h"

namespace ringreduce {

void hostReduce(const Comm& comm, const OpContext& op, const ReductionArgs& args, int root,
                const ReduceScratch& scratch) {
  const int n = comm.size();
  const int rank = comm.rank();
  if (n == 1 || args.count == 0) return;  // AVG over one rank is the identity
  const size_t esize = elementSize(args.type);
  const bool payload = !comm.config.payloadFree;
  const size_t bytes = args.count * esize;
  if (scatterGatherIsDirect(comm, op, bytes)) {
    noteCallerBuffer(comm, args.data, bytes);  // peers read it in place
    return directReduce(comm, op, args, root, scratch.chunk);
  }
  // The other forms work in place; the root's buffer is the result.
  const OpContext scatterOp = op.part(0);
  const Range mine = chunkOf(args.count, n, rank);
  void* work = args.data;
  if (rank != root) {
    work = scratch.copy;
    if (payload && work != args.data) std::memcpy(work, args.data, bytes);
  }
  hostReduceScatter(comm, scatterOp, {work, args.count, args.type, args.op});
  const char* reduced = payload ? static_cast<const char*>(work) + mine.offset * esize : nullptr;
  BlockLayout layout;
  for (int r = 0; r < n; ++r) {
    const Range chunk = chunkOf(args.count, n, r);
    layout.offsets.push_back(chunk.offset * esize);
    layout.bytes.push_back(chunk.count * esize);
  }
  // On the root, its own chunk is already in place.
  gatherToRoot(comm, op.part(1),
               {reduced, mine.count * esize, payload ? args.data : nullptr, layout, root, 0});
}

}  // namespace ringreduce
