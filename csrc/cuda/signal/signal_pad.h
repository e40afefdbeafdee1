// The memory through which the ranks of one node synchronise on the device
// (the "device flags" path, RINGREDUCE_CUDA_ALGO=flags). Plain C++: the
// kernels, the host code that sets it up and the host model of the protocol
// (tests/cpp/test_signal_protocol.cpp) share this one layout.
//
// Each rank allocates one region with cudaMalloc and shares it once, at
// set-up, through CUDA IPC:
//
//   [ SignalPad | in[0] | in[1] | out[0] | out[1] ]     each buffer bufferBytes
//
// A collective copies its input into in[parity], meets its peers at a
// barrier, reads what it needs from their in[parity] (and, for two-shot,
// writes its slice into every peer's out[parity]). Consecutive collectives
// alternate the parity, so none needs a closing barrier: a rank reaches
// collective k+2 (and overwrites in[k % 2]) only after its collective k+1
// met every peer, which every peer reached only after finishing collective k
// (stream order), so no peer still reads the old data.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/math/element_math.h"  // RR_HOST_DEVICE

namespace ringreduce::cuda {

constexpr int kSignalRanks = 8;    // ranks of one group, at most (the kernels' fan-in)
constexpr int kSignalBlocks = 64;  // blocks of one collective, at most
constexpr int kSignalBarriers = 2;  // barriers in one collective, at most (two-shot)

// Why a kernel gave up; what the host watchdog reports. Never a __trap: the
// kernel returns and the group fails on the host with the reason.
enum class SignalFailure : uint32_t {
  None = 0,
  Timeout = 1,     // a peer did not arrive before the op's deadline
  Mismatch = 2,    // a peer arrived at the same collective number with another fingerprint
  PeerFailed = 3,  // a peer's kernel failed (its pad's `failed` word), so it will not arrive
  Stopped = 4,     // this rank's host said stop (SignalPad::stop)
};

struct SignalPad {
  // arrivals[barrier][parity][block][source rank]: the source's latest
  // arrival at that barrier, (collective number << 32) | fingerprint,
  // written by the source into every rank's pad (release) and read by the
  // owner (acquire). The parity slot keeps a peer that is one collective
  // ahead from overwriting an arrival the owner has not read yet; it cannot
  // be two ahead (see the file comment).
  uint64_t arrivals[kSignalBarriers][2][kSignalBlocks][kSignalRanks];
  // The same for stream memory operations (ranks sharing a GPU without
  // MPS): 32-bit words, the collective number as the host counts it, and
  // beside it the collective's fingerprint, which the waiter must find
  // equal to its own (a different collective waits for its deadline: an
  // error, never a wrong result).
  uint32_t streamArrivals[kSignalBarriers][2][kSignalRanks];
  uint32_t streamFingerprints[kSignalBarriers][2][kSignalRanks];
  // Collectives this rank has run on the device. In device memory, so a
  // replayed CUDA graph continues the count; the last block of each
  // collective increments it.
  uint64_t collectives;
  uint32_t blocksDone;  // blocks of the running collective that have finished
  // Nonzero (a SignalFailure) once a kernel of this rank failed: peers
  // waiting for this rank stop instead of waiting for their deadline.
  uint32_t failed;
  // Nonzero once this rank's host gave up on the group (an abort, a dead
  // peer, a deadline it watches): every wait ends and no later kernel runs.
  // The host writes it through a stream of its own, beside the one that
  // may be stuck.
  uint32_t stop;
};

constexpr size_t kSignalPadBytes = (sizeof(SignalPad) + 4095) / 4096 * 4096;

// What the kernel reports to the host, one slot per block, in pinned host
// memory the device writes (the "pinned mirror" the watchdog reads).
//   word: failure (8 bits) | peer (8) | barrier (8) | block (8) | collective (32)
//   seen: what the block found in the peer's arrival slot
struct SignalStatus {
  uint64_t word;
  uint64_t seen;
};

constexpr uint64_t packStatus(SignalFailure failure, int peer, int barrier, int block,
                              uint32_t collective) {
  return static_cast<uint64_t>(failure) | static_cast<uint64_t>(peer & 0xff) << 8 |
         static_cast<uint64_t>(barrier & 0xff) << 16 |
         static_cast<uint64_t>(block & 0xff) << 24 | static_cast<uint64_t>(collective) << 32;
}
constexpr SignalFailure statusFailure(uint64_t word) {
  return static_cast<SignalFailure>(word & 0xff);
}
constexpr int statusPeer(uint64_t word) { return static_cast<int>(word >> 8 & 0xff); }
constexpr int statusBarrier(uint64_t word) { return static_cast<int>(word >> 16 & 0xff); }
constexpr int statusBlock(uint64_t word) { return static_cast<int>(word >> 24 & 0xff); }
constexpr uint32_t statusCollective(uint64_t word) { return static_cast<uint32_t>(word >> 32); }

constexpr uint64_t arrivalWord(uint32_t collective, uint32_t fingerprint) {
  return static_cast<uint64_t>(collective) << 32 | fingerprint;
}

// The buffers of a region, by kind and parity.
enum class SignalBuffer { In = 0, Out = 1 };

inline size_t signalRegionBytes(size_t bufferBytes) { return kSignalPadBytes + 4 * bufferBytes; }

template <typename T>
RR_HOST_DEVICE T* signalBuffer(void* region, size_t bufferBytes, SignalBuffer kind,
                                uint32_t parity) {
  const size_t index = static_cast<size_t>(kind) * 2 + (parity & 1);
  return reinterpret_cast<T*>(static_cast<uint8_t*>(region) + kSignalPadBytes +
                              index * bufferBytes);
}

}  // namespace ringreduce::cuda
