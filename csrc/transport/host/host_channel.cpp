// The group's channel between its ranks on one host (host_channel.h)
#include "transport/host/host_channel.h"

#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "core/base/errors.h"
#include "core/base/core_yield.h"
#include "core/config/settings_agreement.h"
#include "transport/cross_memory.h"
#include "transport/transport.h"

namespace ringreduce {

namespace {

// How a rank fared in one round of the set-up, as it tells the others.
struct SetupRecord {
  uint64_t ok = 0;
  uint64_t pid = 0;
  uint64_t pidNamespace = 0;
  uint64_t netNamespace = 0;
  uint64_t clock = 0;  // Options::clock: its time namespace
  // Round 1: its crossMemoryProbeWord() and the value there; round 2:
  // whether it read every peer's (and lets them read its memory).
  uint64_t probeAddress = 0;
  uint64_t probeValue = 0;
  uint64_t readsPeers = 0;
  char reason[224] = {};
  char settings[192] = {};  // Options::agreedSettings
};

uint64_t namespaceInode(const char* path) {
  struct stat info {};
  return stat(path, &info) == 0 ? static_cast<uint64_t>(info.st_ino) : 0;
}

std::vector<uint8_t> bytesOf(const SetupRecord& record) {
  const auto* p = reinterpret_cast<const uint8_t*>(&record);
  return std::vector<uint8_t>(p, p + sizeof(record));
}

SetupRecord recordOf(const std::vector<uint8_t>& bytes) {
  SetupRecord record;
  std::memcpy(&record, bytes.data(), std::min(bytes.size(), sizeof(record)));
  record.reason[sizeof(record.reason) - 1] = '\0';
  record.settings[sizeof(record.settings) - 1] = '\0';
  return record;
}

// The first setting in which a rank differs from rank 0 (settings_agreement.h).
std::string disagreementOf(const std::vector<SetupRecord>& all) {
  std::vector<std::string> texts;
  for (const SetupRecord& record : all) texts.emplace_back(record.settings);
  return settingsDisagreement(texts);
}

SetupRecord verdict(bool ok, const std::string& reason) {
  SetupRecord record;
  record.ok = ok ? 1 : 0;
  std::snprintf(record.reason, sizeof(record.reason), "%s", reason.c_str());
  return record;
}

// Publishes `mine` under `key`/rank and reads every rank's.
std::vector<SetupRecord> exchange(KeyValueStore& store, const std::string& key, int rank,
                                  int size, const SetupRecord& mine,
                                  std::chrono::milliseconds timeout) {
  store.set(key + std::to_string(rank), bytesOf(mine));
  std::vector<SetupRecord> all(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    all[r] = r == rank ? mine : recordOf(store.get(key + std::to_string(r), timeout));
  }
  return all;
}

// The first rank that says no, and why; "" when all say yes.
// Whether this rank reads each peer's probe word through cross-memory
// attach and finds the value the peer put there (so the pid is that very
// process, not a namesake: transport/cross_memory.h).
bool readsEveryPeer(const std::vector<SetupRecord>& all, int rank) {
  for (size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    uint64_t value = 0;
    if (crossMemoryRead(static_cast<int>(all[r].pid), all[r].probeAddress, &value,
                        sizeof(value)) != 0 ||
        value != all[r].probeValue) {
      return false;
    }
  }
  return true;
}

std::string firstRefusal(const std::vector<SetupRecord>& all) {
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].ok) return "rank " + std::to_string(r) + ": " + all[r].reason;
  }
  return "";
}

}  // namespace

