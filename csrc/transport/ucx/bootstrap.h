// Address exchange through the group's store: every rank publishes its UCX
// worker address and reads everyone else's.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

// Returns the worker addresses of all ranks, indexed by rank. Keys carry a
// generation number so that destroy_process_group() followed by a new
// init_process_group() on the same store (torchrun's agent store) never reads
// the addresses of the previous, destroyed group.
// `generation` (optional) receives the number that keys of this group carry.
std::vector<std::vector<uint8_t>> exchangeAddresses(KeyValueStore& store, int rank, int size,
                                                    const std::vector<uint8_t>& myAddress,
                                                    std::chrono::milliseconds timeout,
                                                    int64_t* generation = nullptr);

}  // namespace ringreduce
