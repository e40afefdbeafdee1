// How a group that mapped its peers' device memory lets go of it: a rank
// frees what it exported only once no peer maps it any more.
#pragma once

#include <chrono>

#include "core/base/record_exchange.h"

namespace ringreduce::cuda {

class PeerMappings;
class StreamTracker;

// Waits up to `limit` for every stream the group's work ran on, closes the
// mappings, then tells every rank of the group whether it did. True only
// where every rank did: the one point at which the caller may free what its
// peers mapped. Every rank takes part in the exchange whatever happened on
// it, so no rank waits there for one that gave up.
bool unmapWithEveryRank(PeerMappings& mappings, const StreamTracker& streams, int device,
                        int groupSize, const RecordExchange& exchange,
                        std::chrono::milliseconds limit);

}  // namespace ringreduce::cuda