std::unique_ptr<HostChannel> HostChannel::open(KeyValueStore& store, const std::string& prefix,
                                               int rank, int size, const Options& options,
                                               std::chrono::milliseconds timeout,
                                               std::string* why) {
  // Rank 0 creates the segment, with its buffer size; its name, where to
  // open it and that size (or why there is none) tell the others whether
  // to go on.
  HostSegment segment;
  size_t bufferBytes = options.bufferBytes;
  std::string name;
  std::string path;
  if (rank == 0) {
    std::string named;
    try {
      if (bufferBytes == 0) throw Error("RINGREDUCE_SHM_BYTES=0 on rank 0");
      segment = HostSegment::create(size, bufferBytes);
      named = segment.name() + " " + segment.path() + " " + std::to_string(bufferBytes);
    } catch (const std::exception& e) {
      named = std::string("!") + e.what();
    }
    store.set(prefix + "name", std::vector<uint8_t>(named.begin(), named.end()));
    name = named[0] == '!' ? named : segment.name();
  } else {
    const std::vector<uint8_t> named = store.get(prefix + "name", timeout);
    name.assign(named.begin(), named.end());
    const size_t first = name.find(' ');
    const size_t second = first == std::string::npos ? first : name.find(' ', first + 1);
    if (!name.empty() && name[0] != '!' && second != std::string::npos) {
      bufferBytes = std::stoull(name.substr(second + 1));
      path = name.substr(first + 1, second - first - 1);
      name.resize(first);
    }
  }
  if (name.empty() || name[0] == '!') {
    *why = "rank 0: " + (name.empty() ? std::string("no segment name") : name.substr(1));
    return nullptr;
  }

  // Round 1: every rank maps it, binds its doorbell and says which
  // process it is; then rank 0 closes the door it was opened through.
  std::unique_ptr<Doorbell> doorbell;
  SetupRecord mine;
  try {
    // 0 here: this rank wants none, which turns it off for the whole group.
    if (options.bufferBytes == 0) throw Error("RINGREDUCE_SHM_BYTES=0");
    if (rank != 0) segment = HostSegment::open(name, path, size, bufferBytes);
    doorbell = std::make_unique<Doorbell>(name, rank, size);
    mine = verdict(true, "");
  } catch (const std::exception& e) {
    mine = verdict(false, e.what());
  }
  mine.pid = static_cast<uint64_t>(getpid());
  mine.pidNamespace = namespaceInode("/proc/self/ns/pid");
  mine.netNamespace = namespaceInode("/proc/self/ns/net");
  // 0 where the kernel has no time namespaces (before 5.6): then every
  // process reads one clock, and every rank says 0 alike.
  mine.clock = options.clock != 0 ? options.clock : namespaceInode("/proc/self/ns/time");
  if (mine.ok && (mine.pidNamespace == 0 || mine.netNamespace == 0)) {
    mine = verdict(false, "cannot read /proc/self/ns (pid and network namespaces unknown)");
  }
  mine.probeAddress = reinterpret_cast<uintptr_t>(crossMemoryProbeWord());
  mine.probeValue = *crossMemoryProbeWord();
  std::snprintf(mine.settings, sizeof(mine.settings), "%s", options.agreedSettings.c_str());
  const std::vector<SetupRecord> mapped = exchange(store, prefix + "mapped/", rank, size, mine,
                                                   timeout);
  if (rank == 0) segment.unlink();
  const std::string disagreement = disagreementOf(mapped);
  if (!disagreement.empty()) {
    throw InvalidArgument("ringreduce: rank " + std::to_string(rank) + ": " + disagreement);
  }
  *why = firstRefusal(mapped);
  if (!why->empty()) return nullptr;

  // Round 2: the peers' deaths must reach this rank (their process fds)
  // and its doorbell must reach them (one network namespace: abstract
  // sockets are per namespace).
  PeerExits exits;
  SetupRecord usable = verdict(true, "");
  std::vector<long> pids;
  for (int r = 0; r < size; ++r) {
    pids.push_back(static_cast<long>(mapped[r].pid));
    if (mapped[r].pidNamespace != mine.pidNamespace || mapped[r].netNamespace != mine.netNamespace) {
      usable = verdict(false, "rank " + std::to_string(r) +
                                  " runs in another pid or network namespace");
    }
  }
  if (usable.ok) {
    try {
      exits = PeerExits(pids, rank);
    } catch (const std::exception& e) {
      usable = verdict(false, e.what());
    }
  }
  usable.readsPeers = usable.ok && options.crossMemory && readsEveryPeer(mapped, rank);
  const std::vector<SetupRecord> verdicts =
      exchange(store, prefix + "usable/", rank, size, usable, timeout);
  *why = firstRefusal(verdicts);
  if (!why->empty()) return nullptr;
  const bool peersReadable = std::all_of(verdicts.begin(), verdicts.end(),
                                         [](const SetupRecord& r) { return r.readsPeers != 0; });
  // Ranks on different clocks still share the channel (its waits compare
  // no stamps across ranks); only when a peer announced means nothing here.
  const bool sharesClock = std::all_of(mapped.begin(), mapped.end(), [&](const SetupRecord& r) {
    return r.clock == mine.clock;
  });
  auto& control = segment.lines(rank).control;
  control.pid.store(mine.pid, std::memory_order_relaxed);
  control.pidNamespace.store(mine.pidNamespace, std::memory_order_relaxed);
  control.netNamespace.store(mine.netNamespace, std::memory_order_relaxed);
  std::vector<int> processIds(pids.begin(), pids.end());
  return std::unique_ptr<HostChannel>(new HostChannel(rank, size, std::move(segment),
                                                      std::move(doorbell), std::move(exits),
                                                      std::move(processIds), peersReadable,
                                                      sharesClock, options));
}

