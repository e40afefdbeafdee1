// What one message costs on a class of link, for the allreduce cost model
// (core/plan/allreduce_cost.h) and the virtual-time transport
// (transport/simulated/): the LogGP terms that matter for choosing an
// algorithm.
#pragma once

#include <string>
#include <string_view>

namespace ringreduce {

struct LinkCost {
  double alpha = 0;     // seconds from send to the first byte at the receiver
  double beta = 0;      // seconds per byte through the link (1 / bandwidth)
  double overhead = 0;  // seconds of the sender's time per message posted
};

// Defaults until measured: shared memory between two ranks of a host (UCX
// shm bidirectional, docs/../notes/UCX.md: ~8-10 GB/s, ~0.4-1 us) and a
// 25 Gbit/s Ethernet NIC with ~10 us one-way latency.
inline LinkCost defaultIntraNode() { return {1e-6, 1.0 / 8e9, 0.2e-6}; }
inline LinkCost defaultInterNode() { return {10e-6, 8.0 / 25e9, 1e-6}; }

// "100Gbit/s,5us", "150GB/s,1us", "12.5GB/s,2us,0.5us": a bandwidth
// (bit/s, b/s, B/s with k/M/G/T or Ki/Mi/Gi prefixes), a latency, and
// optionally the per-message overhead (ns, us, ms, s), in any order (the
// first time is the latency). Parts left out keep `fallback`'s value.
// Throws InvalidArgument naming `what` for anything else.
LinkCost parseLinkCost(std::string_view text, const LinkCost& fallback, const char* what);

// "8 GB/s, 1 us latency, 0.2 us per message"
std::string describeLinkCost(const LinkCost& cost);

}  // namespace ringreduce
