// The group's channel between its ranks on one host: what small collectives
// need instead of messages, the way MPI's shared-memory transport and
// DeepSpeed's CPU allreduce work. A segment mapped once when the group is
// made (host_segment.h); per rank, sequence-numbered flags on cache lines
// of their own; the caller's thread spins on them for as long as spinning
// pays (core/base/spin_budget.h), then sleeps on its doorbell (doorbell.h).
//
// It keeps the group's contracts, which UCX's messages kept before:
// - every collective, whichever way it runs, first announces where this
//   rank is (its sequence number and fingerprint), so a peer waiting on a
//   flag sees at once that this rank called something else, and says what;
// - a wait ends on the flag, on the peer's death (its process fd,
//   peer_exits.h: the kernel says so the moment it exits), on its
//   departure (its group destroyed: it says so and rings), on its failure
//   (it gave up on the group: it says why and rings), on this group's
//   abort, or at the deadline, whose error names the rank that is late
//   and where it is;
// - a sleeper is woken by the event itself: the peer that sets a flag rings
//   every peer that said it sleeps (Dekker: each side writes its own word,
//   fences, then reads the other's), so no sleep outlasts its event and
//   no sleep is sliced.
//
// Waits run on one thread at a time (the engine runs one collective at a
// time), with the SpinBudget the caller passes. abort(), fail() and
// wakeSelf() may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <poll.h>

#include "core/base/op_context.h"
#include "core/base/core_separation.h"
#include "core/base/cpu_contention.h"
#include "core/base/spin_budget.h"
#include "core/plan/gather_forms.h"
#include "transport/host/channel_stores.h"
#include "transport/host/doorbell.h"
#include "transport/host/host_segment.h"
#include "transport/host/peer_exits.h"
#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class Transport;

// The flags a rank sets, each on its own cache line.
enum class FlagKind : int {
  Input = 0,    // its input for collective #seq is in its buffer
  Reduced = 1,  // its share of #seq's result is in its buffer (two-phase forms)
};

class HostChannel {
 public:
  struct Options {
    // Per rank and parity: rank 0's serves the group; 0 on any rank: no
    // channel for the group.
    size_t bufferBytes = 0;
    bool yields = false;           // spins give the core away at every pass (Config::spinYields)
    std::chrono::microseconds callerSpin{1000};  // the caller budget's ceiling
    bool adaptiveSpin = true;
    // How this rank writes into its buffers (Config::channelStores).
    ChannelStores stores = ChannelStores::Auto;
    // Whether this rank lets the group's ranks read each other's memory
    // (Config::crossMemory): false on any rank, peersReadable() is false
    // on every rank.
    bool crossMemory = true;
    // "NAME=value" lines of the settings that decide which way a collective
    // runs (the algorithm, the wire dtype, the collective check): ranks that
    // differ would take two paths under one fingerprint and wait for each
    // other until the timeout, so open() refuses them at once, naming both.
    std::string agreedSettings;
    // Whether other work wants the cores now (read after a sleep: a wake-up
    // brings the spin back only where not, awaitPeers); empty: this
    // machine's (core/base/cpu_contention.h). Tests give their own.
    std::function<bool()> contended;
    // Which CLOCK_MONOTONIC this rank's announcements are stamped on: 0,
    // this process's (its time namespace, /proc/self/ns/time; one clock
    // for every process where the kernel has none). Tests give their own.
    uint64_t clock = 0;
    // Whether a waiting thread that keeps meeting its peer on its own core
    // under load moves off it (Config::separateCores,
    // core/base/core_separation.h), and how (empty: its affinity; tests
    // give their own).
    bool separateCores = false;
    std::function<bool()> moveOffCpu;
  };