HostChannel::HostChannel(int rank, int size, HostSegment segment,
                         std::unique_ptr<Doorbell> doorbell, PeerExits exits,
                         std::vector<int> pids, bool peersReadable, bool sharesClock,
                         const Options& options)
    : rank_(rank),
      size_(size),
      segment_(std::move(segment)),
      doorbell_(std::move(doorbell)),
      exits_(std::move(exits)),
      pids_(std::move(pids)),
      peersReadable_(peersReadable),
      sharesClock_(sharesClock),
      yields_(options.yields),
      callerSpin_(options.callerSpin, options.adaptiveSpin),
      contended_(options.contended),
      givenContended_(static_cast<bool>(options.contended)),
      writer_(options.stores),
      separation_(options.separateCores && !options.yields, nullptr, options.moveOffCpu) {
  if (!contended_) contended_ = [this] { return contention_.contended(); };
  if (yields_) callerSpin_.setDescheduledGap(kLongYield);
  // What a sleep polls, prepared once: the doorbell, then each peer's process.
  sleepFds_.push_back({doorbell_->fd(), POLLIN, 0});
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) sleepFds_.push_back({exits_.fd(peer), POLLIN, 0});
  }
}

HostChannel::~HostChannel() {
  if (!stateSet_.exchange(true)) setState(RankState::Left, "");
}

void HostChannel::setState(RankState state, const std::string& reason) {
  ReasonLines& text = lines(rank_).reason;
  std::snprintf(text.text, sizeof(text.text), "%s", reason.c_str());
  // The collective the failure leaves without a result on this rank: the
  // announced one, unless this rank was done with it already (a shrink that
  // aborts the group right after an allreduce a slower peer still waits in).
  const uint64_t at = lines(rank_).position.seq.load(std::memory_order_relaxed);
  const uint64_t failedAt = finished_.load(std::memory_order_relaxed) >= at ? at + 1 : at;
  lines(rank_).control.failedAt.store(failedAt, std::memory_order_relaxed);
  lines(rank_).control.state.store(static_cast<uint32_t>(state), std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Every peer, asleep or about to be: a departure or failure is rare.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) doorbell_->ring(peer);
  }
}

void HostChannel::fail(const std::string& reason) {
  if (stateSet_.exchange(true)) return;  // the first reason is the one the peers read
  setState(RankState::Failed, reason);
}

void HostChannel::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reasonMutex_);
    if (abortReason_.empty()) abortReason_ = reason;
  }
  aborted_.store(true, std::memory_order_release);
  doorbell_->ring(rank_);  // this rank's own sleep, if it sleeps
  fail(reason);
}

void HostChannel::announce(uint64_t seq, uint32_t word, const void* detail, size_t bytes,
                           std::chrono::steady_clock::time_point at) {
  PositionLine& position = lines(rank_).position;
  bytes = std::min(bytes, PositionLine::kDetailBytes);
  uint64_t words[PositionLine::kDetailBytes / 8] = {};
  std::memcpy(words, detail, bytes);
  // A reader takes seq (acquire), the fields, then seq again: equal means
  // the fields belong to it. Zeroed first, so a torn read sees a change.
  position.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  position.word.store(word, std::memory_order_relaxed);
  position.detailBytes.store(static_cast<uint32_t>(bytes), std::memory_order_relaxed);
  for (size_t i = 0; i < PositionLine::kDetailBytes / 8; ++i) {
    position.detail[i].store(words[i], std::memory_order_relaxed);
  }
  position.announcedAt.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count(),
      std::memory_order_relaxed);
  position.seq.store(seq, std::memory_order_release);
  // A peer asleep in an earlier collective of the same number waits for a
  // flag this rank will not set if it now calls something else: it must
  // wake to see that.
  ringSleepers();
}

