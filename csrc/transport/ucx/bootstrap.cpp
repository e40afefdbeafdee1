// Address exchange through the group's store (bootstrap.h)
#include "transport/ucx/bootstrap.h"

#include <string>

#include "core/base/errors.h"

namespace ringreduce {

std::vector<std::vector<uint8_t>> exchangeAddresses(KeyValueStore& store, int rank, int size,
                                                    const std::vector<uint8_t>& myAddress,
                                                    std::chrono::milliseconds timeout,
                                                    int64_t* generationOut) {
  // Every rank of generation g joins before any rank can finish generation g
  // (it needs all addresses first), so (joins - 1) / size numbers generations.
  const int64_t joined = store.add("ringreduce/joined/size" + std::to_string(size), 1);
  const int64_t generation = (joined - 1) / size;
  if (generationOut != nullptr) *generationOut = generation;
  const std::string prefix = "ringreduce/gen" + std::to_string(generation) + "/addr/";

  store.set(prefix + std::to_string(rank), myAddress);
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) {
      addresses[peer] = myAddress;
      continue;
    }
    try {
      addresses[peer] = store.get(prefix + std::to_string(peer), timeout);
    } catch (const std::exception& e) {
      throw TimeoutError("ringreduce: rank " + std::to_string(rank) +
                         " could not get the address of rank " + std::to_string(peer) +
                         " from the store during process group creation within " +
                         std::to_string(timeout.count()) + " ms (" + e.what() +
                         "). Did every rank call init_process_group?");
    }
    if (addresses[peer].empty()) {
      throw TransportError("ringreduce: rank " + std::to_string(peer) +
                           " published an empty worker address");
    }
  }
  return addresses;
}

}  // namespace ringreduce
