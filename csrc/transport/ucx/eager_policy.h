// Which messages to a peer go eagerly instead of by rendezvous
// (RINGREDUCE_EAGER_BYTES, off by default), from the UCX transports of the
// endpoint to it.
//
// UCX 1.13 switches to rendezvous above 8 KiB on shared memory and 20 KiB on
// TCP (UCX_RNDV_THRESH=auto), for every message. A rendezvous pays a
// handshake before the data and a completion after it, and saves one copy
// only where its lane reads the peer's memory (CMA, knem, xpmem; RDMA). When
// both ranks are in the collective, eager is faster (benchmarks/RESULTS.md,
// "Eager messages below the segment, and on TCP"): shared memory, world 2,
// 64 KiB-256 KiB allreduces 1.5-1.7x; TCP, where the rendezvous copies
// through the socket anyway and its handshake waits behind the data queued
// the other way, halving/doubling and direct 1.3-1.4x on the emulated
// clusters. When the receiver is busy elsewhere (DDP's backward pass beside
// the communication, cores shared), it costs CPU instead: over TCP an eager
// message goes out in UCX's 8 KiB segments, one send() each, and our threads
// used 2.3x the CPU per DDP step; with 256 KiB segments (dataPathUcxSettings,
// now the default for every TCP message) about as little as by rendezvous
// (benchmarks/RESULTS.md). On shared memory, eager below 256 KiB now and
// then cost as much (2 of 3 DDP runs; not taken apart). Posting every
// receive of a ring step first did not help, so it is not the
// unexpected-message path. So it is opt-in, for synchronous small-message
// and latency-bound multi-node work.
//
// UCX's per-message switch is UCP_OP_ATTR_FLAG_FAST_CMPL: such a send is
// eager up to UCX_RNDV_SEND_NBR_THRESH, which the data path's context sets
// to "inf" (unless the user set it), so the limit is ours.
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

namespace ringreduce {

// The largest message ever sent eagerly: a receiver that has not posted its
// receive yet buffers an eager message whole, so a huge one (a point-to-point
// send of gigabytes) still takes the rendezvous, which waits for the receive.
constexpr size_t kEagerCap = 64ull << 20;

// Whether eager sends can pay on an endpoint, from its ucp_ep_print_info
// text (the lane lines, e.g. "lane[1]:  5:cma/memory.0 md[4] -> md[4]/cma/
// sysdev[255] rma_bw#0"; newlines may have been replaced by spaces): yes on
// shared memory (the rendezvous lane cma, knem or xpmem) and where the
// rendezvous copies anyway (tcp, or no RMA lane); no on RDMA and on anything
// it cannot read, where UCX's own thresholds stay.
bool eagerCanPay(const std::string& endpointInfo);

// Whether a send of `bytes` goes eagerly, with `limit` RINGREDUCE_EAGER_BYTES
// (0: never).
bool sendsEagerly(bool eagerPays, size_t bytes, size_t limit);

// The data path's UCX settings, as (name for ucp_config_modify, value, the
// variable by which a user's own setting wins):
// - RNDV_SEND_NBR_THRESH=inf, so that a flagged send is eager whatever its
//   size and the limit is ours;
// - TCP segments of 256 KiB instead of UCX's 8 KiB. A TCP message goes out
//   one segment per send(): with 8 KiB, eager DDP steps over TCP used 2.3x
//   the CPU (83-92 ms against 35-38 by rendezvous), and the rendezvous too is
//   faster with 256 KiB (the emulated 1 Gbit/s nodes: ring and two_level 7-8%
//   at 16 MiB). A segment buffer is held only while a message is in flight on
//   its endpoint: an all_to_all among 16 ranks over TCP grew each rank's
//   memory by 0-1.6 MiB more than with 8 KiB (benchmarks/RESULTS.md, "256 KiB
//   TCP segments by default").
// - Shared memory's receive FIFO (UCX_MM_FIFO_SIZE and
//   UCX_MM_FIFO_RELEASE_FACTOR; "MM_..." here, the fields of the "MM_"
//   sub-table of the posix and sysv tables): 128 entries instead of 64,
//   handed back to the senders every 12 read instead of every 32. A sender
//   that finds its peer's FIFO full keeps the message pending until its own
//   progress finds room, and a sleeping rank makes none; the receiver only
//   says it made room every release-factor x size entries. A rendezvous
//   costs a request and an acknowledgement through the FIFO, so direct's
//   segmented round 1 (four ranks on two cores, 64 MiB, 64 segments per peer)
//   took 43-47 ms per op with UCX's 64 and 0.5; 25.0-25.4 with 128 and 0.1;
//   29-32 with 64 and 0.1; 23-28 with 1024 and 0.5. 1024 entries cycle
//   through 8 MiB of receive buffers and cost small messages their cache:
//   256 B and 4 KiB back-to-back allreduces took 13-20 us instead of 8-9;
//   with 128 and 0.1, 8.6-9.3 (benchmarks/RESULTS.md, "Segmented direct").
// UCX applies a transport's setting by its name inside the transport's table
// ("TX_SEG_SIZE", not "TCP_TX_SEG_SIZE", which it accepts and never uses).
std::vector<std::tuple<std::string, std::string, std::string>> dataPathUcxSettings();

}  // namespace ringreduce