std::optional<std::chrono::steady_clock::time_point> HostChannel::peersAnnouncedAt(
    uint64_t seq) const {
  if (!sharesClock_) return std::nullopt;  // a peer's stamp is not on this rank's clock
  int64_t last = std::numeric_limits<int64_t>::min();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const PositionLine& position = lines(peer).position;
    // As whereIs reads it: seq, the field, seq again (announce zeroes seq
    // before it rewrites the fields).
    if (position.seq.load(std::memory_order_acquire) != seq) return std::nullopt;
    const int64_t at = position.announcedAt.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (position.seq.load(std::memory_order_relaxed) != seq) return std::nullopt;
    last = std::max(last, at);
  }
  if (last == std::numeric_limits<int64_t>::min()) return std::nullopt;  // no peer
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds(last)));
}

void HostChannel::ringSleepers() const {
  // Dekker with a sleeper (sleep()): it says it sleeps, fences, then reads
  // the flags and positions; this side writes them, fences, then reads
  // whether it sleeps. One of the two sees the other's write.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && lines(peer).control.asleep.load(std::memory_order_relaxed) != 0) {
      doorbell_->ring(peer);
    }
  }
}

bool HostChannel::adoptPending(uint64_t seq, size_t footprint, Turn& turn) {
  if (ahead_.seq != seq || ahead_.footprint != footprint) {
    throw Error("ringreduce: internal error on rank " + std::to_string(rank_) + ": collective #" +
                std::to_string(seq) + " takes a host-channel turn of " +
                std::to_string(footprint) + " bytes while #" + std::to_string(ahead_.seq) +
                "'s turn of " + std::to_string(ahead_.footprint) +
                " bytes, published ahead, was never taken");
  }
  turn = ahead_.turn;
  ahead_ = {};
  return true;
}

void HostChannel::publish(FlagKind kind, const Turn& turn, const OpContext& op) {
  FlagLine& flag = lines(rank_).flags[static_cast<int>(kind)];
  flag.words[turn.number & 1].store(op.fingerprintWord, std::memory_order_relaxed);
  flag.cpu.store(sched_getcpu(), std::memory_order_relaxed);  // a few ns (rseq)
  flag.value.store(turn.number, std::memory_order_release);
  ringSleepers();
}

int HostChannel::firstBehind(FlagKind kind, uint64_t turn) const {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    if (lines(peer).flags[static_cast<int>(kind)].value.load(std::memory_order_acquire) < turn) {
      return peer;
    }
  }
  return -1;
}

std::string HostChannel::where(const OpContext& op) const {
  return "ringreduce: " + op.describe() + " on rank " + std::to_string(rank_);
}

std::string HostChannel::whereIs(int peer) const {
  const PositionLine& position = lines(peer).position;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t seq = position.seq.load(std::memory_order_acquire);
    uint64_t words[PositionLine::kDetailBytes / 8];
    for (size_t i = 0; i < PositionLine::kDetailBytes / 8; ++i) {
      words[i] = position.detail[i].load(std::memory_order_relaxed);
    }
    const uint32_t bytes = position.detailBytes.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq != position.seq.load(std::memory_order_relaxed)) continue;
    if (seq == 0) return "has not started a collective of this group yet";
    const std::string what = describe_ ? describe_(words, bytes) : std::string("a collective");
    return "is in " + what + " #" + std::to_string(seq);
  }
  return "is moving on";
}

bool HostChannel::flagCame(FlagKind kind, int peer, uint64_t turn) const {
  return lines(peer).flags[static_cast<int>(kind)].value.load(std::memory_order_acquire) >= turn;
}

