// Layout of the 64-bit UCX tag. UCX matches receives per worker, not per
// endpoint, so the tag must say who sent a message and to which operation
// and step it belongs:
//   [ source rank : 20 ][ op sequence : 20 ][ slot : 24 ]
// The sequence wraps; two operations 2^20 apart are never in flight at once.
#pragma once

#include <cstdint>

namespace ringreduce {

constexpr int kTagRankBits = 20;
constexpr int kTagSeqBits = 20;
constexpr int kTagSlotBits = 24;
constexpr uint64_t kTagFullMask = ~0ull;
constexpr int kMaxRanks = 1 << kTagRankBits;
constexpr uint32_t kMaxSlot = (1u << kTagSlotBits) - 1;

inline uint64_t makeTag(int sourceRank, uint64_t seq, uint32_t slot) {
  const uint64_t seqMask = (1ull << kTagSeqBits) - 1;
  const uint64_t slotMask = (1ull << kTagSlotBits) - 1;
  return (static_cast<uint64_t>(sourceRank) << (kTagSeqBits + kTagSlotBits)) |
         ((seq & seqMask) << kTagSlotBits) | (slot & slotMask);
}

inline int tagSourceRank(uint64_t tag) {
  return static_cast<int>(tag >> (kTagSeqBits + kTagSlotBits));
}

}  // namespace ringreduce
