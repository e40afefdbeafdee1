#include "cuda/ipc/unmap_with_every_rank.h"

#include <cstdint>
#include <exception>
#include <vector>

#include "cuda/ipc/ipc_memory.h"
#include "cuda/stream_tracker.h"

namespace ringreduce::cuda {

bool unmapWithEveryRank(PeerMappings& mappings, const StreamTracker& streams, int device,
                        int groupSize, const RecordExchange& exchange,
                        std::chrono::milliseconds limit) {
  bool closedHere = false;
  try {
    // Closing under a kernel that still reads a mapping is undefined: the
    // work goes first, and a stream that never finishes keeps them open.
    closedHere = streams.waitAll(device, limit);
    if (closedHere) mappings.closeAll();
  } catch (const std::exception&) {
    closedHere = false;
  }
  const uint8_t mine = closedHere ? 1 : 0;
  std::vector<uint8_t> all(groupSize);
  try {
    exchange(&mine, all.data(), 1);
  } catch (const std::exception&) {
    return false;  // not heard from every rank: one may still map ours
  }
  for (uint8_t closed : all) {
    if (!closed) return false;
  }
  return true;
}

}  // namespace ringreduce::cuda
