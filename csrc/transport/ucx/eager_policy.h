// Which messages to a peer go eagerly instead of by rendezvous, from the UCX
// transports of the endpoint to it.
//
// UCX 1.13 switches to rendezvous above 8 KiB on shared memory and 20 KiB on
// TCP (UCX_RNDV_THRESH=auto), for every message. A rendezvous pays a round
// trip (request, answer, completion) before and after the data, and buys
// one copy fewer only where the rendezvous lane reads the peer's memory
// directly (CMA, knem, xpmem; RDMA). Measured (benchmarks/RESULTS.md,
// "Eager messages below the segment, and on TCP"):
// - shared memory, world 2: allreduces of 16 KiB-512 KiB, whose every step
//   is one message below 256 KiB, took 1.5-2x as long by rendezvous as
//   eagerly; from 1 MiB on (pipelines of 256 KiB segments) the single
//   copy wins, eager was up to 25% slower at 4-64 MiB;
// - TCP (the emulated clusters of docs/SCALING.md, 1 Gbit/s links):
//   TCP's rendezvous copies through the socket like eager does, and its
//   handshake waits behind the data queued in the other direction:
//   halving/doubling at 16 MiB, which exchanges 8 MiB halves both ways on
//   one connection, took 1.4-1.9x as long as eagerly, the ring 1.05-1.1x.
// UCX's per-message switch is UCP_OP_ATTR_FLAG_FAST_CMPL: such a send is
// eager up to UCX_RNDV_SEND_NBR_THRESH, which the data path's context sets
// to "inf" (unless the user set it), so the limits below are ours.
#pragma once

#include <cstddef>
#include <string>

namespace ringreduce {

enum class EagerPolicy {
  UcxDecides,   // RDMA and anything unknown: UCX's own thresholds
  BelowLimit,   // shared memory with a copy-free rendezvous lane: eager below the limit
  UpToTcpCap,   // a rendezvous that copies anyway (TCP, or no RMA lane): eager up to kTcpEagerCap
};

// The largest message sent eagerly where the rendezvous copies anyway. A
// receiver that has not posted its receive yet buffers an eager message
// whole, so a huge one (a point-to-point send of gigabytes) still takes the
// rendezvous, which waits for the receive.
constexpr size_t kTcpEagerCap = 64ull << 20;

// The policy for an endpoint from its ucp_ep_print_info text (the lane lines,
// e.g. "lane[1]:  5:cma/memory.0 md[4] -> md[4]/cma/sysdev[255] rma_bw#0";
// newlines may have been replaced by spaces).
EagerPolicy eagerPolicyOf(const std::string& endpointInfo);

// Whether a send of `bytes` goes eagerly (`limit`: RINGREDUCE_EAGER_BYTES).
bool sendsEagerly(EagerPolicy policy, size_t bytes, size_t limit);

const char* nameOf(EagerPolicy policy);

}  // namespace ringreduce