  // Collective over `store` (keys under `prefix`, which must be unique to
  // this group's generation): every rank of the group calls it, and every
  // rank is on this host. Returns the channel on every rank, or null on
  // every rank when any rank could not set it up (each says why in `why`:
  // the first rank that failed and its reason). Throws TimeoutError when a
  // rank does not take part within `timeout`, InvalidArgument on every
  // rank when their agreedSettings differ.
  static std::unique_ptr<HostChannel> open(KeyValueStore& store, const std::string& prefix,
                                           int rank, int size, const Options& options,
                                           std::chrono::milliseconds timeout, std::string* why);
  // Says this rank has left (if it had not failed) and rings every peer.
  ~HostChannel();
  HostChannel(const HostChannel&) = delete;
  HostChannel& operator=(const HostChannel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t bufferBytes() const { return segment_.bufferBytes(); }
  char* buffer(int rank, int parity) const { return segment_.buffer(rank, parity); }
  // Copies this rank's data into its own buffer (`dst` inside it), with the
  // stores that are faster there (channel_stores.h). Reads of the peers'
  // buffers are plain memcpy.
  void copyIn(void* dst, const void* src, size_t bytes) { writer_.copy(dst, src, bytes); }
  // One use of the buffers: its number (what the flags count, alike on
  // every rank, since every rank runs the same collectives here, in
  // buffer-sized pieces alike) and the buffer it takes. They alternate: a
  // rank writes buffer p for turn k only after every peer has started turn
  // k-1 (the wait of k-1 saw their flags), which they do only once done
  // reading turn k-2's, the last one on buffer p.
  //
  // Within its buffer a turn's bytes start at `offset`, which moves on by
  // the turn's footprint (rounded to a cache line) each time the buffer is
  // taken, round the buffer: a rank then writes lines its peers last read
  // many turns ago, gone from their caches, rather than the ones they read
  // two turns ago, which an ordinary store must first take back from them
  // (64 KiB into such lines: 9.5 us; moving round 1 MiB: 2.2 us, the
  // reader's copy unchanged; 2-vCPU AMD EPYC VM). The offset depends on the
  // turn's number and footprint alone, so every rank computes the same one.
  struct Turn {
    uint64_t number = 0;
    int parity = 0;
    size_t offset = 0;
  };
  // `footprint`: the bytes of its buffer the turn uses from its start, the
  // same on every rank (at most bufferBytes()).
  Turn takeTurn(size_t footprint) {
    ++turns_;
    Turn turn{turns_, static_cast<int>(turns_ & 1), 0};
    const size_t stride = (footprint + kLineBytes - 1) / kLineBytes * kLineBytes;
    if (stride > 0 && stride <= bufferBytes()) {
      turn.offset = static_cast<size_t>((turns_ >> 1) % (bufferBytes() / stride)) * stride;
    }
    return turn;
  }
  // A turn taken, filled and published before its collective runs: a
  // caller that had to queue collective `seq` (its peers not there yet) has
  // already put its input up, so that a peer that comes meanwhile completes
  // its own part without waiting for this rank's worker
  // (Engine::runOnCaller's publish-ahead). The queued body's first turn then
  // adopts it instead of taking another (adoptPublishedAhead).
  void notePublishedAhead(uint64_t seq, const Turn& turn, size_t footprint) {
    ahead_ = {seq, turn, footprint};
  }
  // Whether collective `seq`'s first turn was published ahead: if so, sets
  // `turn` to it and forgets it. Throws Error where another collective's turn
  // is pending (the turns would be out of step with the peers' from here).
  bool adoptPublishedAhead(uint64_t seq, size_t footprint, Turn& turn) {
    if (ahead_.seq == 0) return false;
    return adoptPending(seq, footprint, turn);
  }
  // A wait this rank left for later: its last turn of a collective in which
  // it reads nothing of its peers' buffers (a broadcast's or a scatter's
  // root, a gather's or a reduce's other ranks: exchangeTurn's readsPeers)
  // returns once its bytes are up, as Open MPI's and gloo's senders return
  // before their receivers come. The wait it skips is owed: before this rank
  // writes its buffers again (its next turn), every peer must have started
  // that turn (the rule of takeTurn) in the same collective (its flag's
  // word), which payOwedWait sees to. One at a time: the next turn pays it.
  void oweWait(const Turn& turn, const OpContext& op) {
    owed_ = {turn.number, op.seq, op.fingerprintWord, op.opName};
  }
  bool owesWait() const { return owed_.turn != 0; }
  // Whether a wait is owed for which some peer's flag has not come yet: a
  // run that only publishes ahead (Engine::publishBeforeQueueing) must not
  // block on it, so the engine queues such a collective without one.
  bool owesUnsettledWait() const {
    return owed_.turn != 0 && firstBehind(FlagKind::Input, owed_.turn) >= 0;
  }
  // Waits, as awaitPeers, for the peers' flags of the owed turn and checks
  // them against the collective it was owed for (its name, number and
  // word in any error), with `op`'s deadline and abort; then owes nothing.
  void payOwedWait(const OpContext& op, SpinBudget& spin, Transport* driven);
  // Whether every rank can read every other's memory through
  // transport/cross_memory.h, agreed when the channel was opened (each rank
  // read each peer's probe word, and none turned it off): the same on every
  // rank, so that collectives that read the peers' tensors in place rather
  // than through the buffers (algorithms/host_channel/cross_memory_gather.h)
  // are chosen alike.
  bool peersReadable() const { return peersReadable_; }
  // Where peersReadable(): which way a gather whose blocks the buffers
  // could carry moves them, timed and agreed (core/plan/gather_forms.h).
  GatherForms& gatherForms() { return gatherForms_; }
  const GatherForms& gatherForms() const { return gatherForms_; }
  // The same timing for this rank's offers of its blocks in place in the
  // uneven all-to-alls (alltoall_uneven.cpp), by the size class of its
  // largest block to a peer: each rank decides its own offer from its own
  // calls' times, since every rank may offer or not.
  GatherForms& unevenForms() { return unevenForms_; }
  const GatherForms& unevenForms() const { return unevenForms_; }
  // `rank`'s process id, as crossMemoryRead takes it.
  int pid(int rank) const { return pids_[static_cast<size_t>(rank)]; }
  // Throws the error of a read of `peer`'s memory that failed with errno
  // `error`: ESRCH, its process is gone, said as a wait says a death; a
  // peer that gave up on the collective, its reason; any other, the
  // kernel's.
  [[noreturn]] void throwUnreadable(int peer, const OpContext& op, int error) const;
  // After this rank's collective failed where `peer` may still be reading
  // this rank's memory (large_broadcast.h: a receiver reading the root's
  // tensor): waits until `peer`'s `kind` flag is at `turn` or later (it said
  // it is done with this rank's memory), its process has exited or it has
  // left the group, or `until`. Not its Failed state: an abort from another
  // thread sets that while its collective's thread may be inside a copy.
  // Whether it is known done. Never throws.
  bool awaitPeerDoneCopying(FlagKind kind, int peer, const Turn& turn,
                            Clock::time_point until) const noexcept;
  // Throws where `peer` gave up on the group in `op` or before it (its
  // Failed state, set before its caller can free what it put up): a read
  // or write of its memory that failed (EFAULT) names that reason.
  void throwIfGaveUp(int peer, const OpContext& op) const {
    if (gaveUpIn(peer, op)) throwGaveUp(peer, op);
  }
  // Where `rank`'s bytes of `turn` start.
  char* buffer(int rank, const Turn& turn) const {
    return segment_.buffer(rank, turn.parity) + turn.offset;
  }
  static constexpr size_t kLineBytes = 64;

  // Any collective of the group, as it starts: this rank's sequence number,
  // fingerprint word and the fingerprint's fields (up to
  // PositionLine::kDetailBytes, rendered by `describe` in mismatch errors),
  // and when it started (`at`, the steady clock).
  void announce(uint64_t seq, uint32_t word, const void* detail, size_t bytes,
                std::chrono::steady_clock::time_point at);
  // When the last of the peers announced collective `seq`, where every one
  // is in `seq` still (none has announced a later one); nothing otherwise,
  // and nothing ever where the ranks' stamps are on different clocks
  // (sharesClock). Any thread.
  std::optional<std::chrono::steady_clock::time_point> peersAnnouncedAt(uint64_t seq) const;
  // Whether every rank reads the same CLOCK_MONOTONIC (one time namespace:
  // a container's may be offset since Linux 5.6), so that one rank's
  // announcement stamp means the same instant to the others.
  bool sharesClock() const { return sharesClock_; }
  // Whether every peer has announced collective `seq` (or a later one):
  // they are in it, so this rank's part of it waits for no one who might
  // first wait for this rank elsewhere. Any thread.
  bool peersAnnounced(uint64_t seq) const {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && lines(peer).position.seq.load(std::memory_order_acquire) < seq) {
        return false;
      }
    }
    return true;
  }
  // This rank is done with collective `seq` (its body ended): should it give
  // up now, its peers still complete `seq` (they fail the next one). Until
  // then a failure counts as inside the announced collective.
  void finished(uint64_t seq) { finished_.store(seq, std::memory_order_relaxed); }
  using Describe = std::function<std::string(const void* detail, size_t bytes)>;
  void setDescribe(Describe describe) { describe_ = std::move(describe); }

  // Sets this rank's `kind` flag to the turn (release), with op's
  // fingerprint word, and rings the peers that sleep.
  void publish(FlagKind kind, const Turn& turn, const OpContext& op);
  // Two words that go with this rank's next publish(kind) of the turn it
  // took last (FlagLine::notes): set them before that publish, while
  // filling the turn. A peer reads them once its wait for that flag
  // returned, and before it publishes its next turn.
  void setNote(FlagKind kind, uint64_t first, uint64_t second) {
    auto& note = lines(rank_).flags[static_cast<int>(kind)].notes[turns_ & 1];
    note[0].store(first, std::memory_order_relaxed);
    note[1].store(second, std::memory_order_relaxed);
  }
  std::pair<uint64_t, uint64_t> note(int rank, FlagKind kind, const Turn& turn) const {
    const auto& note = lines(rank).flags[static_cast<int>(kind)].notes[turn.number & 1];
    return {note[0].load(std::memory_order_relaxed), note[1].load(std::memory_order_relaxed)};
  }
  // Returns once every peer's `kind` flag is at the turn or later and each
  // of them is in this same collective (the flag's fingerprint word at the
  // turn is op.fingerprintWord; a flag past it was set by a peer that
  // finished the turn, which it does only where the words were equal).
  // Throws TransportError for a peer in another collective (its position
  // says op.seq with another word), dead, gone or failed, or for this
  // group's abort; TimeoutError at op.deadline.
  //
  // `driven`: the transport, where the waiting thread is the one that
  // drives it (a queued collective, run by the group's worker or by a caller
  // running the queue). The wait then keeps it moving, on every pass of the
  // spin and in its sleep: messages of earlier operations still in flight
  // (an isend's rendezvous, a fragment of a large eager send) move only when
  // this thread progresses, and a peer may wait for them before it comes to
  // this collective (a rank in a barrier behind a receive from this one).
  // Null for a caller past the queue (Engine::runOnCaller): the worker drives.
  void awaitPeers(FlagKind kind, const Turn& turn, const OpContext& op, SpinBudget& spin,
                  Transport* driven = nullptr);

  // The budget of a caller's thread that runs collectives past the queue
  // (Engine::runOnCaller); the thread that runs it holds the engine's submit
  // lock, so one at a time.
  SpinBudget& callerSpin() { return callerSpin_; }

  // How heavily other work wants this machine's cores now
  // (CpuContention::level: 0 where it does not, else the octave of runnable
  // tasks per core), by a margin of one task beyond them (a thread passing
  // through the run queue, one of this job's, would else flip the answer:
  // large_broadcast.h's choice flipped in 10-20% of quiet calls). Where
  // Options::contended is given: the top level where it says so, else 0.
  // About 1.4 us.
  int coresLoadLevel() const {
    if (givenContended_) return contended_() ? CpuContention::kTopLevel : 0;
    return contention_.level(/*spare=*/1);
  }
  // Whether `rank` says it sleeps on its doorbell (its peers ring it then).
  bool asleep(int rank) const {
    return lines(rank).control.asleep.load(std::memory_order_relaxed) != 0;
  }
  // How often this rank's waits have slept: each sleep is one wake-up, what
  // a small collective cannot afford more than once.
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }
  // How often a waiting thread moved off its peer's core (Options::separateCores).
  int coreMoves() const { return separation_.moves(); }

  // This rank gave up on the group: its peers' waits fail at once with
  // `reason`. Any thread; once.
  void fail(const std::string& reason);
  // This group was aborted here (ProcessGroup.abort()): this rank's own wait
  // fails at once with `reason`, and so do the peers'. Any thread.
  void abort(const std::string& reason);

 private:
  // Opens one wait of awaitPeers for `peer`'s `kind` flag; true where the
  // wait must sleep at once without spinning. Where the peer last set that
  // flag on the CPU this thread runs on, the two share a core (the
  // scheduler put them there, and under load they stay: a sleeping rank is
  // woken onto its waker's core): a spin would hold the core the peer needs
  // to come at all. On another core a spin cannot delay the peer, and a
  // sleep costs more than the wake-up: under load the scheduler runs a rank
  // that computes between collectives (and so has used its share) again
  // only after the busy processes' time slices. Such a wait spins at least
  // a probe's length even where the budget fell to 0, while those spins
  // pay (SpinBudget::startWait(atLeast): a peer late by milliseconds, still
  // computing, would cost a whole window of CPU a wait for nothing). With 4 busy
  // processes on the 2 cores, allreduces of 4 KiB-1 MiB took a time slice
  // a call (1-4 ms, 2-40x the UCX path's p50) in some runs with the budget
  // alone (benchmarks/RESULTS.md, "Busy cores").
  bool startWait(FlagKind kind, int peer, SpinBudget& spin);
  HostChannel(int rank, int size, HostSegment segment, std::unique_ptr<Doorbell> doorbell,
              PeerExits exits, std::vector<int> pids, bool peersReadable, bool sharesClock,
              const Options& options);
  RankLines& lines(int rank) const { return segment_.lines(rank); }
  // The first peer whose `kind` flag is below `seq`, or -1.
  int firstBehind(FlagKind kind, uint64_t turn) const;
  // Whether `peer`'s `kind` flag is at `turn` or later.
  bool flagCame(FlagKind kind, int peer, uint64_t turn) const;
  // While `peer`'s flag is behind: throws if it is in another collective
  // than `op` (its position), or has left or failed without setting it.
  void checkPeer(FlagKind kind, uint64_t turn, int peer, const OpContext& op) const;
  // Once `peer`'s flag has come: throws if it came from another collective.
  void checkFlag(FlagKind kind, int peer, const Turn& turn, const OpContext& op) const;
  std::string mismatch(int peer, const OpContext& op) const;
  // Whether `peer` gave up on the group in `op` or before it (its Failed
  // state); throwGaveUp says so with the reason it wrote.
  bool gaveUpIn(int peer, const OpContext& op) const;
  [[noreturn]] void throwGaveUp(int peer, const OpContext& op) const;
  // The timeout's message: the rank waited for, and every rank not yet in
  // the collective with where it is.
  std::string describeTimeout(int behind, const OpContext& op) const;
  // Throws for a peer whose process exited before its `kind` flag reached `turn`.
  void checkExits(FlagKind kind, uint64_t turn, const OpContext& op) const;
  void checkAborted(const OpContext& op) const;
  void sleep(FlagKind kind, uint64_t turn, const OpContext& op, Clock::time_point now,
             Transport* driven);
  // "allreduce(Float, 2 elements, SUM) #7" of `peer`'s position; or what
  // it last did when it is elsewhere.
  std::string whereIs(int peer) const;
  std::string where(const OpContext& op) const;
  void setState(RankState state, const std::string& reason);
  // Rings every peer that says it sleeps, after this rank's latest write.
  void ringSleepers() const;

  const int rank_;
  const int size_;
  HostSegment segment_;
  std::unique_ptr<Doorbell> doorbell_;
  PeerExits exits_;
  const std::vector<int> pids_;
  const bool peersReadable_;
  const bool sharesClock_;
  const bool yields_;
  SpinBudget callerSpin_;
  CpuContention contention_;           // read after a sleep (awaitPeers)...
  std::function<bool()> contended_;     // ...unless Options::contended is given
  const bool givenContended_;        // whether it was
  ChannelWriter writer_;
  CoreSeparation separation_;  // awaitPeers' thread
  GatherForms gatherForms_;
  GatherForms unevenForms_;
  uint64_t turns_ = 0;
  // The turn published ahead, until its collective adopts it; seq 0: none.
  // Written by the caller's thread before it queues that collective, read
  // by whichever thread runs it (the queue orders the two).
  struct Ahead {
    uint64_t seq = 0;
    Turn turn;
    size_t footprint = 0;
  } ahead_;
  bool adoptPending(uint64_t seq, size_t footprint, Turn& turn);
  // The wait oweWait left; turn 0: none. Written and read by the thread
  // that runs the group's collectives at the time (the engine runs one at a
  // time, on the caller's thread or the worker's).
  struct Owed {
    uint64_t turn = 0;
    uint64_t seq = 0;
    uint32_t word = 0;
    const char* name = nullptr;
  } owed_;

  Describe describe_;
  std::vector<pollfd> sleepFds_;  // the doorbell, then the peers' process fds
  std::vector<pollfd> drivenFds_;  // those, then a driven transport's (sleep())
  std::atomic<bool> stateSet_{false};  // Left or Failed said (once)
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> finished_{0};  // the latest collective this rank is done with
  mutable std::mutex reasonMutex_;
  std::string abortReason_;  // guarded by reasonMutex_
};

}  // namespace ringreduce