void HostChannel::checkPeer(FlagKind kind, uint64_t turn, int peer, const OpContext& op) const {
  const auto state =
      static_cast<RankState>(lines(peer).control.state.load(std::memory_order_acquire));
  // A peer that set its flag and then left or gave up is not behind: the
  // flag (written before its state, read after it here) says so.
  if (state != RankState::Active && flagCame(kind, peer, turn)) return;
  const PositionLine& position = lines(peer).position;
  const uint64_t seq = position.seq.load(std::memory_order_acquire);
  const uint32_t word = position.word.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  // Named before a failure, and with it (mismatch()): a peer that found the
  // mismatch first gave up over it, and its reason names this rank's
  // collective, not its own.
  if (seq == op.seq && position.seq.load(std::memory_order_relaxed) == seq &&
      word != op.fingerprintWord) {
    throw TransportError(mismatch(peer, op));
  }
  if (state == RankState::Failed) throwGaveUp(peer, op);
  if (state == RankState::Left) {
    throw TransportError(where(op) + ": rank " + std::to_string(peer) +
                         " has left the group (it destroyed its process group or exited) "
                         "without joining " + op.describe() + " (did it skip this call?)");
  }
}

bool HostChannel::gaveUpIn(int peer, const OpContext& op) const {
  const ControlLine& control = lines(peer).control;
  return control.state.load(std::memory_order_acquire) ==
             static_cast<uint32_t>(RankState::Failed) &&
         control.failedAt.load(std::memory_order_relaxed) <= op.seq;
}

void HostChannel::throwGaveUp(int peer, const OpContext& op) const {
  throw TransportError(where(op) + " failed: rank " + std::to_string(peer) +
                       " gave up on the group: " + std::string(lines(peer).reason.text));
}

void HostChannel::checkFlag(FlagKind kind, int peer, const Turn& turn,
                            const OpContext& op) const {
  const FlagLine& flag = lines(peer).flags[static_cast<int>(kind)];
  const uint64_t seq = flag.value.load(std::memory_order_acquire);
  const uint32_t word = flag.words[turn.number & 1].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  // Unless it moved on meanwhile (it finished the turn, having found the
  // words equal), a word not this collective's is named first: a peer that
  // found the mismatch before this rank gave up over it (checkPeer's why).
  if (seq == turn.number && flag.value.load(std::memory_order_relaxed) == seq &&
      word != op.fingerprintWord) {
    throw TransportError(mismatch(peer, op));
  }
  // A peer that gave up in this collective (after it set its flag: an
  // abort, a failure with another peer) leaves it without a result: this
  // rank must not complete it either.
  throwIfGaveUp(peer, op);
}

std::string HostChannel::describeTimeout(int behind, const OpContext& op) const {
  // The ranks that have not reached this collective, and where each is.
  std::string late;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || lines(peer).position.seq.load(std::memory_order_acquire) >= op.seq) {
      continue;
    }
    late += (late.empty() ? "" : ", ") + std::to_string(peer) + " (it " + whereIs(peer) + ")";
  }
  return "ringreduce: " + op.describe() + " timed out after " + std::to_string(op.timeout.count()) +
         " ms on rank " + std::to_string(rank_) +
         " (operation timeout reached): still waiting for rank " + std::to_string(behind) +
         " (is that rank alive and calling the same collective?); " +
         (late.empty() ? "every rank was seen in " + op.describe() +
                             ", so one is stuck inside it"
                       : "rank(s) not seen in " + op.describe() + ": " + late);
}

std::string HostChannel::mismatch(int peer, const OpContext& op) const {
  // A peer that gave up (over this mismatch, found first on its side, or an
  // abort before this rank came) is named in both ways: where it is, and why
  // it gave up.
  const std::string gaveUp = gaveUpIn(peer, op) ? "; rank " + std::to_string(peer) +
                                                      " gave up on the group: " +
                                                      std::string(lines(peer).reason.text)
                                                : std::string();
  const std::string differ = " (the operation, dtype, size, reduce op or root differ)";
  // The peer has announced a later collective than this one: it ran another
  // where this rank ran this one (a wait a sender owed, payOwedWait, reads
  // the flag of a collective both have left; or the peer ran one this rank
  // skipped). Where it is now is not what differed.
  if (lines(peer).position.seq.load(std::memory_order_acquire) > op.seq) {
    return where(op) + ": rank " + std::to_string(peer) +
           " is in a different collective: it ran another as #" + std::to_string(op.seq) +
           differ + " and since then " + whereIs(peer) + gaveUp;
  }
  return where(op) + ": rank " + std::to_string(peer) + " is in a different collective: it " +
         whereIs(peer) + differ + gaveUp;
}

