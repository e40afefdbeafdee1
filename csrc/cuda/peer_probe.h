// Proves at set-up that every pair of ranks really reaches the other's
// memory through the IPC mappings, before any collective relies on it.
// An open that succeeds does not prove it: peer traffic may be disabled
// (cudaDeviceCanAccessPeer says no: PCIe across sockets, consumer cards) or
// broken (IOMMU/ACS in VMs, where reads return wrong data or writes vanish).
// A kernel spinning on a flag that never arrives would wait to its deadline,
// and a reduction reading garbage would be silently wrong.
//
// Every rank writes a pattern of its own into a slot of every peer's area
// through the mapping, and reads every peer's self-written pattern through
// the mapping; each rank checks what arrived in its own area and what it
// read, and the verdicts of all pairs are exchanged, so every rank reaches
// the same answer (and names the same pair). Bounded by `limit`: a copy that
// never completes is a verdict too.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/record_exchange.h"

namespace ringreduce::cuda {

// Bytes of the probe area each rank lends (a slot per rank of a group of
// up to 8, at the start of a scratch buffer no collective uses yet).
constexpr size_t kPeerProbeSlotBytes = 256;
constexpr int kPeerProbeRanks = 8;
constexpr size_t kPeerProbeAreaBytes = kPeerProbeSlotBytes * kPeerProbeRanks;

// How one rank found a peer.
enum class PeerReach : uint8_t {
  Ok = 0,
  NoPeerAccess = 1,  // the runtime says the two GPUs cannot access each other
  WritesLost = 2,    // the peer's writes into this rank's area did not arrive intact
  ReadsWrong = 3,    // reading the peer's area through the mapping gave wrong data
  TimedOut = 4,      // the probe's copies did not finish before the limit
};

struct PeerProbe {
  int rank = 0;
  int size = 0;
  int device = 0;
  // areas[q]: rank q's probe area as this rank sees it (mine: my own
  // memory, the others: through the mapping); kPeerProbeAreaBytes each.
  void* const* areas = nullptr;
  std::chrono::milliseconds limit{30000};
};

// Collective: every rank calls it once its mappings are open (after the
// ranks agreed that every one of them opened). "" when every pair passed;
// otherwise why not, naming the first failing pair: the same text on every
// rank. Throws only what the exchange throws (a dead peer, its timeout).
std::string probePeerAccess(const PeerProbe& probe, const RecordExchange& exchange);

// Whether a set-up's failure reason is the probe's (it names a pair).
bool isPeerAccessFailure(const std::string& why);

}  // namespace ringreduce::cuda
