// The barrier of the device-flags path, written once over a memory policy
// `M`: on the GPU (device_signal_memory.cuh) every access is PTX with
// system-scope release/acquire and the deadline reads %globaltimer; in the
// host model of the protocol (tests/cpp/host_signal_memory.h) a CUDA block
// is a thread and the accesses are std::atomic_ref, so ThreadSanitizer
// checks the same code the kernels run.
//
// One barrier, for block b of rank r in collective n (a 32-bit count that
// wraps; only equality is compared):
//   arrive  the block's threads finish their writes (M::syncBlock), then
//           lane p stores (n << 32 | fingerprint) with release into
//           pads[p]->arrivals[barrier][n % 2][b][r]
//   wait    lane p loads, with acquire, pads[r]->arrivals[barrier][n % 2][b][p]
//           until it holds collective n. With n but another fingerprint
//           the peer runs a different collective: Mismatch. Every
//           kSignalPollsPerCheck polls it also gives up on the peer's
//           `failed` word (its kernel gave up and will not arrive), on its
//           own pad's `stop` word (its host gave up) and on the op's
//           deadline.
// A failure is written to the host's status slot of the block and to this
// rank's `failed` word, which stops the peers waiting for it; the block
// then returns. Nothing traps: the host fails the group with the reason.
#pragma once

#include <cstdint>

#include "cuda/signal/signal_pad.h"

namespace ringreduce::cuda {

constexpr uint32_t kSignalPollsPerCheck = 64;

// What a kernel knows of its group. Plain data: a kernel argument.
struct SignalView {
  void* regions[kSignalRanks] = {};  // every rank's region, mapped here (mine at `rank`)
  SignalStatus* status = nullptr;    // kSignalBlocks slots in pinned host memory
  size_t bufferBytes = 0;
  uint64_t timeoutNs = 0;
  uint32_t fingerprint = 0;  // of the collective being run, the same on every rank
  int rank = 0;
  int nranks = 1;
};

RR_HOST_DEVICE SignalPad* padOf(const SignalView& v, int rank) {
  return static_cast<SignalPad*>(v.regions[rank]);
}

// Reports a failure of `block` and tells the peers. Returns false.
template <class M>
RR_HOST_DEVICE bool signalFailure(M& m, const SignalView& v, SignalFailure failure, int peer,
                                  int barrier, int block, uint32_t collective, uint64_t seen) {
  m.storeStatus(&v.status[block], packStatus(failure, peer, barrier, block, collective), seen);
  m.storeRelaxed32(&padOf(v, v.rank)->failed, static_cast<uint32_t>(failure));
  return false;
}

// Waits for `peer`'s arrival at `barrier` of `collective`; false on failure.
template <class M>
RR_HOST_DEVICE bool waitForArrival(M& m, const SignalView& v, int barrier, int block,
                                   uint32_t collective, int peer) {
  const uint64_t* slot =
      &padOf(v, v.rank)->arrivals[barrier][collective & 1][block][peer];
  const uint64_t started = m.nowNs();
  for (uint32_t polls = 1;; ++polls) {
    const uint64_t seen = m.loadAcquire(slot);
    if (static_cast<uint32_t>(seen >> 32) == collective) {
      if (static_cast<uint32_t>(seen) == v.fingerprint) return true;
      return signalFailure(m, v, SignalFailure::Mismatch, peer, barrier, block, collective, seen);
    }
    if (polls % kSignalPollsPerCheck == 0) {
      if (m.loadRelaxed32(&padOf(v, v.rank)->stop) != 0) {
        return signalFailure(m, v, SignalFailure::Stopped, peer, barrier, block, collective, seen);
      }
      if (m.loadRelaxed32(&padOf(v, peer)->failed) != 0) {
        return signalFailure(m, v, SignalFailure::PeerFailed, peer, barrier, block, collective,
                             seen);
      }
      if (m.nowNs() - started > v.timeoutNs) {
        return signalFailure(m, v, SignalFailure::Timeout, peer, barrier, block, collective, seen);
      }
    }
    m.pause();
  }
}

// Every lane of the block calls it; true when every peer arrived.
template <class M>
RR_HOST_DEVICE bool signalBarrier(M& m, const SignalView& v, int barrier, int block,
                                  uint32_t collective) {
  const uint64_t word = arrivalWord(collective, v.fingerprint);
  m.syncBlock();  // the block's writes before the barrier come before its arrival
  m.jitter();
  for (int p = m.lane(); p < v.nranks; p += m.lanes()) {
    if (p != v.rank) {
      m.storeRelease(&padOf(v, p)->arrivals[barrier][collective & 1][block][v.rank], word);
    }
  }
  int failed = 0;
  for (int p = m.lane(); p < v.nranks; p += m.lanes()) {
    if (p != v.rank && !waitForArrival(m, v, barrier, block, collective, p)) failed = 1;
  }
  // Every thread of the block reads the peers' data only after the lanes'
  // acquires (M::syncBlockOr is a block barrier).
  return m.syncBlockOr(failed) == 0;
}

// The collective's number on this rank, the same in every block: the count
// of collectives before it, plus one. The previous kernel on this rank's
// stream wrote the count, so a plain load sees it. Zero when this rank has
// already failed or the host said stop: the block must not run (and does
// not arrive anywhere).
template <class M>
RR_HOST_DEVICE uint64_t beginSignalCollective(M& m, const SignalView& v, int block) {
  SignalPad* self = padOf(v, v.rank);
  const uint64_t collective = m.loadPlain64(&self->collectives) + 1;
  // One lane decides for the block (the host may set `stop` while the
  // block's threads read it; all must take the same branch). Silently: the
  // failure or the host's stop that caused it is on record.
  int refused = 0;
  if (m.lane() == 0) {
    refused = m.loadRelaxed32(&self->failed) != 0 || m.loadRelaxed32(&self->stop) != 0;
  }
  if (m.syncBlockOr(refused) != 0) return 0;
  return collective;
}

// The last block to finish advances the count, after every block has read
// it (each reads it before its own end), so all blocks of a collective see
// the same number and the next kernel sees the new one.
template <class M>
RR_HOST_DEVICE void endSignalCollective(M& m, const SignalView& v, int nblocks,
                                        uint64_t collective) {
  m.syncBlock();
  if (m.lane() != 0) return;
  SignalPad* self = padOf(v, v.rank);
  if (m.fetchAddAcqRel32(&self->blocksDone, 1) == static_cast<uint32_t>(nblocks - 1)) {
    m.storeRelaxed32(&self->blocksDone, 0);
    m.storePlain64(&self->collectives, collective);
  }
}

}  // namespace ringreduce::cuda