void HostChannel::checkExits(FlagKind kind, uint64_t turn, const OpContext& op) const {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || !exits_.exited(peer)) continue;
    // Its flag came before it exited: this turn has what it needs of it.
    if (flagCame(kind, peer, turn)) continue;
    // A rank that destroyed its group first says so: leaving is no death.
    if (lines(peer).control.state.load(std::memory_order_acquire) ==
        static_cast<uint32_t>(RankState::Active)) {
      throw TransportError(where(op) + " failed: rank " + std::to_string(peer) +
                           " is gone (its process exited); the process died");
    }
  }
}

bool HostChannel::awaitPeerDoneCopying(FlagKind kind, int peer, const Turn& turn,
                                       Clock::time_point until) const noexcept {
  try {
    while (true) {
      if (flagCame(kind, peer, turn.number) || exits_.exited(peer) ||
          lines(peer).control.state.load(std::memory_order_acquire) ==
              static_cast<uint32_t>(RankState::Left)) {
        return true;
      }
      if (Clock::now() >= until) return false;
      // A failure's path, not a collective's: no need to spin.
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  } catch (...) {
    return false;
  }
}

void HostChannel::throwUnreadable(int peer, const OpContext& op, int error) const {
  if (error == ESRCH) {
    throw TransportError(where(op) + " failed: rank " + std::to_string(peer) +
                         " is gone (its process exited); the process died");
  }
  // A peer that gave up on this collective (another rank died, it was
  // aborted) has left it and may have freed the block it put up: the read
  // fails with EFAULT, and the cause is what made it give up. Its state is
  // set before it returns to its caller, so before anything is freed.
  throwIfGaveUp(peer, op);
  throw TransportError(where(op) + " failed: could not read rank " + std::to_string(peer) +
                       "'s block from its memory (process " + std::to_string(pid(peer)) +
                       "): " + std::strerror(error));
}

void HostChannel::checkAborted(const OpContext& op) const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(reasonMutex_);
  throw TransportError(where(op) + ": " + abortReason_);
}

void HostChannel::awaitPeers(FlagKind kind, const Turn& turn, const OpContext& op,
                             SpinBudget& spin, Transport* driven) {
  int behind = firstBehind(kind, turn.number);
  if (behind >= 0) {
    bool besidePeer = startWait(kind, behind, spin);
    const bool besideFirst = besidePeer;
    const int first = behind;
    // The syscall that asks after the peers' processes runs every so many
    // passes of the spin, and before every sleep.
    constexpr unsigned kPassesPerExitCheck = 1024;
    unsigned passes = 0;
    while (behind >= 0) {
      if (driven != nullptr) driven->progress();
      checkAborted(op);
      checkPeer(kind, turn.number, behind, op);
      if (++passes % kPassesPerExitCheck == 0) checkExits(kind, turn.number, op);
      const Clock::time_point now = spin.now();  // the pass's one clock read
      if (now >= op.deadline) {
        spin.abandon();
        throw TimeoutError(describeTimeout(behind, op));
      }
      if (!besidePeer && spin.keepSpinning(now)) {
        if (yields_) yieldCore();
        behind = firstBehind(kind, turn.number);
      } else {
        sleep(kind, turn.number, op, now, driven);
        behind = firstBehind(kind, turn.number);
        // Woken by the flags: how soon says whether a spin would have paid
        // (SpinBudget::wokeAfter), unless other processes want the cores
        // and the peer was late waiting for one (cpu_contention.h), or it
        // shares this core (a spin would have held it).
        if (behind < 0 && !besidePeer && !contended_()) spin.wokeAfter(spin.now() - now);
        if (behind >= 0) besidePeer = startWait(kind, behind, spin);
      }
    }
    spin.finishWait();
    // Of two ranks on one core the higher moves (core_separation.h).
    if (rank_ > first) separation_.noteWait(besideFirst, contended_);
  }
  // Every peer's flag is here: the data is of this same collective.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) checkFlag(kind, peer, turn, op);
  }
}

