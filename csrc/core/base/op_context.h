// What one collective call carries down to every wait: its name and sequence
// number (for error messages) and the deadline that bounds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ringreduce {

class PhaseRecorder;  // core/observe/phase_recorder.h

using Clock = std::chrono::steady_clock;

// What a body run only to publish ahead (OpContext::ahead) put up.
struct PublishedAhead {
  bool published = false;  // its first turn: the body returns at once
  // That turn was the collective's last for this rank: its peers wait for
  // nothing more of it, so the queued run may wait for its caller's wait().
  bool lastTurn = false;
};

struct OpContext {
  const char* opName = "collective";
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{30 * 60 * 1000};
  Clock::time_point deadline = Clock::time_point::max();
  // Send/recv count their own sequence, apart from the collectives'.
  bool pointToPoint = false;
  // A point-to-point message that serves a collective (the neighbour check):
  // its own tag space and sequence, but the collective's fate, so a peer
  // that gave up on the group or died ends it as it ends the collective.
  bool partOfCollective = false;
  // A hash of what the collective is (op, dtype, size, reduce op, root),
  // carried in every message tag of the collective (transport/tag.h).
  uint8_t fingerprint = 0;
  // The whole 32-bit hash the tag's 8 bits fold (fingerprintWord): what a
  // device collective carries in its flags. The engine hashes once and sets
  // both, so a launch reuses this one instead of hashing again; 0 where no
  // fingerprint applies (send/recv).
  uint32_t fingerprintWord = 0;
  // Where the phases of the operation (waits, reductions) are timed for the
  // timeline (RINGREDUCE_TIMELINE); null when it is off, and then marking a
  // phase is one test of this pointer (core/observe/phase_recorder.h: PhaseScope).
  PhaseRecorder* phases = nullptr;
  // Set where the body runs only as far as this rank's first publication on
  // the host channel (Engine::publishBeforeQueueing, for a collective about
  // to be queued because its peers were not there yet): exchangeTurn notes
  // that turn here and returns it, and the algorithm and the backend's body
  // then return at once (stoppedAhead()), writing no output (where
  // withContiguous copies back, it writes the values that were there); the
  // queued run of the same body takes the turn up. A return, not an exception:
  // unwinding a body's 8-10 frames cost 9 us a call on the 2-core VM.
  PublishedAhead* ahead = nullptr;

  bool publishOnly() const { return ahead != nullptr; }
  bool stoppedAhead() const { return ahead != nullptr && ahead->published; }

  OpContext() = default;
  OpContext(const char* name, uint64_t sequence, std::chrono::milliseconds limit)
      : opName(name), seq(sequence), timeout(limit), deadline(Clock::now() + limit) {}

  // When the operation began: its deadline is counted from that moment
  // (the constructor, Engine::runOnCaller), so knowing it reads no clock.
  Clock::time_point started() const { return deadline - timeout; }

  // The i-th of several collectives fused into one queued operation (the
  // caller reserved consecutive sequence numbers for them).
  OpContext part(uint64_t i) const {
    OpContext c = *this;
    c.seq = seq + i;
    return c;
  }

  // "allreduce #12", "send p2p#3"
  std::string describe() const {
    return std::string(opName) + (groupWide() ? " #" : " p2p#") + std::to_string(seq);
  }
  // Whether the whole group's news (any death, any rank giving up) ends this
  // operation, or only its own peer's death (a plain send/recv).
  bool groupWide() const { return !pointToPoint || partOfCollective; }
  // Identifies the operation a UCX request belongs to.
  uint64_t owner() const { return seq | (pointToPoint ? (1ull << 63) : 0); }
};

}  // namespace ringreduce
