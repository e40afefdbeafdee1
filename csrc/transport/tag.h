// Layout of the 64-bit UCX tag. UCX matches receives per worker, not per
// endpoint, so the tag must say who sent a message and what it belongs to:
//   collectives: [ source rank : 20 ][ 0 ][ sequence : 16 ][ fingerprint : 8 ][ slot : 19 ]
//   send/recv:   [ source rank : 20 ][ 1 ][ user tag : 43 ]
// Collective sequences wrap; two operations 2^16 apart are never in flight
// at once. The fingerprint is a hash of what the collective is (op, dtype,
// size, reduce op, root): receives ignore it when matching and then compare
// it, so ranks in different collectives get an error, not each other's data
// (see UcxTransport). Point-to-point messages carry the user's tag instead,
// so they match across ranks whatever collectives each rank issued before.
#pragma once

#include <cstdint>

namespace ringreduce {

constexpr int kTagRankBits = 20;
constexpr int kTagSeqBits = 16;
constexpr int kTagFingerprintBits = 8;
constexpr int kTagSlotBits = 19;
constexpr int kTagFingerprintShift = kTagSlotBits;
constexpr uint64_t kTagFingerprintMask = ((1ull << kTagFingerprintBits) - 1) << kTagFingerprintShift;
constexpr int kTagPayloadBits = 64 - kTagRankBits;  // kind bit + 43
constexpr uint64_t kTagKindP2P = 1ull << (kTagPayloadBits - 1);
constexpr uint64_t kTagFullMask = ~0ull;
// Matches any source rank (recv from any source).
constexpr uint64_t kTagAnySourceMask = (1ull << kTagPayloadBits) - 1;
constexpr int kMaxRanks = 1 << kTagRankBits;
constexpr uint32_t kMaxSlot = (1u << kTagSlotBits) - 1;
// A ring reduce-scatter or allgather keeps its slots below this (a ring
// allreduce uses them all), so that an algorithm can add messages between
// the same ranks in the same op above it: reduce_to_root's gather, the
// two-level forms' hand-overs inside a node; the topology exchange and the
// link probe take the very top (algorithms/allreduce.h, algorithms/tuning/link_probe.h).
constexpr uint32_t kRingPhaseSlots = (kMaxSlot + 1) / 2;

inline uint64_t makeTag(int sourceRank, uint64_t seq, uint32_t slot) {
  const uint64_t seqMask = (1ull << kTagSeqBits) - 1;
  const uint64_t slotMask = (1ull << kTagSlotBits) - 1;
  return (static_cast<uint64_t>(sourceRank) << kTagPayloadBits) |
         ((seq & seqMask) << (kTagSlotBits + kTagFingerprintBits)) | (slot & slotMask);
}

// `userTag` must be non-negative (torch's tags are ints >= 0).
inline uint64_t makeP2PTag(int sourceRank, int64_t userTag) {
  const uint64_t userMask = kTagKindP2P - 1;
  return (static_cast<uint64_t>(sourceRank) << kTagPayloadBits) | kTagKindP2P |
         (static_cast<uint64_t>(userTag) & userMask);
}

inline int tagSourceRank(uint64_t tag) { return static_cast<int>(tag >> kTagPayloadBits); }

}  // namespace ringreduce