bool HostChannel::startWait(FlagKind kind, int peer, SpinBudget& spin) {
  const int peerCpu =
      lines(peer).flags[static_cast<int>(kind)].cpu.load(std::memory_order_relaxed);
  // Oversubscribed (yields_), ranks share cores by construction and yield
  // to each other at every pass: as before.
  if (yields_) {
    spin.startWait();
    return false;
  }
  if (peerCpu >= 0 && peerCpu == sched_getcpu()) {
    spin.abandon();  // no spin, not the budget's choice: nothing to learn
    return true;
  }
  spin.startWait(spin.probeBudget());
  return false;
}

void HostChannel::payOwedWait(const OpContext& op, SpinBudget& spin, Transport* driven) {
  if (owed_.turn == 0) return;
  if (op.publishOnly() && owesUnsettledWait()) {
    throw Error("ringreduce: internal error: " + op.describe() +
                " would wait for its peers in a run that only publishes ahead (a wait owed "
                "since " + std::string(owed_.name) + " #" + std::to_string(owed_.seq) + ")");
  }
  // The collective the wait belongs to, under this one's deadline: a peer
  // that never came to it times out naming it, one that ran another
  // collective there is a mismatch of it.
  OpContext owedOp = op;
  owedOp.opName = owed_.name;
  owedOp.seq = owed_.seq;
  owedOp.fingerprintWord = owed_.word;
  owedOp.ahead = nullptr;
  const Turn turn{owed_.turn, static_cast<int>(owed_.turn & 1), 0};
  // The error names the owed collective, which returned long ago; the
  // caller sees it from this one, which never ran: say so.
  const auto raisedBy = [&] { return "; raised by " + op.describe() + ", which did not run"; };
  try {
    awaitPeers(FlagKind::Input, turn, owedOp, spin, driven);
  } catch (const TimeoutError& e) {
    throw TimeoutError(e.what() + raisedBy());
  } catch (const TransportError& e) {
    throw TransportError(e.what() + raisedBy());
  }
  owed_ = {};
}

void HostChannel::sleep(FlagKind kind, uint64_t turn, const OpContext& op,
                        Clock::time_point now, Transport* driven) {
  std::atomic<uint32_t>& asleep = lines(rank_).control.asleep;
  struct Awake {  // however the sleep ends, this rank no longer sleeps
    std::atomic<uint32_t>& word;
    ~Awake() { word.store(0, std::memory_order_relaxed); }
  } awake{asleep};
  asleep.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker: see publish()
  const int behind = firstBehind(kind, turn);
  if (behind < 0) return;
  checkPeer(kind, turn, behind, op);  // a state set before this rank said it sleeps rang no one
  checkExits(kind, turn, op);
  long long timeoutMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - now).count() + 1;
  // A peer whose flag for this turn came is not waited for: its exit (a
  // peer that finished its part and ended) must neither fail the turn nor
  // wake this sleep again and again (an exited process's fd stays readable).
  for (size_t i = 1, peer = 0; i < sleepFds_.size(); ++i, ++peer) {
    if (static_cast<int>(peer) == rank_) ++peer;
    sleepFds_[i].fd = flagCame(kind, static_cast<int>(peer), turn) ? -1 : exits_.fd(peer);
  }
  pollfd* fds = sleepFds_.data();
  size_t count = sleepFds_.size();
  if (driven != nullptr) {
    // Beside the transport this thread drives (awaitPeers): its events end
    // the sleep too, and the spin that follows progresses them.
    if (!driven->armForSleep()) return;  // events pending: progress first
    constexpr size_t kMaxTransportFds = 4;
    int transportFds[kMaxTransportFds];
    const size_t extra = driven->eventFds(transportFds, kMaxTransportFds);
    drivenFds_.assign(sleepFds_.begin(), sleepFds_.end());
    for (size_t i = 0; i < extra; ++i) drivenFds_.push_back({transportFds[i], POLLIN, 0});
    // A transport without an fd is looked at every millisecond instead.
    if (extra == 0) timeoutMs = std::min<long long>(timeoutMs, 1);
    fds = drivenFds_.data();
    count = drivenFds_.size();
  }
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  const int ready = poll(fds, count, static_cast<int>(std::min<long long>(timeoutMs, 1 << 30)));
  if (ready <= 0) return;
  if (fds[0].revents != 0) doorbell_->drain();
  for (size_t i = 1; i < sleepFds_.size(); ++i) {
    if (fds[i].revents != 0) checkExits(kind, turn, op);
  }
}

}  // namespace ringreduce
